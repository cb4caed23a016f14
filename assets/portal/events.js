// The chatbot's events with their deliveries, one per endpoint, and their
// attempts (status, latency, response excerpt); filtered by status and by
// endpoint; redelivery of one delivery and of all failed or dead ones.

import { h } from "../lib/dom.js";
import { api, problem, when } from "./api.js";

const PAGE = 20;

export class Events {
  /** filters: {status, endpoint} (selects). */
  constructor(root, bulk, filters, opts) {
    this.root = root;
    this.bulk = bulk;
    this.filters = filters;
    this.opts = opts;
    this.urls = new Map();
    filters.status.addEventListener("change", () => this.load());
    filters.endpoint.addEventListener("change", () => this.load());
    this.renderBulk();
  }

  /** The chatbot's endpoints: the endpoint filter's options, and their URLs for the details. */
  useEndpoints(list) {
    const sel = this.filters.endpoint;
    const keep = sel.value;
    this.urls = new Map(list.map((e) => [e.id, e]));
    sel.replaceChildren(h("option", { value: "" }, "All"), ...list.map((e) => h("option", { value: e.id }, `${e.url}${e.default ? " (default)" : ""}`)));
    sel.value = this.urls.has(keep) ? keep : "";
  }

  /** "<url> (default)" for an endpoint id. */
  endpointName(id) {
    const e = this.urls.get(id);
    return e ? `${e.url}${e.default ? " (default)" : ""}` : id;
  }

  renderBulk() {
    if (this.opts.readOnly) return this.bulk.replaceChildren();
    this.bulkResult = h("span", { class: "result", role: "status" });
    const all = (status) => h("button", { type: "button", dataset: { status }, onclick: (e) => this.redeliverAll(status, e.target) }, `Redeliver all ${status}`);
    this.bulk.replaceChildren(all("failed"), all("dead"), this.bulkResult);
  }

  async redeliverAll(status, button) {
    if (button.dataset.armed !== "true") {
      button.dataset.armed = "true";
      button.textContent = `Confirm: redeliver every ${status} event`;
      return;
    }
    delete button.dataset.armed;
    button.textContent = `Redeliver all ${status}`;
    const endpoint = this.filters.endpoint.value;
    const r = await api("POST", "/api/v1/events/redeliver", endpoint ? { status, endpoint_id: endpoint } : { status });
    if (r.status === 401) return this.opts.onExpired();
    this.bulkResult.classList.toggle("is-error", !r.ok);
    this.bulkResult.textContent = r.ok ? `${r.body.count} ${status} event(s) queued again.` : problem(r);
    if (r.ok) this.load();
  }

  query(cursor) {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (this.filters.status.value) q.set("status", this.filters.status.value);
    if (this.filters.endpoint.value) q.set("endpoint_id", this.filters.endpoint.value);
    if (cursor) q.set("cursor", cursor);
    return `/api/v1/events?${q}`;
  }

  async load(cursor) {
    // Only the newest load is shown: one that a filter change or another
    // load overtook while it was on its way is dropped.
    const seq = (this.seq = (this.seq || 0) + 1);
    const r = await api("GET", this.query(cursor));
    if (seq !== this.seq) return;
    if (r.status === 401) return this.opts.onExpired();
    if (!r.ok) return this.root.replaceChildren(h("p", { class: "result is-error" }, problem(r)));
    if (!cursor) {
      this.body = h("tbody");
      const table = h("table", null,
        h("thead", null, h("tr", null, h("th", { scope: "col" }, "Created"), h("th", { scope: "col" }, "Type"),
          h("th", { scope: "col" }, "Status"), h("th", { scope: "col" }, "Attempts"), h("th", { scope: "col" }, "Next attempt"), h("th", { scope: "col" }, "Event"))),
        this.body);
      this.more = h("button", { type: "button", class: "more", hidden: true }, "Load more");
      this.more.addEventListener("click", () => this.load(this.cursor));
      this.root.replaceChildren(h("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Events table" }, table), this.more);
    }
    for (const e of r.body.data) this.body.append(this.row(e));
    if (!this.body.children.length) {
      this.body.append(h("tr", null, h("td", { class: "empty", colspan: "6" }, "No events yet. They appear here as visitors click and send forms.")));
    }
    this.cursor = r.body.page.next_cursor;
    this.more.hidden = !r.body.page.has_more;
  }

  row(e) {
    const next = e.status === "pending" || e.status === "failed" ? when(e.next_attempt_at, true) : "";
    const open = h("button", { type: "button", class: "open", "aria-expanded": "false", "aria-label": `Details of ${e.event_id}` }, "▸");
    const tr = h("tr", { class: "event-row", dataset: { eventId: e.event_id } },
      h("td", null, h("time", { datetime: e.created_at, title: e.created_at }, when(e.created_at))),
      h("td", { class: "type-cell" }, e.type),
      h("td", null, h("span", { class: `badge ${e.status}` }, e.status)),
      h("td", null, String(e.attempt_count ?? "")),
      h("td", null, next),
      h("td", { class: "url" }, open, " ", e.event_id));
    tr.addEventListener("click", () => this.toggle(tr, open, e));
    return tr;
  }

  async toggle(tr, button, e) {
    const open = tr.nextElementSibling && tr.nextElementSibling.classList.contains("detail-row");
    if (open) {
      tr.nextElementSibling.remove();
      button.setAttribute("aria-expanded", "false");
      return;
    }
    button.setAttribute("aria-expanded", "true");
    const cell = h("td", { colspan: "6", class: "detail" }, "Loading…");
    tr.after(h("tr", { class: "detail-row" }, cell));
    await this.fill(cell, e.event_id);
  }

  /** The detail of event `id` in `cell`; `note`: a message kept from before. */
  async fill(cell, id, note) {
    const r = await api("GET", `/api/v1/events/${encodeURIComponent(id)}`);
    if (r.status === 401) return this.opts.onExpired();
    if (!r.ok) return cell.replaceChildren(h("p", { class: "result is-error" }, problem(r)));
    const ev = r.body;
    const all = ev.attempts || [];
    const result = h("p", { class: "result", role: "status" }, note || "");
    const deliveries = ev.deliveries || [];
    cell.replaceChildren(
      deliveries.length ? null : h("p", { class: "muted" }, "No endpoint matched this event: nothing was sent."),
      ...deliveries.map((d) => h("div", { class: "delivery", dataset: { endpointId: d.endpoint_id } },
        h("h3", null, h("span", { class: "url" }, this.endpointName(d.endpoint_id)), " ", h("span", { class: `badge ${d.status}` }, d.status),
          h("span", { class: "muted" }, ` · ${d.attempts} attempt${d.attempts === 1 ? "" : "s"}`)),
        this.attempts(all.filter((a) => a.endpoint_id === d.endpoint_id), `${id} to ${this.endpointName(d.endpoint_id)}`),
        this.opts.readOnly ? null : h("div", { class: "actions" },
          h("button", { type: "button", class: "redeliver", onclick: () => this.redeliver(id, d.endpoint_id, result, cell) }, "Redeliver to this endpoint")))),
      result);
  }

  attempts(list, label) {
    if (!list.length) return h("p", { class: "muted" }, "No attempt yet.");
    return h("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": `Attempts of ${label}` },
      h("table", null,
        h("thead", null, h("tr", null, h("th", { scope: "col" }, "#"), h("th", { scope: "col" }, "At"), h("th", { scope: "col" }, "Result"),
          h("th", { scope: "col" }, "Latency"), h("th", { scope: "col" }, "Response"))),
        h("tbody", null, list.map((a) => h("tr", { class: "attempt" },
          h("td", null, String(a.number)),
          h("td", null, h("time", { datetime: a.at, title: a.at }, when(a.at))),
          h("td", null, a.status_code ? `HTTP ${a.status_code}` : a.error || "—"),
          h("td", null, a.duration_ms === null || a.duration_ms === undefined ? "—" : `${a.duration_ms} ms`),
          h("td", null, h("pre", { class: "excerpt" }, a.response_excerpt || "")))))));
  }

  async redeliver(id, endpoint, result, cell) {
    const r = await api("POST", `/api/v1/events/${encodeURIComponent(id)}/redeliver`, endpoint ? { endpoint_id: endpoint } : {});
    if (r.status === 401) return this.opts.onExpired();
    result.classList.toggle("is-error", !r.ok);
    result.textContent = r.ok ? "Queued again: a new attempt is on its way." : problem(r);
    if (r.ok) setTimeout(() => this.fill(cell, id, result.textContent), 1500);
  }
}
