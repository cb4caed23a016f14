// The chatbot's conversations: newest first, in pages, searched by visitor
// (name or id), by message text or by conversation id; choosing one shows
// its transcript.

import { api, problem } from "./api.js";
import { h, when } from "./dom.js";
import { showTranscript } from "./transcript.js";

export class Conversations {
  /** els: {list, more, search, error, transcript}. */
  constructor(els) {
    this.els = els;
    this.cursor = null;
    this.selected = null;
    this.rows = new Map();
    els.more.addEventListener("click", () => this.load(false));
    let t = null;
    els.search.addEventListener("input", () => {
      clearTimeout(t);
      t = setTimeout(() => this.load(true), 250);
    });
  }

  async load(reset = true) {
    const q = new URLSearchParams({ limit: "20" });
    const text = this.els.search.value.trim();
    if (text) q.set("q", text);
    if (!reset && this.cursor) q.set("cursor", this.cursor);
    const r = await api("GET", `/api/v1/conversations?${q}`);
    if (text !== this.els.search.value.trim()) return;
    if (!r.ok) {
      this.els.error.textContent = problem(r);
      return;
    }
    this.els.error.textContent = "";
    if (reset) {
      this.rows.clear();
      this.els.list.replaceChildren();
    }
    for (const c of r.body.data) {
      this.rows.set(c.id, c);
      this.els.list.append(this.row(c));
    }
    if (!this.rows.size) {
      this.els.list.append(h("li", { class: "empty muted" }, text
        ? "No conversation matches. Search a visitor's name or id, words of a message, or a conversation id (conv_…)."
        : "No conversations yet: they show here as visitors open the widget."));
    }
    this.cursor = r.body.page.next_cursor;
    this.els.more.hidden = !r.body.page.has_more;
  }

  row(c) {
    const pending = c.pending_interactions;
    return h("li", { class: "conv-item" },
      h("button", {
        type: "button",
        class: `conv-row${c.id === this.selected ? " selected" : ""}`,
        dataset: { conversationId: c.id },
        "aria-pressed": c.id === this.selected ? "true" : "false",
        onclick: () => this.select(c.id),
      },
      h("span", { class: "conv-line" },
        h("strong", { class: "conv-name" }, c.visitor.display_name),
        pending ? h("span", { class: "badge badge-pending" }, `${pending} pending`) : null),
      h("span", { class: "conv-line muted small" },
        h("span", { class: "mono conv-id" }, c.id),
        h("span", { class: "conv-when" }, "last ", when(c.last_message_at || c.created_at, true)))));
  }

  select(id) {
    this.selected = id;
    for (const b of this.els.list.querySelectorAll("button.conv-row")) {
      const on = b.dataset.conversationId === id;
      b.classList.toggle("selected", on);
      b.setAttribute("aria-pressed", on ? "true" : "false");
    }
    const c = this.rows.get(id);
    if (c) showTranscript(this.els.transcript, c);
  }
}
