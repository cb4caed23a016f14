// One chat widget: its conversation (kept in localStorage so a reload
// resumes), the message list (oldest first), the composer and the live stream.

import { h, valueName } from "../lib/dom.js";
import { openStream } from "../lib/sse.js";
import { ORIGIN, UNAVAILABLE, call, problem } from "./api.js";
import { renderAttachments } from "./attachments.js";
import { fillForm, formValues, renderActions, renderForm, showFieldErrors } from "./blocks.js";

const PAGE = 50;
const GREETING = "Hi! How can we help you today?";
const NOT_HERE = "This chat is not available on this site.";

/** localStorage, when the page may use it (a sandboxed page may not). */
const storage = {
  get(k) {
    try {
      return localStorage.getItem(k);
    } catch {
      return null;
    }
  },
  set(k, v) {
    try {
      localStorage.setItem(k, v);
    } catch {
      // This visit only, then.
    }
  },
  remove(k) {
    try {
      localStorage.removeItem(k);
    } catch {
      // Nothing was kept.
    }
  },
};

/** Where focus is inside a message: its block and its control. */
function focusKeyOf(node, active) {
  if (!active || !node.contains(active)) return null;
  const block = active.closest("[data-block-id]");
  if (!block) return null;
  return { block: block.dataset.blockId, action: active.dataset.actionId || null, name: active.name || null };
}

/** Puts focus back on the same control of a re-rendered message, or on its
 * block's group when that control is off. */
function restoreFocus(node, key) {
  const block = [...node.querySelectorAll("[data-block-id]")].find((b) => b.dataset.blockId === key.block);
  if (!block) return;
  const control = [...block.querySelectorAll("button, input, select, textarea")].find(
    (c) => (key.action && c.dataset.actionId === key.action) || (key.name && c.name === key.name),
  );
  if (control && !control.disabled) return control.focus({ preventScroll: true });
  const group = block.querySelector("[data-focus-group]") || block;
  group.focus({ preventScroll: true });
}

function clock(iso) {
  const d = new Date(iso);
  return isNaN(d) ? "" : d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

/** Whether message a comes before b (ids are time-ordered too). */
function older(a, b) {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at;
  return a.id < b.id;
}

export class Widget {
  constructor(root, chatbotId, opts = {}) {
    this.root = root;
    this.chatbotId = chatbotId;
    this.greetingText = (opts.greeting || "").trim() || GREETING;
    this.key = `blockhook.widget.${chatbotId}`;
    this.restarts = 0;
    this.reset();
  }

  reset() {
    this.messages = new Map();
    this.nodes = new Map();
    this.deleted = new Set();
    // What this visitor sent per form, to keep showing it once sent.
    this.sent = new Map();
    this.connectedBefore = false;
    this.build();
  }

  build() {
    this.live = h("span", { class: "bh-live", "aria-hidden": "true" });
    this.status = h("span", { class: "bh-status", role: "status" }, "Connecting…");
    this.greeting = h("article", { class: "bh-msg bh-msg--bot bh-greeting" },
      h("div", { class: "bh-bubble" }, this.greetingText));
    this.list = h("div", { class: "bh-list", role: "log", "aria-live": "polite" });
    this.earlier = h("button", { class: "bh-earlier", type: "button", hidden: true, onclick: () => this.loadEarlier() }, "Show earlier messages");
    this.typing = h("div", { class: "bh-typing", hidden: true, "aria-label": "The bot is typing" }, h("span"), h("span"), h("span"));
    this.notice = h("p", { class: "bh-notice", role: "status", hidden: true });
    this.input = h("textarea", { class: "bh-input", rows: 1, placeholder: "Write a message…", "aria-label": "Message", maxlength: 4000 });
    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) {
        e.preventDefault();
        this.composer.requestSubmit();
      }
    });
    this.sendError = h("p", { class: "bh-error", role: "alert" });
    this.composer = h("form", { class: "bh-composer", onsubmit: (e) => this.send(e) },
      this.input, h("button", { class: "bh-btn bh-btn--primary", type: "submit" }, "Send"));
    // "New conversation" asks first: the chat shown here is cleared.
    const askId = `bh-new-${this.chatbotId}`;
    this.keep = h("button", { class: "bh-btn", type: "button", onclick: () => this.askNew(false) }, "Keep this one");
    this.confirmNew = h("div", { class: "bh-confirm", role: "alertdialog", "aria-labelledby": askId, hidden: true },
      h("p", { id: askId }, "Start a new conversation? This one will no longer be shown here."),
      h("button", { class: "bh-btn bh-btn--primary", type: "button", onclick: () => {
        this.restarts = 0;
        this.restart();
      } }, "Start new"),
      this.keep);
    this.newButton = h("button", { class: "bh-link", type: "button", "aria-expanded": "false", onclick: () => this.askNew(this.confirmNew.hidden) }, "New conversation");
    this.scroller = h("div", { class: "bh-scroll" }, this.earlier, this.greeting, this.list, this.typing);
    this.root.replaceChildren(h("section", { class: "bh-widget", "aria-label": "Chat" },
      h("header", { class: "bh-header" },
        h("span", { class: "bh-title" }, "Chat"), this.live, this.status,
        this.newButton),
      this.confirmNew, this.scroller, this.notice, this.sendError, this.composer));
  }

  /** Shows or hides the question before a new conversation. */
  askNew(open) {
    this.confirmNew.hidden = !open;
    this.newButton.setAttribute("aria-expanded", String(open));
    (open ? this.keep : this.newButton).focus();
  }

  /** The server refused this page's origin: the visitor reads that the chat
   * is not available here, the page's developer (console and a hint) which
   * list to fix. */
  refused() {
    const here = location.origin;
    console.error(`blockhook: ${here} is not in the allowed_origins of chatbot ${this.chatbotId}, so the chat server ` +
      `refused this page (403 origin_not_allowed). Add it to the list: PATCH ${ORIGIN}/api/v1/chatbots/${this.chatbotId} ` +
      `{"allowed_origins": [..., "${here}"]}`);
    this.fail(NOT_HERE);
    if (this.root.querySelector(".bh-dev-hint")) return;
    this.notice.after(h("p", { class: "bh-dev-hint" },
      "For this site's developer: ", h("code", null, here), " is not in the chatbot's ",
      h("code", null, "allowed_origins"), " list. Add it with ",
      h("code", null, `PATCH /api/v1/chatbots/${this.chatbotId}`), "."));
  }

  /** After a request failed without an answer the page could read: whether
   * the server is up all the same (then it refused this page's origin, as
   * its refusal carries no CORS header). */
  async refusedOrigin() {
    try {
      const r = await fetch(`${ORIGIN}/widget.js`, { method: "HEAD", cache: "no-store" });
      return r.ok;
    } catch {
      return false;
    }
  }

  say(text) {
    this.notice.textContent = text || "";
    this.notice.hidden = !text;
  }

  /** Stops here with a notice (nothing else to do until a reload). */
  fail(text) {
    if (this.stopStream) this.stopStream();
    this.say(text);
    this.composer.hidden = true;
    this.status.textContent = "Offline";
  }

  setLive(on) {
    this.live.classList.toggle("is-live", on);
    this.status.textContent = on ? "" : this.connectedBefore ? "Reconnecting…" : "Connecting…";
    this.status.classList.toggle("is-away", !on);
    // Back after a break: catch up on anything the replay cannot cover.
    if (on && this.connectedBefore) this.refresh();
    this.connectedBefore = this.connectedBefore || on;
  }

  // -- session --

  save(patch) {
    this.sess = { ...(this.sess || {}), ...patch };
    storage.set(this.key, JSON.stringify(this.sess));
  }

  path(suffix) {
    return `/widget/v1/conversations/${encodeURIComponent(this.sess.conversation_id)}${suffix}`;
  }

  /** Resumes the stored (or `seed`) conversation, or starts one. */
  async start(seed) {
    try {
      this.sess = JSON.parse(storage.get(this.key) || "null");
    } catch {
      this.sess = null;
    }
    if (seed && (!this.sess || this.sess.conversation_id !== seed.conversation_id)) {
      this.save({ ...seed, last_event_id: null });
    }
    if (!this.sess || !this.sess.visitor_token) {
      const r = await call("POST", `/widget/v1/chatbots/${encodeURIComponent(this.chatbotId)}/conversations`, null, {});
      if (!r.ok) {
        if (r.status === 0) return (await this.refusedOrigin()) ? this.refused() : this.fail(UNAVAILABLE);
        if (r.status === 403) return this.refused();
        if (r.status === 404) return this.fail(`No chatbot ${this.chatbotId} here.`);
        return this.fail(`Could not start a conversation (${r.status}). Please try again later.`);
      }
      this.save({ conversation_id: r.body.conversation_id, visitor_token: r.body.visitor_token, last_event_id: null });
    }
    this.stopStream = openStream(ORIGIN + this.path("/stream"), {
      token: this.sess.visitor_token,
      lastId: this.sess.last_event_id,
      onEvent: (f) => this.onEvent(f),
      onState: (on) => this.setLive(on),
      onFatal: (status) => (status === 403 ? this.refused() : this.restart()),
    });
    await this.load();
  }

  /** Forgets this conversation and starts a new one. */
  async restart() {
    if (this.stopStream) this.stopStream();
    this.restarts += 1;
    if (this.restarts > 3) return this.say("The conversation could not be resumed. Reload the page to try again.");
    storage.remove(this.key);
    this.sess = null;
    this.reset();
    await this.start(null);
  }

  /** Loads the newest page (collections are newest first). */
  async load() {
    const r = await call("GET", this.path(`/messages?limit=${PAGE}`), this.sess.visitor_token);
    if (r.status === 401 || r.status === 404) return this.restart();
    if (r.status === 403) return this.refused();
    if (r.status === 0) return (await this.refusedOrigin()) ? this.refused() : this.fail(UNAVAILABLE);
    if (!r.ok) return this.say(`Could not load messages (${r.status}).`);
    this.say("");
    for (const m of r.body.data) this.upsert(m);
    this.cursor = r.body.page.next_cursor;
    this.earlier.hidden = !r.body.page.has_more;
    this.greeting.hidden = r.body.page.has_more;
    this.scrollDown(true);
  }

  async loadEarlier() {
    if (!this.cursor) return;
    const fromBottom = this.scroller.scrollHeight - this.scroller.scrollTop;
    const r = await call("GET", this.path(`/messages?limit=${PAGE}&cursor=${encodeURIComponent(this.cursor)}`), this.sess.visitor_token);
    if (!r.ok) return this.say(`Could not load messages (${r.status}).`);
    for (const m of r.body.data) this.upsert(m);
    this.cursor = r.body.page.next_cursor;
    this.earlier.hidden = !r.body.page.has_more;
    this.greeting.hidden = r.body.page.has_more;
    this.scroller.scrollTop = this.scroller.scrollHeight - fromBottom;
  }

  /** Re-reads the newest page (after a conflict or a reconnect). */
  async refresh() {
    const r = await call("GET", this.path(`/messages?limit=${PAGE}`), this.sess.visitor_token);
    if (r.ok) for (const m of r.body.data) this.upsert(m);
  }

  onEvent(f) {
    if (f.id !== null) this.save({ last_event_id: f.id });
    let data;
    try {
      data = JSON.parse(f.data);
    } catch {
      return;
    }
    if (f.event === "message.created" || f.event === "message.updated") {
      if (data.author && data.author.kind !== "visitor") this.setTyping(false);
      this.upsert(data);
      this.scrollDown(f.event === "message.created");
    } else if (f.event === "message.deleted") {
      this.remove(data.message_id);
    } else if (f.event === "typing") {
      this.setTyping(Boolean(data.active));
    }
  }

  setTyping(on) {
    clearTimeout(this.typingTimer);
    this.typing.hidden = !on;
    // A lost "off" must not leave the dots forever.
    if (on) this.typingTimer = setTimeout(() => (this.typing.hidden = true), 30000);
    this.scrollDown(false);
  }

  scrollDown(force) {
    const s = this.scroller;
    if (force || s.scrollHeight - s.scrollTop - s.clientHeight < 120) s.scrollTop = s.scrollHeight;
  }

  // -- messages --

  /** Adds or replaces a message, keeping the list oldest-first. */
  upsert(m) {
    if (!m || !m.id || this.deleted.has(m.id)) return;
    const old = this.messages.get(m.id);
    if (old && (old.updated_at > m.updated_at || JSON.stringify(old) === JSON.stringify(m))) return;
    this.messages.set(m.id, m);
    const node = this.renderMessage(m);
    const prev = this.nodes.get(m.id);
    this.nodes.set(m.id, node);
    if (prev) {
      const key = focusKeyOf(prev, this.root.getRootNode().activeElement);
      prev.replaceWith(node);
      if (key) restoreFocus(node, key);
      return;
    }
    const next = [...this.messages.values()]
      .filter((x) => x.id !== m.id && older(m, x) && this.nodes.get(x.id).isConnected)
      .sort((a, b) => (older(a, b) ? -1 : 1))[0];
    this.list.insertBefore(node, next ? this.nodes.get(next.id) : null);
  }

  remove(id) {
    this.deleted.add(id);
    this.messages.delete(id);
    const node = this.nodes.get(id);
    if (node) node.remove();
    this.nodes.delete(id);
  }

  renderMessage(m) {
    const kind = (m.author && m.author.kind) || "bot";
    const who = kind === "visitor" ? "You" : (m.author && m.author.display_name) || (kind === "bot" ? "Bot" : "Team");
    const blocks = (m.blocks || []).map((b) => {
      if (b.type === "actions") return renderActions(b, (e, group, err) => this.click(m, b, e, group, err));
      if (b.type !== "form") return null;
      const uid = `bh-${m.id}-${b.form_id}`;
      const form = renderForm(b, uid, (f, err) => this.submit(m, b, uid, f, err));
      fillForm(form, (b.state && b.state.values) || this.sent.get(uid));
      return form;
    });
    return h("article", { class: `bh-msg bh-msg--${kind}`, dataset: { messageId: m.id } },
      h("div", { class: "bh-meta" }, h("span", { class: "bh-who" }, who), h("time", { datetime: m.created_at }, clock(m.created_at))),
      m.text ? h("div", { class: "bh-bubble" }, m.text) : null,
      renderAttachments(m, this.sess.visitor_token),
      blocks);
  }

  async click(m, b, e, group, err) {
    err.textContent = "";
    const buttons = group.querySelectorAll("button");
    buttons.forEach((x) => (x.disabled = true));
    const r = await call("POST", `/widget/v1/messages/${encodeURIComponent(m.id)}/clicks`, this.sess.visitor_token, { block_id: b.block_id, action_id: e.action_id });
    if (r.ok && r.body.message) {
      this.upsert(r.body.message);
      // The chosen button is off now: focus stays on its group.
      const node = this.nodes.get(m.id);
      if (node) restoreFocus(node, { block: b.block_id, action: e.action_id, name: null });
      return;
    }
    buttons.forEach((x) => (x.disabled = Boolean(b.state && b.state.disabled)));
    const again = [...buttons].find((x) => x.dataset.actionId === e.action_id);
    if (again && !again.disabled) again.focus();
    err.textContent = problem(r);
    if (r.status === 409 || r.status === 410) this.refresh();
  }

  async submit(m, b, uid, form, err) {
    const values = formValues(b, form);
    showFieldErrors(form, [], valueName);
    err.textContent = "";
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    const r = await call("POST", `/widget/v1/messages/${encodeURIComponent(m.id)}/forms/${encodeURIComponent(b.form_id)}`, this.sess.visitor_token, { values });
    if (r.ok && r.body.message) {
      this.sent.set(uid, values);
      this.upsert(r.body.message);
      // The stream may have re-rendered it first: show what was sent.
      const node = this.nodes.get(m.id);
      const shown = node && node.querySelector(`form[data-form-id="${CSS.escape(b.form_id)}"]`);
      if (shown) fillForm(shown, values);
      return;
    }
    button.disabled = false;
    const rest = showFieldErrors(form, r.body.errors, valueName);
    err.textContent = rest.length ? rest.join(" ") : r.body.errors && r.body.errors.length ? "" : problem(r);
    if (r.status === 409 || r.status === 410) this.refresh();
  }

  async send(ev) {
    ev.preventDefault();
    const text = this.input.value.trim();
    if (!text) return;
    this.sendError.textContent = "";
    const button = this.composer.querySelector("button");
    button.disabled = true;
    const r = await call("POST", this.path("/messages"), this.sess.visitor_token, { text });
    button.disabled = false;
    if (!r.ok) {
      const first = r.body.errors && r.body.errors[0];
      this.sendError.textContent = (first && first.message) || problem(r);
      return;
    }
    this.input.value = "";
    this.upsert(r.body);
    this.scrollDown(true);
  }
}
