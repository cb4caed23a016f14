// Who is signed in: a chatbot API key (its own chatbot, read from
// GET /api/v1/chatbot) or the admin token (every chatbot, from
// GET /api/v1/chatbots, one chosen in the switcher).

import { api, problem, session } from "./api.js";
import { h } from "./dom.js";

/**
 * Resolves the stored credential: {kind: "bot", bot} or {kind: "admin",
 * bots, bot} (bot null when there is none), or {error}.
 */
export async function resolve() {
  if (!session.chatbot()) {
    const own = await api("GET", "/api/v1/chatbot", { quiet: true });
    if (own.ok) return { kind: "bot", bot: own.body };
    if (own.status !== 401) return { error: problem(own) };
  }
  const list = await api("GET", "/api/v1/chatbots?limit=100", { quiet: true });
  if (list.status === 401) return { error: "This key or token is not valid." };
  if (!list.ok) return { error: problem(list) };
  const bots = list.body.data || [];
  const chosen = bots.find((b) => b.id === session.chatbot()) || bots[0] || null;
  session.setChatbot(chosen ? chosen.id : null);
  return { kind: "admin", bots, bot: chosen };
}

/** Shows the chatbot's name and endpoint in the header; the switcher for the admin. */
export function showChatbot(els, who, onSwitch) {
  els.info.hidden = !who.bot;
  els.name.textContent = who.bot ? who.bot.name : "";
  els.url.textContent = who.bot ? who.bot.webhook_url : "";
  els.url.title = who.bot ? `Endpoint: ${who.bot.webhook_url}${who.bot.endpoint_disabled ? " (disabled after 410 Gone)" : ""}` : "";
  els.url.classList.toggle("is-off", !!(who.bot && who.bot.endpoint_disabled));
  const admin = who.kind === "admin";
  els.switchLabel.hidden = !admin;
  els.name.hidden = admin;
  if (!admin) return;
  els.switch.replaceChildren(...who.bots.map((b) => h("option", { value: b.id, selected: who.bot && b.id === who.bot.id }, `${b.name} (${b.id.slice(-6)})`)));
  els.switch.onchange = () => {
    session.setChatbot(els.switch.value);
    onSwitch();
  };
}
