// The chatbot's endpoints: each with its URL and state, a test event with
// its result, secret rotation, and (with several endpoints per chatbot) add,
// edit, pause, enable and delete. A read-only link shows them only.

import { h } from "../lib/dom.js";
import { api, problem } from "./api.js";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export class Endpoints {
  constructor(root, opts) {
    this.root = root;
    this.opts = opts;
  }

  async load() {
    const r = await api("GET", "/api/v1/endpoints?limit=100");
    if (r.status === 401) return this.opts.onExpired();
    if (r.ok) {
      this.multi = true;
      return this.render(r.body.data);
    }
    // Without per-endpoint routes: the chatbot's one endpoint.
    const b = await api("GET", "/api/v1/chatbot");
    if (b.status === 401) return this.opts.onExpired();
    if (!b.ok) return this.root.replaceChildren(h("p", { class: "result is-error" }, problem(b)));
    this.multi = false;
    this.render([{ id: null, url: b.body.webhook_url, description: null, default: true, enabled: !b.body.endpoint_disabled, disabled_reason: null }]);
  }

  render(list) {
    const cards = list.map((e) => this.card(e));
    const add = this.multi && !this.opts.readOnly ? this.addForm() : null;
    this.root.replaceChildren(...cards, ...(add ? [add] : []));
  }

  card(e) {
    const result = h("p", { class: "result", role: "status" });
    const state = e.enabled === false ? `paused${e.disabled_reason && e.disabled_reason !== "paused" ? ` (${e.disabled_reason})` : ""}` : "enabled";
    const ro = this.opts.readOnly;
    const buttons = ro ? [] : [
      h("button", { type: "button", class: "primary", dataset: { act: "test" }, onclick: () => this.test(e, result) }, "Send test event"),
      h("button", { type: "button", dataset: { act: "rotate" }, onclick: (ev) => this.rotate(e, result, ev.target) }, "Rotate secret"),
    ];
    if (!ro && this.multi) {
      buttons.push(
        h("button", { type: "button", dataset: { act: "edit" }, onclick: () => this.edit(e, card) }, "Edit"),
        e.enabled === false
          ? h("button", { type: "button", dataset: { act: "enable" }, onclick: () => this.patch(e, { enabled: true }, result) }, "Enable")
          : h("button", { type: "button", dataset: { act: "pause" }, onclick: () => this.patch(e, { enabled: false }, result) }, "Pause"));
      if (!e.default) buttons.push(h("button", { type: "button", class: "danger", dataset: { act: "delete" }, onclick: (ev) => this.remove(e, result, ev.target) }, "Delete"));
    }
    const card = h("article", { class: "card endpoint", dataset: { endpointId: e.id || "default" } },
      h("h3", { class: "url" }, e.url),
      h("p", { class: "muted" }, [e.default ? "Default endpoint · " : "", e.description ? `${e.description} · ` : "", state]),
      buttons.length ? h("div", { class: "actions" }, buttons) : null,
      result);
    return card;
  }

  /** Sends a test event now and shows what its first attempt got. */
  async test(e, result) {
    result.classList.remove("is-error");
    result.textContent = "Sending a test event…";
    const r = e.id ? await api("POST", `/api/v1/endpoints/${encodeURIComponent(e.id)}/test`, {}) : await api("POST", "/api/v1/events/test", {});
    if (r.status === 401) return this.opts.onExpired();
    if (!r.ok) {
      result.classList.add("is-error");
      result.textContent = problem(r);
      return;
    }
    const id = r.body.event_id;
    for (let i = 0; i < 40; i++) {
      const ev = await api("GET", `/api/v1/events/${encodeURIComponent(id)}`);
      const attempts = (ev.body && ev.body.attempts) || [];
      const a = attempts.filter((x) => !e.id || !x.endpoint_id || x.endpoint_id === e.id)[0];
      if (a) {
        const ok = a.status_code >= 200 && a.status_code < 300;
        result.classList.toggle("is-error", !ok);
        result.textContent = ok
          ? `Test event ${id} delivered: HTTP ${a.status_code} in ${a.duration_ms} ms.`
          : `Test event ${id} failed: ${a.status_code ? `HTTP ${a.status_code}` : a.error || "no answer"}${a.duration_ms != null ? ` after ${a.duration_ms} ms` : ""}. It will be retried.`;
        this.opts.onTest();
        return;
      }
      await sleep(i < 10 ? 300 : 1000);
    }
    result.textContent = `Test event ${id} is queued; its result shows under Events.`;
    this.opts.onTest();
  }

  async rotate(e, result, button) {
    if (button.dataset.armed !== "true") {
      button.dataset.armed = "true";
      button.textContent = "Confirm: rotate the secret";
      return;
    }
    delete button.dataset.armed;
    button.textContent = "Rotate secret";
    const r = e.id ? await api("POST", `/api/v1/endpoints/${encodeURIComponent(e.id)}/rotate-secret`, {}) : await api("POST", "/api/v1/chatbot/rotate-secret", {});
    if (r.status === 401) return this.opts.onExpired();
    result.classList.toggle("is-error", !r.ok);
    if (!r.ok) return (result.textContent = problem(r));
    result.replaceChildren("New signing secret (shown once; the old one also signs for 24 h): ", h("code", { class: "secret" }, r.body.signing_secret));
  }

  async patch(e, body, result) {
    const r = await api("PATCH", `/api/v1/endpoints/${encodeURIComponent(e.id)}`, body);
    if (r.status === 401) return this.opts.onExpired();
    if (!r.ok) {
      result.classList.add("is-error");
      result.textContent = problem(r);
      return;
    }
    await this.load();
  }

  async remove(e, result, button) {
    if (button.dataset.armed !== "true") {
      button.dataset.armed = "true";
      button.textContent = "Confirm: delete this endpoint";
      return;
    }
    const r = await api("DELETE", `/api/v1/endpoints/${encodeURIComponent(e.id)}`);
    if (r.status === 401) return this.opts.onExpired();
    if (!r.ok) {
      result.classList.add("is-error");
      result.textContent = problem(r);
      return;
    }
    await this.load();
  }

  edit(e, card) {
    const form = this.form(e, async (body, err) => {
      const r = await api("PATCH", `/api/v1/endpoints/${encodeURIComponent(e.id)}`, body);
      if (!r.ok) return (err.textContent = problem(r));
      await this.load();
    });
    card.append(form);
    form.querySelector("input").focus();
  }

  addForm() {
    const details = h("details", { class: "card" }, h("summary", null, "Add an endpoint"));
    details.append(this.form({ url: "", description: "" }, async (body, err) => {
      const r = await api("POST", "/api/v1/endpoints", body);
      if (!r.ok) return (err.textContent = problem(r));
      await this.load();
      const shown = this.root.querySelector(`[data-endpoint-id="${CSS.escape(r.body.id)}"] .result`);
      if (shown) shown.replaceChildren("Its signing secret (shown once): ", h("code", { class: "secret" }, r.body.signing_secret));
    }));
    return details;
  }

  form(e, submit) {
    const url = h("input", { name: "url", type: "url", required: true, value: e.url || "", placeholder: "https://example.com/webhooks" });
    const description = h("input", { name: "description", value: e.description || "", maxlength: 200 });
    const err = h("p", { class: "result is-error", role: "alert" });
    return h("form", { class: "form", onsubmit: (ev) => {
      ev.preventDefault();
      err.textContent = "";
      submit({ url: url.value.trim(), description: description.value.trim() || null }, err);
    } },
      h("label", null, "URL", url),
      h("label", null, "Description", description),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Save")),
      err);
  }
}
