// Renders a message's interactive blocks: `actions` (buttons; link buttons
// are plain links; a button with `confirm` asks in a dialog first) and
// `form` (its fields are drawn by fields.js), with their saved state.

import { h } from "../lib/dom.js";
import { REASONS } from "./api.js";
import { askConfirm } from "./confirm.js";
import { fieldControls, renderField } from "./fields.js";

export { fillForm, formValues } from "./fields.js";

function safeUrl(u) {
  try {
    const url = new URL(u, location.href);
    return url.protocol === "https:" || url.protocol === "http:" ? url.href : null;
  } catch {
    return null;
  }
}

/** The line under a block saying why it is off (or what was chosen). */
function stateLine(block, chosenLabel) {
  const s = block.state || {};
  let text = null;
  if (s.reason === "used" && s.answered_by === "member") {
    text = chosenLabel ? `Answered by the team: “${chosenLabel}”.` : "Answered by the team.";
  } else if (s.reason === "used") {
    if (chosenLabel) text = `You chose “${chosenLabel}”.`;
    else text = block.type === "form" ? "Sent." : "Answered.";
  } else if (s.reason) {
    text = REASONS[s.reason] || `No longer available (${s.reason}).`;
  } else if (s.disabled) {
    text = "No longer available.";
  }
  const who = s.answered_by === "member" ? " bh-state--team" : "";
  return text ? h("p", { class: `bh-state bh-state--${s.reason || "off"}${who}` }, text) : null;
}

/** onClick(button, groupElement, errorElement). */
export function renderActions(b, onClick) {
  const s = b.state || {};
  const err = h("p", { class: "bh-error", role: "alert" });
  const chosen = (b.elements || []).find((e) => e.action_id === s.chosen_action_id);
  const buttons = (b.elements || []).map((e) => {
    if (e.url) {
      return h("a", { class: "bh-btn bh-btn--link", href: safeUrl(e.url) || "#", target: "_blank", rel: "noopener noreferrer" },
        e.label, h("span", { "aria-hidden": "true" }, " ↗"));
    }
    const isChosen = e.action_id === s.chosen_action_id;
    return h("button", {
      type: "button",
      class: `bh-btn bh-btn--${e.style || "default"}${isChosen ? " is-chosen" : ""}`,
      disabled: s.disabled,
      "aria-pressed": isChosen ? "true" : null,
      dataset: { actionId: e.action_id },
      onclick: (ev) => {
        const button = ev.currentTarget;
        const group = button.parentElement;
        if (!e.confirm) return onClick(e, group, err);
        askConfirm(button, e.confirm).then((yes) => yes && onClick(e, group, err));
      },
    }, isChosen ? "✓ " : null, e.label);
  });
  return h("div", { class: `bh-block bh-actions${s.disabled ? " is-disabled" : ""}`, dataset: { blockId: b.block_id } },
    h("div", { class: "bh-buttons", role: "group", tabindex: "-1", "aria-label": "Choices", dataset: { focusGroup: "" } }, buttons),
    stateLine(b, chosen && chosen.label), err);
}

/** Shows a 422's errors under their fields; returns the messages of the rest. */
export function showFieldErrors(form, errors, nameOf) {
  const rest = [];
  let first = null;
  for (const box of form.querySelectorAll(".bh-field")) {
    box.classList.remove("has-error");
    box.querySelector(".bh-field-error").textContent = "";
    for (const c of fieldControls(box)) c.removeAttribute("aria-invalid");
  }
  for (const e of errors || []) {
    const name = nameOf(e.field);
    const box = name === null ? null : [...form.querySelectorAll(".bh-field")].find((x) => x.dataset.name === name);
    if (!box) {
      rest.push(e.message || e.code);
      continue;
    }
    box.classList.add("has-error");
    const line = box.querySelector(".bh-field-error");
    line.textContent = line.textContent ? `${line.textContent} ${e.message}` : e.message || e.code;
    const controls = fieldControls(box);
    for (const c of controls) c.setAttribute("aria-invalid", "true");
    first = first || controls[0];
  }
  if (first) first.focus();
  return rest;
}

/** onSubmit(form, errorElement). `uid` makes the element ids unique. */
export function renderForm(b, uid, onSubmit) {
  const s = b.state || {};
  const err = h("p", { class: "bh-error", role: "alert" });
  const form = h("form", {
    class: `bh-block bh-form${s.disabled ? " is-disabled" : ""}${s.values ? " is-sent" : ""}`,
    novalidate: true,
    tabindex: "-1",
    "data-focus-group": "",
    dataset: { blockId: b.block_id, formId: b.form_id },
    onsubmit: (ev) => {
      ev.preventDefault();
      onSubmit(form, err);
    },
  },
  b.title ? h("div", { class: "bh-form-title" }, b.title) : null,
  (b.fields || []).map((f) => renderField(f, `${uid}-${f.name}`, s.disabled)),
  h("button", { class: "bh-btn bh-btn--primary", type: "submit", disabled: s.disabled }, b.submit_label || "Submit"),
  stateLine(b, null), err);
  return form;
}
