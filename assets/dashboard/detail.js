// One event: payload, its deliveries (one per endpoint) with every
// attempt's outcome and the request headers it actually sent (stored with
// the attempt), Redeliver (sent now) and Redeliver to one endpoint.

import { api, problem, sendNow } from "./api.js";
import { badge, h, pretty, stamp, when } from "./dom.js";

export const HINT = "Choose a delivery in the list to see its payload, the request headers each attempt sent, the answers, and to redeliver it (sent at once, whatever the circuit breaker says).";

/** The stored headers of an attempt as [name, value] rows, in the order sent. */
export function headerRows(headers) {
  return Object.entries(headers || {});
}

function headerBlock(rows) {
  return h("pre", { class: "code headers", tabindex: 0, "aria-label": "Request headers sent" }, rows.map(([k, v]) => [h("span", { class: "hk" }, `${k}: `), `${v}\n`]));
}

function attemptCard(a, open) {
  const ok = a.status_code >= 200 && a.status_code < 300;
  const rows = headerRows(a.request_headers);
  return h("div", { class: `attempt ${ok ? "ok" : "bad"}`, dataset: { number: a.number } },
    h("div", { class: "attempt-head" },
      h("strong", null, `#${a.number}`),
      when(a.at),
      h("span", { class: `code-chip ${ok ? "ok" : "bad"}` }, a.status_code === null ? "no answer" : a.status_code),
      h("span", { class: "muted" }, `${a.duration_ms} ms`)),
    a.error ? h("p", { class: "attempt-error" }, a.error) : null,
    a.response_excerpt ? h("details", null, h("summary", null, "Response excerpt"), h("pre", { class: "code", tabindex: 0, "aria-label": "Response excerpt" }, a.response_excerpt)) : null,
    h("details", { open, class: "sent-headers" }, h("summary", null, "Request headers sent"),
      rows.length ? headerBlock(rows) : h("p", { class: "muted small" }, "Nothing was sent on this attempt (see the error).")));
}

export class Detail {
  constructor(el, onChange) {
    this.el = el;
    this.onChange = onChange;
    this.id = null;
    /** The last manual send's answer per event id, shown until another. */
    this.sent = new Map();
    this.endpoints = new Map();
    /** The last "Redeliver to this endpoint" answer per event and endpoint. */
    this.redelivered = new Map();
    /** The newest load's number: an older answer that arrives later is dropped. */
    this.seq = 0;
    this.hint();
  }

  /** The chatbot's endpoints, to name a delivery's. */
  useEndpoints(list) {
    this.endpoints = new Map(list.map((e) => [e.id, e]));
  }

  endpointName(id) {
    const e = this.endpoints.get(id);
    return e ? `${e.url}${e.default ? " (default)" : ""}` : id;
  }

  /** A delivery to one endpoint: its status, attempts (newest first) and "Redeliver to this endpoint". */
  delivery(e, d, all, first) {
    const last = this.redelivered.get(`${e.event_id} ${d.endpoint_id}`);
    const note = h("p", { class: last ? last.class : "note", role: "status" }, last ? last.text : "");
    const attempts = all.filter((a) => a.endpoint_id === d.endpoint_id).sort((a, b) => (a.at < b.at ? 1 : -1));
    const button = h("button", { type: "button", class: "btn redeliver-endpoint", onclick: () => this.redeliverTo(e.event_id, d.endpoint_id, button, note) }, "Redeliver to this endpoint");
    return h("div", { class: "delivery", dataset: { endpointId: d.endpoint_id } },
      h("div", { class: "delivery-head" },
        h("h5", { class: "mono" }, this.endpointName(d.endpoint_id)),
        badge(d.status),
        h("span", { class: "muted small" }, `${d.attempts} attempt${d.attempts === 1 ? "" : "s"}`),
        button),
      note,
      ...(attempts.length
        ? attempts.map((a, i) => attemptCard(a, first && i === 0))
        : [h("p", { class: "muted" }, "Not attempted yet: it is queued (or its endpoint is paused) and goes out as soon as its turn comes.")]));
  }

  /** Queues this event again to one endpoint only. */
  async redeliverTo(id, endpoint, button, note) {
    button.disabled = true;
    const r = await api("POST", `/api/v1/events/${encodeURIComponent(id)}/redeliver`, { body: { endpoint_id: endpoint } });
    button.disabled = false;
    const shown = { class: `note ${r.ok ? "ok" : "error"} redeliver-endpoint-done`, text: r.ok ? "Queued again for this endpoint: a new attempt is on its way." : problem(r) };
    this.redelivered.set(`${id} ${endpoint}`, shown);
    note.className = shown.class;
    note.textContent = shown.text;
    // The pane was drawn again while the request was out: draw it with the answer.
    if (!note.isConnected && this.id === id) this.refresh();
    if (r.ok) setTimeout(() => this.id === id && this.refresh(), 1500);
    this.onChange();
  }

  /** The hint shown until a delivery is chosen. */
  hint() {
    this.id = null;
    this.el.replaceChildren(h("p", { class: "muted hint" }, HINT));
  }

  async show(id) {
    this.id = id;
    const seq = ++this.seq;
    const r = await api("GET", `/api/v1/events/${encodeURIComponent(id)}`);
    if (this.id !== id || seq !== this.seq) return;
    if (!r.ok) {
      this.el.replaceChildren(h("p", { class: "error" }, problem(r)));
      return;
    }
    this.render(r.body);
  }

  /** Reloads the shown delivery, if any. */
  refresh() {
    return this.id ? this.show(this.id) : null;
  }

  render(e) {
    const last = this.sent.get(e.event_id);
    const note = h("p", { class: last ? last.class : "note", role: "status" }, last ? last.text : "");
    const redeliver = h("button", { type: "button", class: "btn btn-primary", onclick: () => this.redeliver(e.event_id, redeliver, note) }, "Redeliver");
    const deliveries = e.deliveries || [];
    const all = e.attempts || [];
    this.el.replaceChildren(
      h("div", { class: "detail-head" },
        h("div", { class: "detail-title" }, h("h3", { class: "mono" }, e.event_id), h("p", { class: "muted" }, e.type, " · created ", stamp(e.created_at))),
        h("div", { class: "detail-actions" }, badge(e.status), redeliver)),
      note,
      h("h4", null, "Payload"),
      h("pre", { class: "code payload", tabindex: 0, "aria-label": "Payload" }, pretty(e.payload)),
      h("h4", null, `Deliveries (${deliveries.length}) · attempts (${all.length})`),
      ...(deliveries.length
        ? deliveries.map((d, i) => this.delivery(e, d, all, i === 0))
        : [h("p", { class: "muted" }, "No endpoint matched this event: nothing was sent.")]),
    );
  }

  /** Sends it now, whatever the circuit breaker says, and shows the answer. */
  async redeliver(id, button, note) {
    button.disabled = true;
    note.className = "note";
    note.textContent = "Sending now…";
    const s = await sendNow(id);
    button.disabled = false;
    const shown = { class: `note ${s.ok ? "ok" : "error"} redeliver-done`, text: s.attempt ? `Sent now under the same event id. ${s.text}` : s.text };
    this.sent.set(id, shown);
    note.className = shown.class;
    note.textContent = shown.text;
    if (!note.isConnected && this.id === id) this.refresh();
    this.onChange();
  }
}
