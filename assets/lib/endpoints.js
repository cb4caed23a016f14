// A chatbot's endpoints (§13), shared by the portal and the dashboard: the
// default first, each with its state (enabled, paused, gone) and its recent
// deliveries, and the actions add, edit, pause, enable, send a test (its
// outcome shown when it arrives), rotate the secret (the new one shown
// once) and delete (confirmed; never the default). A read-only view shows
// the same and offers none of them.

import { h } from "./dom.js";
import { endpointForm } from "./endpoint_form.js";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const RECENT = 20;
const ep = (e) => `/api/v1/endpoints/${encodeURIComponent(e.id)}`;

/** enabled | paused | gone, for an endpoint object. */
export function stateOf(e) {
  if (e.enabled !== false) return "enabled";
  return e.disabled_reason === "gone" ? "gone" : "paused";
}

/** "8 succeeded, 1 failed" for the statuses of recent deliveries. */
export function outcomes(events) {
  const n = {};
  for (const x of events) n[x.status] = (n[x.status] || 0) + 1;
  return ["succeeded", "pending", "failed", "dead"].filter((s) => n[s]).map((s) => `${n[s]} ${s}`).join(", ");
}

/** A modal question; resolves to true when confirmed. */
export function confirmDialog(text, yes, cls) {
  return new Promise((resolve) => {
    const ok = h("button", { type: "button", class: cls.danger, dataset: { confirm: "yes" } }, yes);
    const no = h("button", { type: "button", class: cls.button, dataset: { confirm: "no" } }, "Cancel");
    const titleId = `confirm-${Date.now()}`;
    const d = h("dialog", { class: "confirm-dialog", "aria-labelledby": titleId }, h("p", { id: titleId }, text), h("div", { class: "actions" }, no, ok));
    const done = (v) => {
      d.close();
      d.remove();
      resolve(v);
    };
    ok.addEventListener("click", () => done(true));
    no.addEventListener("click", () => done(false));
    d.addEventListener("cancel", (ev) => {
      ev.preventDefault();
      done(false);
    });
    document.body.append(d);
    d.showModal();
    no.focus();
  });
}

/** Copies text; falls back to a selection when the clipboard is refused (a frame). */
async function copy(text, code) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const range = document.createRange();
    range.selectNodeContents(code);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    try {
      return document.execCommand("copy");
    } catch {
      return false;
    }
  }
}

export class EndpointsView {
  /**
   * opts: {api(method, path, body) → {status, ok, body}, cls: {button,
   * primary, danger}, readOnly, onExpired(), onChange(), onList(list)}.
   */
  constructor(root, opts) {
    this.root = root;
    this.opts = opts;
    this.list = [];
  }

  async call(method, path, body) {
    const r = await this.opts.api(method, path, body);
    if (r.status === 401 && this.opts.onExpired) this.opts.onExpired();
    return r;
  }

  async load() {
    const r = await this.call("GET", "/api/v1/endpoints?limit=100");
    if (!r.ok) return this.root.replaceChildren(h("p", { class: "field-error", role: "alert" }, (r.body && r.body.detail) || `The server answered ${r.status}.`));
    this.list = r.body.data;
    if (this.opts.onList) this.opts.onList(this.list);
    const add = this.opts.readOnly ? null : h("button", { type: "button", class: this.opts.cls.primary, dataset: { act: "add" }, onclick: () => this.add(add) }, "Add endpoint");
    this.root.replaceChildren(...this.list.map((e) => this.card(e)), ...(add ? [h("div", { class: "actions add-row" }, add)] : []));
    await Promise.all(this.list.map((e) => this.health(e)));
  }

  /** Its recent deliveries, from the events log filtered by endpoint. */
  async health(e) {
    const el = this.root.querySelector(`[data-endpoint-id="${CSS.escape(e.id)}"] .ep-health`);
    if (!el) return;
    const r = await this.call("GET", `/api/v1/events?endpoint_id=${encodeURIComponent(e.id)}&limit=${RECENT}`);
    if (!r.ok) return;
    const data = r.body.data;
    el.textContent = data.length ? `Last ${data.length} deliveries: ${outcomes(data)}` : "No deliveries yet";
  }

  card(e) {
    const { cls, readOnly } = this.opts;
    const state = stateOf(e);
    const result = h("div", { class: "ep-result", role: "status" });
    const btn = (act, label, f, c) => h("button", { type: "button", class: c || cls.button, dataset: { act }, onclick: (ev) => f(ev.currentTarget) }, label);
    const actions = readOnly ? [] : [
      btn("test", "Send test", () => this.test(e, result)),
      btn("edit", "Edit", () => this.edit(e, card)),
      state === "enabled" ? btn("pause", "Pause", () => this.patch(e, { enabled: false }, result)) : btn("enable", "Enable", () => this.patch(e, { enabled: true }, result)),
      btn("rotate", "Rotate secret", () => this.rotate(e, result)),
      e.default ? null : btn("delete", "Delete", () => this.remove(e, result), cls.danger),
    ];
    const facts = [
      e.event_types ? `Types: ${e.event_types.join(", ")}` : "All event types",
      e.filter ? `Filter: ${Object.entries(e.filter).map(([k, v]) => `${k} ∈ {${v.join(", ")}}`).join("; ")}` : null,
      e.rate_limit ? `At most ${e.rate_limit}` : null,
      e.headers && Object.keys(e.headers).length ? `Headers: ${Object.keys(e.headers).join(", ")}` : null,
      e.replies ? "Replies applied" : null,
    ].filter(Boolean);
    const card = h("article", { class: `endpoint ep-${state}`, dataset: { endpointId: e.id, state }, "aria-label": `Endpoint ${e.url}` },
      h("div", { class: "ep-head" },
        h("h3", { class: "ep-url" }, e.url),
        e.default ? h("span", { class: "ep-badge ep-default" }, "default") : null,
        h("span", { class: `ep-badge ep-state-${state}` }, state)),
      e.description ? h("p", { class: "ep-desc" }, e.description) : null,
      h("p", { class: "ep-facts" }, facts.join(" · ")),
      h("p", { class: "ep-health" }, "…"),
      actions.length ? h("div", { class: "actions" }, actions) : null,
      result);
    return card;
  }

  say(result, text, bad) {
    result.classList.toggle("is-error", Boolean(bad));
    result.replaceChildren(h("p", null, text));
  }

  problem(r) {
    const p = r.body || {};
    const first = p.errors && p.errors[0];
    return first ? `${first.field || first.pointer}: ${first.message}` : p.detail || p.title || `The server answered ${r.status}.`;
  }

  /** A `webhook.test` to this endpoint; shows its delivery's outcome when it arrives. */
  async test(e, result) {
    this.say(result, "Sending a test event…");
    const r = await this.call("POST", `${ep(e)}/test`, {});
    if (!r.ok) return this.say(result, this.problem(r), true);
    const id = r.body.event_id;
    for (let i = 0; i < 30; i++) {
      const ev = await this.call("GET", `/api/v1/events/${encodeURIComponent(id)}`);
      const a = ((ev.body && ev.body.attempts) || []).filter((x) => x.endpoint_id === e.id).pop();
      if (a) {
        const ok = a.status_code >= 200 && a.status_code < 300;
        const got = a.status_code ? `HTTP ${a.status_code}` : a.error || "no answer";
        this.say(result, ok ? `Test event ${id} delivered: ${got} in ${a.duration_ms} ms.` : `Test event ${id} failed: ${got}${a.duration_ms != null ? ` after ${a.duration_ms} ms` : ""}. It will be retried.`, !ok);
        result.dataset.outcome = ok ? "delivered" : "failed";
        if (this.opts.onChange) this.opts.onChange();
        return this.health(e);
      }
      await sleep(i < 10 ? 300 : 1000);
    }
    this.say(result, `Test event ${id} is queued (the endpoint may be paused); its outcome shows under the events.`);
    result.dataset.outcome = "queued";
    if (this.opts.onChange) this.opts.onChange();
  }

  async patch(e, body, result) {
    const r = await this.call("PATCH", ep(e), body);
    if (!r.ok) return this.say(result, this.problem(r), true);
    await this.load();
    const b = this.root.querySelector(`[data-endpoint-id="${CSS.escape(e.id)}"] [data-act=${body.enabled ? "pause" : "enable"}]`);
    if (b) b.focus();
  }

  /** Rotates after a confirmation; the new secret is shown once, with a copy button. */
  async rotate(e, result) {
    const yes = await confirmDialog(`Rotate the signing secret of ${e.url}? The old secret keeps signing too for 24 hours.`, "Rotate secret", this.opts.cls);
    if (!yes) return;
    const r = await this.call("POST", `${ep(e)}/rotate-secret`, {});
    if (!r.ok) return this.say(result, this.problem(r), true);
    this.secret(result, r.body.signing_secret, "New signing secret — shown only now; the old one also signs for 24 h:");
  }

  secret(result, secret, text) {
    const code = h("code", { class: "secret" }, secret);
    const note = h("span", { class: "copy-note", role: "status" });
    const button = h("button", { type: "button", class: this.opts.cls.button, dataset: { act: "copy" }, onclick: async () => {
      note.textContent = (await copy(secret, code)) ? "Copied." : "Select it and copy it.";
    } }, "Copy");
    result.classList.remove("is-error");
    result.replaceChildren(h("div", { class: "secret-box" }, h("p", null, text), code, h("div", { class: "actions" }, button, note)));
    button.focus();
  }

  async remove(e, result) {
    const yes = await confirmDialog(`Delete the endpoint ${e.url}? Its deliveries that have not succeeded are dropped.`, "Delete endpoint", this.opts.cls);
    if (!yes) return;
    const r = await this.call("DELETE", ep(e));
    if (!r.ok) return this.say(result, this.problem(r), true);
    await this.load();
    const add = this.root.querySelector("[data-act=add]");
    if (add) add.focus();
    if (this.opts.onChange) this.opts.onChange();
  }

  edit(e, card) {
    if (card.querySelector("form")) return;
    const button = card.querySelector("[data-act=edit]");
    const form = endpointForm(e, {
      cls: this.opts.cls,
      submit: async (body) => {
        const r = await this.call("PATCH", ep(e), body);
        if (r.ok) await this.load();
        return r;
      },
      cancel: () => {
        form.remove();
        if (button) button.focus();
      },
    });
    card.append(form);
    form.querySelector("input").focus();
  }

  add(button) {
    const holder = this.root.querySelector(".add-row");
    if (this.root.querySelector(".endpoint-form.new")) return;
    const form = endpointForm({}, {
      cls: this.opts.cls,
      isNew: true,
      submit: async (body) => {
        const r = await this.call("POST", "/api/v1/endpoints", body);
        if (!r.ok) return r;
        await this.load();
        const result = this.root.querySelector(`[data-endpoint-id="${CSS.escape(r.body.id)}"] .ep-result`);
        if (result) this.secret(result, r.body.signing_secret, "Its signing secret — shown only now:");
        if (this.opts.onChange) this.opts.onChange();
        return r;
      },
      cancel: () => {
        form.remove();
        holder.hidden = false;
        button.focus();
      },
    });
    holder.hidden = true;
    form.classList.add("new");
    form.setAttribute("aria-label", "New endpoint");
    holder.before(form);
    form.querySelector("input").focus();
  }
}
