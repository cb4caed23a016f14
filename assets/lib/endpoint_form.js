// The form of one endpoint (§13), shared by the portal and the dashboard:
// URL, description, event types, filter (key → allowed values), extra
// headers, rate limit and replies. A 422's errors are shown at the field
// their JSON pointer names.

import { h } from "./dom.js";

export const EVENT_TYPES = ["interaction.button_clicked", "interaction.form_submitted", "message.received"];

let uid = 0;
const nextId = (p) => `${p}-${++uid}`;

/** "a~1b" → "a/b" (a JSON pointer segment, unescaped). */
const unescape = (s) => s.replace(/~1/g, "/").replace(/~0/g, "~");

/** One allowed value as typed: 3, true, "text" ("3" in quotes stays text). */
export function parseValue(s) {
  const t = s.trim();
  if (/^-?\d+(\.\d+)?$/.test(t)) return Number(t);
  if (t === "true" || t === "false") return t === "true";
  const q = /^"(.*)"$/.exec(t);
  return q ? q[1] : t;
}

/** The reverse of parseValue, for the editor. */
export function showValue(v) {
  if (typeof v !== "string") return String(v);
  return /^-?\d+(\.\d+)?$/.test(v) || v === "true" || v === "false" || v.includes(",") ? `"${v}"` : v;
}

/** Splits "a, b, \"c, d\"" on commas outside quotes. */
export function splitValues(s) {
  const out = [];
  let cur = "";
  let quoted = false;
  for (const c of s) {
    if (c === '"') quoted = !quoted;
    if (c === "," && !quoted) {
      out.push(cur);
      cur = "";
    } else cur += c;
  }
  out.push(cur);
  return out.map((x) => x.trim()).filter((x) => x !== "");
}

/** The field errors of a problem answer: [{field, message}]. */
export function fieldErrors(r) {
  const p = (r && r.body) || {};
  return (p.errors || []).map((e) => ({ field: e.field || e.pointer || "", code: e.code, message: e.message || e.code }));
}

/**
 * A form for endpoint `e` (`{}` for a new one). `cls` names the page's
 * button classes; `submit(body)` resolves to the API's answer; `cancel()`
 * closes the form. Returns the <form>.
 */
export function endpointForm(e, { cls, submit, cancel, isNew }) {
  const id = nextId("ep");
  const errors = [];
  const general = h("p", { class: "field-error", role: "alert", dataset: { for: "" } });

  const text = (name, label, attrs) => {
    const input = h("input", { id: `${id}-${name}`, name, ...attrs });
    const row = h("div", { class: "field", dataset: { pointer: `/${name}` } }, h("label", { for: input.id }, label), input);
    return { input, row };
  };
  const url = text("url", "URL", { type: "url", required: true, value: e.url || "", placeholder: "your receiver, e.g. example.com/webhooks", autocomplete: "off", spellcheck: "false" });
  const description = text("description", "Description (optional)", { value: e.description || "", maxlength: 200, autocomplete: "off" });
  const rate = text("rate_limit", "Rate limit (optional)", { value: e.rate_limit || "", placeholder: "10/s, 100/min or 1000/h", autocomplete: "off", spellcheck: "false" });

  const chosen = new Set(e.event_types || []);
  const typeBoxes = EVENT_TYPES.map((t) => h("input", { type: "checkbox", name: "event_types", value: t, checked: chosen.has(t) }));
  const types = h("fieldset", { class: "field", dataset: { pointer: "/event_types" } },
    h("legend", null, "Event types (none ticked: all)"),
    typeBoxes.map((b) => h("label", { class: "check" }, b, ` ${b.value}`)));

  const pairRows = (kind, labels, entries) => {
    const list = h("div", { class: "pairs" });
    const add = (k, v) => {
      const key = h("input", { name: `${kind}-key`, value: k, "aria-label": labels[0], placeholder: labels[2], autocomplete: "off", spellcheck: "false" });
      const val = h("input", { name: `${kind}-value`, value: v, "aria-label": labels[1], placeholder: labels[3], autocomplete: "off", spellcheck: "false" });
      const row = h("div", { class: "pair" }, key, val,
        h("button", { type: "button", class: cls.button, "aria-label": `Remove this ${kind === "filter" ? "filter key" : "header"}`, onclick: () => row.remove() }, "Remove"));
      list.append(row);
      return key;
    };
    entries.forEach(([k, v]) => add(k, v));
    const more = h("button", { type: "button", class: cls.button, dataset: { add: kind }, onclick: () => add("", "").focus() }, kind === "filter" ? "Add filter key" : "Add header");
    return { list, more };
  };
  const filter = pairRows("filter", ["Filter key", "Allowed values, comma-separated", "action_id or values.topic", "buy, \"42\", true"],
    Object.entries(e.filter || {}).map(([k, vs]) => [k, vs.map(showValue).join(", ")]));
  const filterSet = h("fieldset", { class: "field", dataset: { pointer: "/filter" } },
    h("legend", null, "Filter (optional): only events whose field has one of the values"),
    filter.list, filter.more);
  const headers = pairRows("headers", ["Header name", "Header value", "X-Api-Key", "value"], Object.entries(e.headers || {}));
  const headerSet = h("fieldset", { class: "field", dataset: { pointer: "/headers" } },
    h("legend", null, "Extra request headers (optional)"), headers.list, headers.more);

  const repliesBox = h("input", { type: "checkbox", name: "replies", id: `${id}-replies`, checked: e.replies === undefined ? Boolean(e.default) : e.replies });
  const replies = h("div", { class: "field", dataset: { pointer: "/replies" } },
    h("label", { class: "check", for: repliesBox.id }, repliesBox, " Apply a 2xx answer's JSON body as a reply"));

  const save = h("button", { type: "submit", class: cls.primary }, isNew ? "Add endpoint" : "Save");
  const form = h("form", { class: "endpoint-form", novalidate: true },
    url.row, description.row, types, filterSet, headerSet, rate.row, replies,
    h("div", { class: "actions" }, save, h("button", { type: "button", class: cls.button, onclick: () => cancel() }, "Cancel")),
    general);

  const body = () => {
    const picked = typeBoxes.filter((b) => b.checked).map((b) => b.value);
    const pairs = (list, kind, f) => {
      const o = {};
      for (const row of list.querySelectorAll(".pair")) {
        const k = row.querySelector(`[name=${kind}-key]`).value.trim();
        if (k) o[k] = f(row.querySelector(`[name=${kind}-value]`).value);
      }
      return Object.keys(o).length ? o : null;
    };
    return {
      url: url.input.value.trim(),
      description: description.input.value.trim() || null,
      event_types: picked.length ? picked : null,
      filter: pairs(filter.list, "filter", (v) => splitValues(v).map(parseValue)),
      headers: pairs(headers.list, "headers", (v) => v),
      rate_limit: rate.input.value.trim() || null,
      replies: repliesBox.checked,
    };
  };

  const clear = () => {
    for (const x of errors.splice(0)) x.remove();
    for (const x of form.querySelectorAll("[aria-invalid]")) {
      x.removeAttribute("aria-invalid");
      x.removeAttribute("aria-describedby");
    }
    general.textContent = "";
  };

  /** Where a pointer's error goes: [container, the control to mark]. */
  const place = (pointer) => {
    const [, top, rest] = /^\/([^/]*)(?:\/(.*))?$/.exec(pointer) || [];
    const box = top && form.querySelector(`[data-pointer="/${CSS.escape(top)}"]`);
    if (!box) return [null, null];
    if ((top === "filter" || top === "headers") && rest !== undefined) {
      const name = unescape(rest.split("/")[0]).toLowerCase();
      const row = [...box.querySelectorAll(".pair")].find((r) => r.querySelector("input").value.trim().toLowerCase() === name);
      if (row) return [row, row.querySelector("input")];
    }
    if (top === "event_types" && rest !== undefined) return [box, typeBoxes[0]];
    return [box, box.querySelector("input")];
  };

  const show = (errs, fallback) => {
    clear();
    let first = null;
    for (const err of errs) {
      const [box, control] = place(err.field);
      if (!box) {
        general.textContent += `${general.textContent ? " " : ""}${err.field ? `${err.field}: ` : ""}${err.message}`;
        continue;
      }
      const p = h("p", { class: "field-error", id: nextId("err"), dataset: { for: err.field, code: err.code || "" } }, err.message);
      box.append(p);
      errors.push(p);
      if (control) {
        control.setAttribute("aria-invalid", "true");
        control.setAttribute("aria-describedby", p.id);
        first = first || control;
      }
    }
    if (!errs.length) general.textContent = fallback;
    (first || save).focus();
  };

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clear();
    save.disabled = true;
    const r = await submit(body());
    save.disabled = false;
    if (r && !r.ok) show(fieldErrors(r), (r.body && (r.body.detail || r.body.title)) || `The server answered ${r.status}.`);
  });
  return form;
}
