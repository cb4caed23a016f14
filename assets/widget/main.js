// Mounts one widget in a box of its shadow root (see /widget.js). The
// chatbot comes from `data-chatbot` or the page's `?chatbot=`; without one,
// a small form asks for it.

import { h } from "../lib/dom.js";
import { UNAVAILABLE } from "./api.js";
import { Widget } from "./widget.js";

function chooser(box) {
  const input = h("input", { name: "chatbot", placeholder: "cb_…", required: true, pattern: "cb_[0-9A-Za-z]{26}", autocomplete: "off", spellcheck: "false", "aria-label": "Chatbot id" });
  box.replaceChildren(h("form", { class: "bh-chooser", method: "get", action: location.pathname },
    h("label", null, "Which chatbot? ", input),
    h("button", { class: "bh-btn bh-btn--primary", type: "submit" }, "Open the widget"),
    h("p", { class: "bh-hint" }, "Create one with POST /api/v1/chatbots, then paste its id (cb_…).")));
}

/**
 * A conversation the host page started itself (its backend created it):
 * `data-conversation-id` + `data-visitor-token`, or the same in the page's
 * fragment (`#conversation_id=…&visitor_token=…`, never sent to a server).
 */
function seedFromFragment() {
  const hash = new URLSearchParams(location.hash.slice(1));
  const conversation_id = hash.get("conversation_id");
  const visitor_token = hash.get("visitor_token");
  return conversation_id && visitor_token ? { conversation_id, visitor_token } : null;
}

/** opts: {chatbot?, greeting?, seed?}. Never rejects. */
export async function mount(box, opts) {
  const chatbot = opts.chatbot || new URLSearchParams(location.search).get("chatbot");
  if (!chatbot) return chooser(box);
  const w = new Widget(box, chatbot.trim(), { greeting: opts.greeting });
  try {
    await w.start(opts.seed || seedFromFragment());
  } catch {
    w.fail(UNAVAILABLE);
  }
}
