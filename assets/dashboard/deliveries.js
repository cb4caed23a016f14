// The deliveries log: a filtered, paged table of events, newest first.

import { api, problem } from "./api.js";
import { badge, h, relative, when } from "./dom.js";

export class Deliveries {
  /** els: {body, more, filter, error}; onSelect(event_id). */
  constructor(els, onSelect) {
    this.els = els;
    this.onSelect = onSelect;
    this.selected = null;
    this.cursor = null;
    this.paged = false;
    els.more.addEventListener("click", () => this.load(false));
    els.filter.addEventListener("change", () => this.load(true));
  }

  /** Reloads the first page (reset) or appends the next one. */
  async load(reset = true) {
    const q = new URLSearchParams({ limit: "25" });
    if (this.els.filter.value) q.set("status", this.els.filter.value);
    if (!reset && this.cursor) q.set("cursor", this.cursor);
    const r = await api("GET", `/api/v1/events?${q}`);
    if (!r.ok) {
      this.els.error.textContent = problem(r);
      return null;
    }
    this.els.error.textContent = "";
    const rows = r.body.data.map((e) => this.row(e));
    if (reset) {
      this.paged = false;
      this.els.body.replaceChildren(...rows);
      if (!rows.length) this.els.body.append(h("tr", null, h("td", { colspan: 5, class: "empty" }, "No deliveries yet.")));
    } else {
      this.paged = true;
      this.els.body.append(...rows);
    }
    this.cursor = r.body.page.next_cursor;
    this.els.more.hidden = !r.body.page.has_more;
    return r.body.data;
  }

  /** Refreshes unless the reviewer paged further down. */
  refresh() {
    return this.paged ? null : this.load(true);
  }

  row(e) {
    const tr = h("tr", {
      tabindex: 0,
      class: e.event_id === this.selected ? "selected" : null,
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
    h("td", { class: "mono" }, e.type),
    h("td", null, when(e.created_at, true)),
    h("td", { class: "num" }, e.attempt_count),
    h("td", null, e.status === "pending" || e.status === "failed" ? [when(e.next_attempt_at, true), h("span", { class: "muted small" }, ` ${relative(e.next_attempt_at)}`)] : h("span", { class: "muted" }, "—")));
    return tr;
  }

  select(id) {
    this.selected = id;
    for (const tr of this.els.body.querySelectorAll("tr")) tr.classList.toggle("selected", tr.dataset.eventId === id);
    this.onSelect(id);
  }
}
