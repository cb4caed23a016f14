// A button's `confirm` (§14): a modal <dialog> that keeps focus while it is
// open (the browser makes the rest of the page inert), answers on its two
// buttons or Escape, and gives focus back to the button that opened it.

import { h } from "../lib/dom.js";

let seq = 0;

/** Resolves true when the person confirms, false otherwise. */
export function askConfirm(opener, c) {
  return new Promise((resolve) => {
    const n = ++seq;
    const titleId = `bh-confirm-${n}-title`;
    const textId = `bh-confirm-${n}-text`;
    let answer = false;
    const deny = h("button", { type: "button", class: "bh-btn", value: "deny", onclick: () => dialog.close() }, c.deny || "Cancel");
    const yes = h("button", { type: "button", class: "bh-btn bh-btn--primary", value: "confirm", onclick: () => { answer = true; dialog.close(); } }, c.confirm || "Confirm");
    const dialog = h("dialog", { class: "bh-confirm", "aria-labelledby": titleId, "aria-describedby": textId },
      h("h2", { class: "bh-confirm-title", id: titleId }, c.title || "Are you sure?"),
      h("p", { class: "bh-confirm-text", id: textId }, c.text),
      h("div", { class: "bh-confirm-buttons" }, deny, yes));
    // Tab and Shift+Tab cycle between the two buttons: focus never leaves
    // the dialog, not even to the browser's own UI.
    dialog.addEventListener("keydown", (ev) => {
      if (ev.key !== "Tab") return;
      ev.preventDefault();
      const root = dialog.getRootNode();
      (root.activeElement === deny ? yes : deny).focus();
    });
    dialog.addEventListener("close", () => {
      dialog.remove();
      if (opener.isConnected) opener.focus();
      resolve(answer);
    });
    // Inside the widget's own tree, so its styles apply.
    (opener.closest("article") || opener.parentElement).append(dialog);
    dialog.showModal();
    deny.focus();
  });
}
