// Pending interactions: compact cards (who asks, what they said, the
// question) that open to answer as a team member.

import { api, idempotencyKey, problem, session } from "./api.js";
import { h, pretty, valueName, when } from "./dom.js";
import { answerField, answerValues } from "./fields.js";

/** Links to a question's attachments, fetched with the API key and linked as blob: downloads. */
function files(list) {
  if (!list || !list.length) return null;
  return h("ul", { class: "files" }, list.map((a) => {
    const link = h("a", { href: "#", class: "file", dataset: { attachmentId: a.id },
      onclick: (e) => { if (link.dataset.ready !== "true") e.preventDefault(); } },
      a.filename, " ", h("span", { class: "muted small" }, `(${Math.max(1, Math.round(a.size / 1024))} KB)`));
    fetch(`/api/v1/attachments/${encodeURIComponent(a.id)}`, {
      headers: { Authorization: `Bearer ${session.get()}` }, cache: "no-store",
    }).then(async (res) => {
      if (!res.ok) throw new Error(String(res.status));
      link.href = URL.createObjectURL(await res.blob());
      link.setAttribute("download", a.filename);
      link.dataset.ready = "true";
    }).catch(() => link.classList.add("error"));
    return h("li", {}, link);
  }));
}

const CLOSED = { answered: "answered", expired: "expired", cancelled: "cancelled" };

/** The button class of a choice option, from the question's button style. */
export function styleClass(style) {
  return style === "primary" ? "btn btn-primary" : style === "danger" ? "btn btn-danger" : "btn";
}

/**
 * The files attached to the question, as links ("attachments": [{id,
 * filename, content_type, size, url}] on the interaction's context), or
 * null when it has none.
 */
export class Inbox {
  /** els: {list, count, error}; onAnswered() after an accepted answer. */
  constructor(els, onAnswered) {
    this.els = els;
    this.onAnswered = onAnswered;
    this.cards = new Map();
    this.keys = new Map();
  }

  async load() {
    const r = await api("GET", "/api/v1/interactions?status=pending&expand=context&limit=100");
    if (!r.ok) {
      this.els.error.textContent = problem(r);
      return;
    }
    this.els.error.textContent = "";
    // A card already shown with its context, or opened, stays as it is
    // (an answer being typed is not lost).
    const shown = this.cards;
    this.cards = new Map();
    const cards = r.body.data.map((i) => {
      const prev = shown.get(i.id);
      const card = prev && (prev.dataset.context === "1" || prev.open) ? prev : this.card(i);
      this.cards.set(i.id, card);
      return card;
    });
    this.els.list.replaceChildren(...cards);
    this.count();
  }

  /** From the live stream: `interaction.created|answered|expired|cancelled`. */
  onEvent(kind, i) {
    if (kind === "interaction.created" && i.status === "pending") {
      // Added at once, then read again with its context (visitor, message).
      this.add(i);
      clearTimeout(this.reload);
      this.reload = setTimeout(() => this.load(), 300);
    } else this.close(i.id, i.status);
    this.count();
  }

  count() {
    const n = this.cards.size;
    this.els.count.textContent = n ? String(n) : "";
    if (!n && !this.els.list.querySelector(".closed")) {
      this.els.list.replaceChildren(h("p", { class: "muted empty" }, "Nothing is waiting for an answer. When the bot posts buttons or a form (or an agent asks with blockhook ask), the question shows here and can be answered for the visitor."));
    } else {
      const empty = this.els.list.querySelector(".empty");
      if (empty) empty.remove();
    }
  }

  add(i) {
    if (this.cards.has(i.id)) return;
    const card = this.card(i);
    this.cards.set(i.id, card);
    this.els.list.prepend(card);
  }

  /** Marks a card closed, then removes it. */
  close(id, status) {
    const card = this.cards.get(id);
    if (!card) return;
    this.cards.delete(id);
    card.classList.add("closed");
    card.querySelectorAll("button, input, select, textarea").forEach((x) => (x.disabled = true));
    card.querySelector(".card-status").textContent = CLOSED[status] || status;
    setTimeout(() => {
      card.remove();
      this.count();
    }, 2500);
  }

  card(i) {
    const err = h("p", { class: "error", role: "alert" });
    const p = i.payload || {};
    const ctx = i.context || {};
    const visitor = (ctx.visitor && ctx.visitor.display_name) || i.conversation_id;
    const said = ctx.in_reply_to && ctx.in_reply_to.text;
    const prompt = p.title || i.prompt || "(no prompt)";
    const card = h("details", { class: "interaction", dataset: { interactionId: i.id, context: i.context ? "1" : "0" } },
      h("summary", { class: "interaction-head" },
        h("span", { class: "line" },
          h("span", { class: `type type-${i.type}` }, i.type),
          h("strong", { class: "prompt" }, prompt),
          h("span", { class: "card-status muted" }, "pending")),
        h("span", { class: "line sub" },
          h("span", { class: "visitor" }, visitor),
          said ? h("span", { class: "said" }, `“${said}”`) : h("span", { class: "said muted" }, "no message from the visitor before it"),
          h("span", { class: "open-hint" }, "Answer"))),
      h("div", { class: "interaction-body" },
        said ? h("blockquote", { class: "in-reply-to" }, h("span", { class: "muted small" }, `${visitor} wrote`), h("span", null, said)) : null,
        p.title && i.prompt && p.title !== i.prompt ? h("p", { class: "prompt-text" }, i.prompt) : null,
        h("p", { class: "muted small" }, h("span", { class: "mono" }, i.conversation_id), " · created ", when(i.created_at),
          i.expires_at ? [" · expires ", when(i.expires_at)] : null),
        files((p && p.attachments) || (i.context && i.context.attachments) || i.attachments),
        h("div", { class: "answer" }, this.controls(i, err)),
        err,
        h("details", null, h("summary", null, "Payload"), h("pre", { class: "code", tabindex: 0, "aria-label": "Payload" }, pretty(p)))));
    return card;
  }

  controls(i, err) {
    const p = i.payload || {};
    const send = (body, form) => this.answer(i, body, err, form);
    if (i.type === "choice" && p.multiple) {
      const form = h("form", { class: "answer-form", onsubmit: (e) => {
        e.preventDefault();
        const ids = [...form.querySelectorAll("input:checked")].map((x) => x.value);
        send({ type: "choice", option_ids: ids }, form);
      } },
      (p.options || []).map((o) => h("label", { class: "check" }, h("input", { type: "checkbox", value: o.id }), ` ${o.label}`)),
      h("button", { class: "btn btn-primary", type: "submit" }, "Send"));
      return form;
    }
    if (i.type === "choice") {
      const styles = (i.context && i.context.option_styles) || {};
      const buttons = (p.options || []).map((o) => h("button", { type: "button", class: styleClass(styles[o.id]), dataset: { optionId: o.id }, onclick: () => send({ type: "choice", option_ids: [o.id] }) }, o.label));
      if (!p.custom) return buttons;
      // The ask allowed an answer of one's own.
      const text = h("input", { type: "text", class: "comment", name: "custom", placeholder: "Or an answer of your own", "aria-label": "Answer of your own", maxlength: 2000 });
      const form = h("form", { class: "answer-form custom-answer", onsubmit: (e) => {
        e.preventDefault();
        if (text.value.trim()) send({ type: "choice", custom: text.value.trim() }, form);
      } }, text, h("button", { class: "btn", type: "submit" }, "Send"));
      return [...buttons, form];
    }
    if (i.type === "confirmation") {
      return [
        h("button", { type: "button", class: "btn btn-primary", onclick: () => send({ type: "confirmation", confirmed: true }) }, p.accept || "Confirm"),
        h("button", { type: "button", class: "btn", onclick: () => send({ type: "confirmation", confirmed: false }) }, p.decline || "Decline"),
      ];
    }
    if (i.type === "approval") {
      const comment = h("input", { type: "text", class: "comment", placeholder: "Comment (optional, with a rejection)", "aria-label": "Comment" });
      const body = (approved) => {
        const b = { type: "approval", approved };
        if (!approved && comment.value.trim()) b.comment = comment.value.trim();
        return b;
      };
      return [
        h("button", { type: "button", class: "btn btn-primary", onclick: () => send(body(true)) }, p.accept || "Approve"),
        h("button", { type: "button", class: "btn btn-danger", onclick: () => send(body(false)) }, p.decline || "Reject"),
        p.comment === false ? null : comment,
      ];
    }
    return this.textForm(i, send);
  }

  textForm(i, send) {
    const fields = (i.payload && i.payload.fields) || [];
    const form = h("form", { class: "answer-form fields", novalidate: true, onsubmit: (e) => {
      e.preventDefault();
      send({ type: "text", values: answerValues(fields, form) }, form);
    } },
    fields.map((f) => answerField(f, `${i.id}-${f.name}`)),
    h("button", { class: "btn btn-primary", type: "submit" }, "Send answer"));
    return form;
  }

  /** Sends an answer; a retry of the same body reuses its Idempotency-Key. */
  async answer(i, body, err, form) {
    const text = JSON.stringify(body);
    const prev = this.keys.get(i.id);
    const key = prev && prev.body === text ? prev.key : idempotencyKey();
    this.keys.set(i.id, { body: text, key });
    err.textContent = "";
    if (form) form.querySelectorAll(".field-error").forEach((x) => (x.textContent = ""));
    const r = await api("POST", `/api/v1/interactions/${encodeURIComponent(i.id)}/responses`, { body, headers: { "Idempotency-Key": key } });
    if (r.ok) {
      this.close(i.id, "answered");
      this.count();
      this.onAnswered();
      return;
    }
    if (r.status === 409 && r.body.code === "interaction_not_pending") {
      this.close(i.id, "no longer pending");
      return;
    }
    const rest = [];
    for (const e of r.body.errors || []) {
      const name = valueName(e.field);
      const box = form && name !== null ? [...form.querySelectorAll(".field")].find((x) => x.dataset.name === name) : null;
      if (box) box.querySelector(".field-error").textContent = e.message || e.code;
      else rest.push(`${e.field || ""} ${e.message || e.code}`.trim());
    }
    err.textContent = rest.length ? rest.join("; ") : r.body.errors ? "" : problem(r);
  }
}
