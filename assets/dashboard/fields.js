// The fields of a form interaction, as a reviewer answers them (§6, §14):
// each type with its native control, groups (radio, multiselect, rating)
// as fieldsets with a legend, the hint under the field, the default
// pre-filled.

import { h } from "./dom.js";

const INPUT_TYPES = { email: "email", date: "date", time: "time", url: "url", tel: "tel" };

function group(f, id, items) {
  return h("fieldset", { class: `field-group field-group-${f.type}`, id },
    h("legend", null, f.label || f.name, f.required ? " *" : ""), items);
}

function choices(f, id, multi) {
  const dflt = new Set(Array.isArray(f.default) ? f.default : f.default == null ? [] : [String(f.default)]);
  const opts = f.type === "rating"
    ? Array.from({ length: f.max || 5 }, (_, i) => ({ value: String(i + 1), label: `${i + 1}` }))
    : f.options || [];
  return opts.map((o, i) => h("label", { class: "check", for: `${id}-${i}` },
    h("input", { id: `${id}-${i}`, type: multi ? "checkbox" : "radio", name: f.name, value: o.value, checked: dflt.has(o.value) }),
    ` ${o.label}`));
}

/** One field, with its error line (`.field-error`) and hint. */
export function answerField(f, id) {
  const hint = f.hint ? h("span", { class: "muted small field-hint", id: `${id}-hint` }, f.hint) : null;
  const error = h("span", { class: "field-error", id: `${id}-error` });
  const described = f.hint ? `${id}-hint ${id}-error` : `${id}-error`;
  const box = (...children) => h("div", { class: `field field-${f.type}`, dataset: { name: f.name } }, ...children, hint, error);
  if (f.type === "radio" || f.type === "rating" || f.type === "multiselect") {
    const g = group(f, id, choices(f, id, f.type === "multiselect"));
    g.setAttribute("aria-describedby", described);
    return box(g);
  }
  const dflt = f.default == null ? null : String(f.default);
  const common = { id, name: f.name, "aria-describedby": described, placeholder: f.placeholder };
  let control;
  if (f.type === "textarea") {
    control = h("textarea", { ...common, rows: 2 });
    if (dflt !== null) control.value = dflt;
  } else if (f.type === "select") {
    control = h("select", { ...common, placeholder: null }, h("option", { value: "" }, "Choose…"),
      (f.options || []).map((o) => h("option", { value: o.value, selected: o.value === dflt }, o.label)));
  } else if (f.type === "checkbox") {
    control = h("input", { ...common, placeholder: null, type: "checkbox", checked: f.default === true });
  } else {
    control = h("input", {
      ...common, type: INPUT_TYPES[f.type] || "text", value: dflt,
      min: f.type === "date" || f.type === "time" ? f.min : null,
      max: f.type === "date" || f.type === "time" ? f.max : null,
      inputmode: f.type === "number" ? "decimal" : null,
    });
  }
  return box(h("label", { for: id }, f.label || f.name, f.required ? " *" : ""), control);
}

/** The answer's values, typed as the widget sends them. */
export function answerValues(fields, form) {
  const values = {};
  for (const f of fields) {
    const els = [...form.elements].filter((x) => x.name === f.name);
    if (!els.length) continue;
    if (f.type === "checkbox") values[f.name] = els[0].checked;
    else if (f.type === "multiselect") values[f.name] = els.filter((x) => x.checked).map((x) => x.value);
    else if (f.type === "radio" || f.type === "rating") values[f.name] = (els.find((x) => x.checked) || { value: "" }).value;
    else values[f.name] = els[0].value;
  }
  return values;
}
