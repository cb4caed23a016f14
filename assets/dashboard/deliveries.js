// The deliveries log: a filtered (event id, status, type, endpoint), paged table of
// events, newest first. On a narrow screen the detail pane opens in a row
// right under the chosen delivery.

import { api, problem } from "./api.js";
import { badge, h, relative, when } from "./dom.js";

const NARROW = "(max-width: 980px)";

/** When the next attempt goes out: a time still to come, or "due now"
 * (never a time in the past: a due delivery waits for a free slot, a
 * paused endpoint or an open circuit). */
function next(iso) {
  if (!iso) return h("span", { class: "muted" }, "—");
  if (Date.parse(iso) <= Date.now()) return h("span", { class: "due", title: iso }, "due now");
  return [when(iso, true), h("span", { class: "muted small" }, ` ${relative(iso)}`)];
}

export class Deliveries {
  /** els: {body, more, status, type, search, endpoint, error, detail, home}; onSelect(event_id). */
  constructor(els, onSelect) {
    this.els = els;
    this.onSelect = onSelect;
    this.selected = null;
    this.cursor = null;
    this.paged = false;
    /** The newest load's number: an older answer that arrives later is dropped. */
    this.seq = 0;
    this.narrow = window.matchMedia(NARROW);
    els.more.addEventListener("click", () => this.load(false));
    els.status.addEventListener("change", () => this.load(true));
    els.type.addEventListener("change", () => this.load(true));
    els.endpoint.addEventListener("change", () => this.load(true));
    let t = null;
    els.search.addEventListener("input", () => {
      clearTimeout(t);
      t = setTimeout(() => this.load(true), 250);
    });
    this.narrow.addEventListener("change", () => this.placeDetail());
  }

  filtered() {
    return !!(this.els.status.value || this.els.type.value || this.els.endpoint.value || this.els.search.value.trim());
  }

  /** The endpoint filter's options: the chatbot's endpoints. */
  useEndpoints(list) {
    const sel = this.els.endpoint;
    const keep = sel.value;
    sel.replaceChildren(h("option", { value: "" }, "all"), ...list.map((e) => h("option", { value: e.id }, `${e.url}${e.default ? " (default)" : ""}`)));
    sel.value = list.some((e) => e.id === keep) ? keep : "";
  }

  /** Reloads the first page (reset) or appends the next one. */
  async load(reset = true) {
    const q = new URLSearchParams({ limit: "25" });
    if (this.els.status.value) q.set("status", this.els.status.value);
    if (this.els.type.value) q.set("type", this.els.type.value);
    if (this.els.endpoint.value) q.set("endpoint_id", this.els.endpoint.value);
    const id = this.els.search.value.trim();
    if (id) q.set("event_id", id);
    if (!reset && this.cursor) q.set("cursor", this.cursor);
    const seq = ++this.seq;
    const r = await api("GET", `/api/v1/events?${q}`);
    if (seq !== this.seq) return null;
    if (!r.ok) {
      this.els.error.textContent = problem(r);
      return null;
    }
    this.els.error.textContent = "";
    const rows = r.body.data.map((e) => this.row(e));
    if (reset) {
      this.paged = false;
      this.els.body.replaceChildren(...rows);
      if (!rows.length) this.els.body.append(this.empty());
    } else {
      this.paged = true;
      this.els.body.append(...rows);
    }
    this.cursor = r.body.page.next_cursor;
    this.els.more.hidden = !r.body.page.has_more;
    this.placeDetail();
    return r.body.data;
  }

  empty() {
    const text = this.filtered()
      ? "No delivery matches these filters. Check the event id, or set status, type and endpoint back to “all”."
      : "No deliveries yet. Press “Send test event” above to check the endpoint; events from visitors' clicks, forms and messages show here as they are sent.";
    return h("tr", { class: "empty-row" }, h("td", { colspan: 5, class: "empty" }, text));
  }

  /** Refreshes unless the reviewer paged further down. */
  refresh() {
    return this.paged ? null : this.load(true);
  }

  row(e) {
    return h("tr", {
      tabindex: 0,
      class: `event-row${e.event_id === this.selected ? " selected" : ""}`,
      dataset: { eventId: e.event_id },
      onclick: () => this.select(e.event_id),
      onkeydown: (ev) => {
        if (ev.key === "Enter" || ev.key === " ") {
          ev.preventDefault();
          this.select(e.event_id);
        }
      },
    },
    h("td", null, badge(e.status)),
    h("td", { class: "mono type-cell" }, e.type),
    h("td", null, when(e.created_at, true)),
    h("td", { class: "num" }, e.attempt_count),
    h("td", { class: "col-next" }, e.status === "pending" || e.status === "failed" ? next(e.next_attempt_at) : h("span", { class: "muted" }, "—")));
  }

  select(id) {
    this.selected = id;
    for (const tr of this.els.body.querySelectorAll("tr.event-row")) tr.classList.toggle("selected", tr.dataset.eventId === id);
    this.placeDetail();
    this.onSelect(id);
  }

  /** The detail pane: beside the table, or (narrow) in a row under the chosen one. */
  placeDetail() {
    const { detail, home, body } = this.els;
    const holder = body.querySelector("tr.detail-row");
    const row = this.selected && [...body.querySelectorAll("tr.event-row")].find((tr) => tr.dataset.eventId === this.selected);
    if (this.narrow.matches && row) {
      const tr = holder || h("tr", { class: "detail-row" }, h("td", { colspan: 5 }));
      if (row.nextSibling !== tr) row.after(tr);
      if (detail.parentNode !== tr.firstChild) tr.firstChild.append(detail);
      return;
    }
    if (detail.parentNode !== home) home.append(detail);
    if (holder) holder.remove();
  }
}
