// Endpoint health, computed from the recent deliveries and their attempts,
// with the latency chart and "Send test event".

import { api, attemptResult, problem, sendNow } from "./api.js";
import { drawLatency } from "./chart.js";
import { h, stamp } from "./dom.js";

const RECENT_EVENTS = 100;
const DETAILED = 30;
const STATUSES = ["pending", "failed", "succeeded", "dead"];

/** The q-quantile (nearest rank) of sorted numbers. */
export function quantile(sorted, q) {
  if (!sorted.length) return null;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i];
}

/** Whether an attempt error says the endpoint answered 410 Gone and is off. */
export function isGone(error) {
  return /\b410\b|E_GONE|gone|endpoint_disabled|disabled/i.test(error || "");
}

/** Health figures from events (summaries) and attempts (with `event_id`). */
export function summarize(events, attempts) {
  const counts = Object.fromEntries(STATUSES.map((s) => [s, 0]));
  for (const e of events) counts[e.status] = (counts[e.status] || 0) + 1;
  const newest = [...attempts].sort((a, b) => (a.at < b.at ? 1 : -1));
  const ok = newest.filter((a) => a.status_code >= 200 && a.status_code < 300).length;
  const lat = newest.filter((a) => typeof a.status_code === "number").map((a) => a.duration_ms).filter((d) => typeof d === "number").sort((a, b) => a - b);
  const lastError = newest.find((a) => a.error);
  return {
    counts,
    attempts: newest.length,
    successRate: newest.length ? ok / newest.length : null,
    p50: quantile(lat, 0.5),
    p90: quantile(lat, 0.9),
    lastError,
    gone: newest.length > 0 && isGone(newest[0].error),
  };
}

function stat(label, value, cls) {
  return h("div", { class: `stat ${cls || ""}` }, h("div", { class: "stat-value" }, value), h("div", { class: "stat-label" }, label));
}

export class Health {
  /** els: {stats, warning, note, chart, test, testResult}; onChange() after a test is sent. */
  constructor(els, onChange) {
    this.els = els;
    this.onChange = onChange;
    this.testing = null;
    els.test.addEventListener("click", () => this.sendTest());
  }

  async load() {
    const r = await api("GET", `/api/v1/events?limit=${RECENT_EVENTS}`);
    if (!r.ok) {
      this.els.note.textContent = problem(r);
      return;
    }
    const events = r.body.data;
    const tried = events.filter((e) => e.attempt_count > 0).slice(0, DETAILED);
    const details = await Promise.all(tried.map((e) => api("GET", `/api/v1/events/${encodeURIComponent(e.event_id)}`)));
    const attempts = details.filter((d) => d.ok).flatMap((d) => (d.body.attempts || []).map((a) => ({ ...a, event_id: d.body.event_id })));
    this.render(summarize(events, attempts), events.length);
    drawLatency(this.els.chart, attempts);
  }

  render(s, n) {
    const pct = s.successRate === null ? "—" : `${Math.round(s.successRate * 100)}%`;
    const ms = (v) => (v === null ? "—" : `${v} ms`);
    const rateClass = s.successRate === null ? "" : s.successRate >= 0.95 ? "good" : s.successRate >= 0.5 ? "warn" : "bad";
    this.els.stats.replaceChildren(
      stat(`success (${s.attempts} recent attempts)`, pct, rateClass),
      stat("median latency", ms(s.p50)),
      stat("p90 latency", ms(s.p90)),
      ...STATUSES.map((k) => stat(k, s.counts[k], s.counts[k] && (k === "dead" || k === "failed") ? "bad" : "")),
      h("div", { class: "stat wide" },
        h("div", { class: "stat-label" }, "last error"),
        s.lastError
          ? h("div", { class: "last-error" }, h("span", { class: "mono" }, s.lastError.error), h("span", { class: "muted" }, ` — attempt #${s.lastError.number} of ${s.lastError.event_id}, ${stamp(s.lastError.at)}`))
          : h("div", { class: "muted" }, "none")));
    this.els.note.textContent = n ? `from the newest ${n} deliveries` : "no deliveries yet";
    const warnings = [];
    if (s.gone) {
      warnings.push("The endpoint answered 410 Gone, so it is disabled: deliveries wait until the chatbot's webhook_url is changed or the endpoint is re-enabled (PATCH /api/v1/chatbots/{id} with the admin token); then they all go out, the one that got the 410 included.");
    }
    if (s.counts.dead) warnings.push(`${s.counts.dead} ${s.counts.dead === 1 ? "delivery is" : "deliveries are"} dead after the last retry: fix the receiver, then use “Redeliver all failed/dead”.`);
    this.els.warning.hidden = !warnings.length;
    this.els.warning.replaceChildren(...warnings.map((w) => h("p", null, w)));
  }

  /** Sends a `webhook.test` event now (whatever the circuit breaker says) and shows its answer. */
  async sendTest() {
    const out = this.els.testResult;
    this.els.test.disabled = true;
    out.className = "note";
    out.textContent = "Sending a test event…";
    const r = await api("POST", "/api/v1/events/test");
    if (!r.ok) {
      this.els.test.disabled = false;
      out.className = "note error";
      out.textContent = `The test event was not sent: ${problem(r)}`;
      return;
    }
    const id = r.body.event_id;
    out.textContent = `Test event ${id} is being sent now…`;
    // The queue sends it at once unless the endpoint's breaker holds it:
    // its first attempt, when one comes within a moment, is the answer (a
    // manual send then would deliver the test twice); otherwise send it now.
    let first;
    for (let i = 0; i < 15 && !first; i++) {
      const seen = await api("GET", `/api/v1/events/${encodeURIComponent(id)}`);
      first = seen.ok ? (seen.body.attempts || [])[0] : undefined;
      if (!first) await new Promise((done) => setTimeout(done, 100));
    }
    const s = first ? attemptResult(first) : await sendNow(id);
    out.className = `note ${s.ok ? "ok" : "error"} test-done`;
    out.replaceChildren(
      s.ok ? `The endpoint accepted the test event: ${s.text.replace(/^Accepted: /, "")}` : `The endpoint did not accept the test event: ${s.text.replace(/^Failed: /, "")}`,
      h("span", { class: "muted" }, ` (${id})`));
    this.els.test.disabled = false;
    this.onChange();
  }
}
