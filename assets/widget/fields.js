// A form's fields (§3, §14): each type with its native control. Groups
// (radio, multiselect, rating) are fieldsets with a legend; a placeholder
// and a hint go with the control (the hint is read with it); `default` is
// shown pre-filled. A used form shows what was sent: text can be read and
// copied (read-only), choices cannot be changed (off).

import { h } from "../lib/dom.js";

const GROUPS = new Set(["radio", "multiselect", "rating"]);
const CHOICES = new Set(["select", "checkbox", "radio", "multiselect", "rating"]);
const INPUT_TYPES = { email: "email", date: "date", time: "time", url: "url", tel: "tel" };
const AUTOCOMPLETE = { email: "email", url: "url", tel: "tel" };

function optionsOf(f) {
  if (f.type === "rating") {
    const top = f.max || 5;
    return Array.from({ length: top }, (_, i) => ({ value: String(i + 1), label: String(i + 1), top }));
  }
  return f.options || [];
}

/** A group of radios or checkboxes in a fieldset whose legend is the label. */
function renderGroup(f, id, disabled, describedBy, mark) {
  const multi = f.type === "multiselect";
  const chosen = multi ? new Set(Array.isArray(f.default) ? f.default : []) : new Set(f.default == null ? [] : [String(f.default)]);
  const items = optionsOf(f).map((o, i) => {
    const oid = `${id}-${i}`;
    const input = h("input", {
      id: oid, type: multi ? "checkbox" : "radio", name: f.name, value: o.value,
      checked: chosen.has(o.value), disabled,
      required: f.required && !multi,
    });
    if (f.type === "rating") {
      return h("label", { for: oid, class: "bh-star" }, input,
        h("span", { "aria-hidden": "true" }, "★"),
        h("span", { class: "bh-sr" }, `${o.label} of ${o.top}`));
    }
    return h("label", { for: oid, class: "bh-choice" }, input, " ", o.label);
  });
  return h("fieldset", {
    id, class: `bh-group bh-group--${f.type}`, "aria-describedby": describedBy,
    "aria-required": f.required ? "true" : null,
  },
  h("legend", {}, f.label, mark),
  h("div", { class: "bh-group-items" }, items));
}

export function renderField(f, id, disabled) {
  const errId = `${id}-error`;
  const hintId = `${id}-hint`;
  const describedBy = f.hint ? `${hintId} ${errId}` : errId;
  const textual = !CHOICES.has(f.type);
  const mark = f.required ? h("span", { class: "bh-req", "aria-hidden": "true" }, " *") : null;
  const error = h("p", { class: "bh-field-error", id: errId });
  const hint = f.hint ? h("p", { class: "bh-field-hint", id: hintId }, f.hint) : null;
  if (GROUPS.has(f.type)) {
    return h("div", { class: `bh-field bh-field--${f.type}`, dataset: { name: f.name } },
      renderGroup(f, id, disabled, describedBy, mark), hint, error);
  }
  const common = {
    id, name: f.name, "aria-describedby": describedBy, required: f.required,
    disabled: disabled && !textual, readonly: disabled && textual,
    placeholder: f.placeholder,
  };
  const dflt = f.default == null ? null : String(f.default);
  let control;
  if (f.type === "textarea") {
    control = h("textarea", { ...common, rows: 3, maxlength: f.max });
    if (dflt !== null) control.value = dflt;
  } else if (f.type === "select") {
    control = h("select", { ...common, placeholder: null }, h("option", { value: "" }, f.placeholder || "Choose…"),
      (f.options || []).map((o) => h("option", { value: o.value, selected: o.value === dflt }, o.label)));
  } else if (f.type === "checkbox") {
    control = h("input", { ...common, placeholder: null, type: "checkbox", checked: f.default === true });
  } else if (f.type === "number") {
    // Sent as typed: the server says when it is not a number.
    control = h("input", { ...common, type: "text", inputmode: "decimal", value: dflt });
  } else if (f.type === "date" || f.type === "time") {
    control = h("input", { ...common, type: f.type, min: f.min, max: f.max, value: dflt });
  } else {
    control = h("input", {
      ...common, type: INPUT_TYPES[f.type] || "text", maxlength: f.max, value: dflt,
      autocomplete: AUTOCOMPLETE[f.type] || null,
      inputmode: f.type === "url" ? "url" : f.type === "tel" ? "tel" : null,
    });
  }
  if (f.type === "checkbox") {
    return h("div", { class: "bh-field bh-field--checkbox", dataset: { name: f.name } },
      h("label", { for: id }, control, " ", f.label, mark), hint, error);
  }
  return h("div", { class: `bh-field bh-field--${f.type}`, dataset: { name: f.name } },
    h("label", { for: id }, f.label, mark), control, hint, error);
}

/** The controls of one rendered field (several for a group). */
export function fieldControls(box) {
  return [...box.querySelectorAll("input, select, textarea")];
}

function controlsNamed(form, name) {
  return [...form.elements].filter((el) => el.name === name);
}

/** The values of a rendered form as the widget sends them: a checkbox as a
 * boolean, a multiselect as a list, a rating as a numeric string. */
export function formValues(b, form) {
  const values = {};
  for (const f of b.fields || []) {
    const els = controlsNamed(form, f.name);
    if (!els.length) continue;
    if (f.type === "checkbox") values[f.name] = els[0].checked;
    else if (f.type === "multiselect") values[f.name] = els.filter((x) => x.checked).map((x) => x.value);
    else if (GROUPS.has(f.type)) values[f.name] = (els.find((x) => x.checked) || { value: "" }).value;
    else values[f.name] = els[0].value;
  }
  return values;
}

/** Puts values (what the visitor sent) back into a rendered form. */
export function fillForm(form, values) {
  for (const [name, value] of Object.entries(values || {})) {
    const els = controlsNamed(form, name);
    if (!els.length) continue;
    if (els[0].type === "checkbox" && els.length === 1 && !Array.isArray(value)) els[0].checked = Boolean(value);
    else if (els[0].type === "checkbox" || els[0].type === "radio") {
      const chosen = new Set((Array.isArray(value) ? value : [value]).map((v) => (v == null ? "" : String(v))));
      for (const el of els) el.checked = chosen.has(el.value);
    } else els[0].value = value == null ? "" : value;
  }
}
