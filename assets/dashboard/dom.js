// Formatting helpers of the dashboard, plus the shared DOM helpers.

import { h } from "../lib/dom.js";

export { h, valueName } from "../lib/dom.js";

const pad = (n) => String(n).padStart(2, "0");

/** Local date and time, "2026-07-17 05:12:44". */
export function stamp(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (isNaN(d)) return iso;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** "12 s ago", "in 3 min". */
export function relative(iso) {
  if (!iso) return "";
  const s = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  const a = Math.abs(s);
  const text = a < 60 ? `${a} s` : a < 3600 ? `${Math.round(a / 60)} min` : a < 86400 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  return s > 1 ? `in ${text}` : a <= 1 ? "now" : `${text} ago`;
}

/** The local time of day for today, the full stamp otherwise. */
export function short(iso) {
  const d = new Date(iso);
  return !isNaN(d) && d.toDateString() === new Date().toDateString() ? stamp(iso).slice(11) : stamp(iso);
}

/** A <time> showing the local stamp (`compact`: time only when today), with the relative time as a hint. */
export function when(iso, compact = false) {
  if (!iso) return h("span", { class: "muted" }, "—");
  return h("time", { datetime: iso, title: `${stamp(iso)} (${relative(iso)})` }, compact ? short(iso) : stamp(iso));
}

export function badge(status) {
  return h("span", { class: `badge badge-${status}` }, status);
}

export function pretty(value) {
  return JSON.stringify(value, null, 2);
}
