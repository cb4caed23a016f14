// Mounts the widget on every element with `data-blockhook-widget`. The
// chatbot comes from `data-chatbot` or the page's `?chatbot=`; without one,
// a small form asks for it.

import { h } from "../lib/dom.js";
import { Widget } from "./widget.js";

function chooser(root) {
  const input = h("input", { name: "chatbot", placeholder: "cb_…", required: true, pattern: "cb_[0-9A-Za-z]{26}", autocomplete: "off", spellcheck: "false", "aria-label": "Chatbot id" });
  root.replaceChildren(h("form", { class: "bh-chooser", method: "get" },
    h("label", null, "Which chatbot? ", input),
    h("button", { class: "bh-btn bh-btn--primary", type: "submit" }, "Open the widget"),
    h("p", { class: "bh-hint" }, "Create one with POST /api/v1/chatbots, then paste its id (cb_…).")));
}

/**
 * A conversation the host page started itself (its backend created it):
 * `data-conversation-id` + `data-visitor-token`, or the same in the page's
 * fragment (`#conversation_id=…&visitor_token=…`, never sent to a server).
 */
function seedOf(root) {
  const hash = new URLSearchParams(location.hash.slice(1));
  const conversation_id = root.dataset.conversationId || hash.get("conversation_id");
  const visitor_token = root.dataset.visitorToken || hash.get("visitor_token");
  return conversation_id && visitor_token ? { conversation_id, visitor_token } : null;
}

function mount(root) {
  const chatbot = root.dataset.chatbot || new URLSearchParams(location.search).get("chatbot");
  if (!chatbot) return chooser(root);
  const w = new Widget(root, chatbot.trim());
  w.start(seedOf(root)).catch((e) => w.say(`The widget could not start: ${e.message}`));
}

export function mountAll() {
  document.querySelectorAll("[data-blockhook-widget]").forEach(mount);
}
