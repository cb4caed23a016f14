// The latency of recent attempts over time (p50 and p90), drawn as plain SVG.

import { h, short } from "./dom.js";

/** The SVG namespace, as the HTML parser assigns it. */
const NS = (() => {
  const d = document.createElement("div");
  d.innerHTML = "<svg></svg>";
  return d.firstChild.namespaceURI;
})();

function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function quantile(sorted, q) {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i];
}

/**
 * Attempts ({at, duration_ms}) in time order, cut into up to `n` groups of
 * equal size (at least two attempts each when there are two); each point
 * is {t (ms), p50, p90, count}.
 */
export function series(attempts, n = 8) {
  const list = attempts
    // Only attempts the endpoint answered: one that failed to connect or
    // timed out has no latency to plot (its duration is not a response time).
    .filter((a) => a.at && typeof a.duration_ms === "number" && typeof a.status_code === "number")
    .map((a) => ({ t: new Date(a.at).getTime(), d: a.duration_ms }))
    .sort((a, b) => a.t - b.t);
  if (!list.length) return [];
  const groups = Math.max(1, Math.min(n, Math.floor(list.length / 2)));
  const out = [];
  for (let g = 0; g < groups; g++) {
    const part = list.slice(Math.floor((g * list.length) / groups), Math.floor(((g + 1) * list.length) / groups));
    const ds = part.map((a) => a.d).sort((a, b) => a - b);
    out.push({ t: part[Math.floor(part.length / 2)].t, p50: quantile(ds, 0.5), p90: quantile(ds, 0.9), count: part.length });
  }
  return out;
}

const H = 180;
const PAD = { l: 46, r: 12, t: 12, b: 26 };

/** Renders the chart into `el` (a <figure>). */
export function drawLatency(el, attempts) {
  const pts = series(attempts);
  if (!pts.length) {
    el.replaceChildren(h("figcaption", null, "Latency of recent attempts"), h("p", { class: "muted empty" }, "No attempts yet. Press “Send test event” to try the endpoint; each attempt's latency is charted here."));
    return;
  }
  // Drawn at the width it is shown at, so its labels keep their size.
  const W = Math.max(280, Math.min(760, el.clientWidth || 600));
  const max = Math.max(1, ...pts.map((p) => p.p90));
  const t0 = pts[0].t;
  const t1 = pts[pts.length - 1].t;
  const x = (t) => PAD.l + (t1 === t0 ? (W - PAD.l - PAD.r) / 2 : ((t - t0) / (t1 - t0)) * (W - PAD.l - PAD.r));
  const y = (v) => H - PAD.b - (v / max) * (H - PAD.t - PAD.b);
  const line = (key, cls) => s("polyline", { class: `line ${cls}`, points: pts.map((p) => `${x(p.t).toFixed(1)},${y(p[key]).toFixed(1)}`).join(" ") });
  const dots = (key, cls) => pts.map((p) => s("circle", { class: `dot ${cls}`, cx: x(p.t).toFixed(1), cy: y(p[key]).toFixed(1), r: 3 }, s("title", null, `${key} ${p[key]} ms (${p.count} attempts)`)));
  const grid = [0, 0.5, 1].map((f) => [
    s("line", { class: "grid", x1: PAD.l, x2: W - PAD.r, y1: y(max * f), y2: y(max * f) }),
    s("text", { class: "axis", x: PAD.l - 6, y: y(max * f) + 4, "text-anchor": "end" }, `${Math.round(max * f)} ms`),
  ]).flat();
  const iso = (t) => new Date(t).toISOString();
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `p50 and p90 latency of ${attempts.length} recent attempts`, class: "latency" },
    ...grid,
    s("text", { class: "axis", x: PAD.l, y: H - 6 }, short(iso(t0))),
    s("text", { class: "axis", x: W - PAD.r, y: H - 6, "text-anchor": "end" }, short(iso(t1))),
    line("p90", "p90"), line("p50", "p50"), ...dots("p90", "p90"), ...dots("p50", "p50"));
  el.replaceChildren(
    h("figcaption", null, "Latency of recent attempts ",
      h("span", { class: "legend p50" }, "p50"), " ", h("span", { class: "legend p90" }, "p90")),
    svg);
}
