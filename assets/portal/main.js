// The customer portal: `/portal#<token>` moves on to its chatbot's own
// address (`/portal/cb_…#<token>`, framed only from that chatbot's allowed
// origins), which exchanges the token for a session held in memory and
// shows the chatbot's endpoints and events. An expired or altered link
// shows why, and no data.

import { api, useSession } from "./api.js";
import { EndpointsView } from "../lib/endpoints.js";
import { Events } from "./events.js";

const $ = (id) => document.getElementById(id);

function say(text, error) {
  const m = $("message");
  m.textContent = text;
  m.classList.toggle("is-error", Boolean(error));
  m.setAttribute("role", error ? "alert" : "status");
  m.hidden = false;
  $("app").hidden = true;
}

/** The chatbot a link's token names (read, not trusted: the server checks). */
function chatbotOf(token) {
  try {
    const body = token.slice(3).split(".")[0].replace(/-/g, "+").replace(/_/g, "/");
    const id = atob(body).split("|")[0];
    return /^cb_[0-9A-Za-z]{26}$/.test(id) ? id : null;
  } catch {
    return null;
  }
}

const INVALID = "This portal link is not valid. Check that it was copied whole, or ask for a new one.";

async function start() {
  const token = decodeURIComponent(location.hash.slice(1));
  const path = location.pathname.replace(/\/+$/, "");
  if (!token.startsWith("pl_")) return say("Open this page with the portal link you were given (it ends with #pl_…).", true);
  const chatbot = chatbotOf(token);
  if (!chatbot) return say(INVALID, true);
  if (path === "/portal") {
    location.replace(`/portal/${chatbot}${location.hash}`);
    return;
  }
  if (path !== `/portal/${chatbot}`) return say(INVALID, true);
  const r = await api("POST", "/api/v1/portal-sessions", { token, chatbot_id: chatbot });
  if (r.status === 410) return say("This portal link has expired. Ask for a new link.", true);
  if (r.status === 0) return say("The server cannot be reached. Try again in a moment.", true);
  if (!r.ok) return say(INVALID, true);
  useSession(r.body.session);
  const readOnly = Boolean(r.body.read_only);
  document.title = `${r.body.chatbot.name} — webhook portal`;
  $("title").textContent = `${r.body.chatbot.name} — webhooks`;
  $("mode").hidden = !readOnly;
  $("expires").textContent = `Link valid until ${new Date(r.body.expires_at).toLocaleString()}`;
  $("message").hidden = true;
  $("app").hidden = false;
  const onExpired = () => say("This portal session has ended. Open a new portal link.", true);
  const events = new Events($("events"), $("bulk"), { status: $("status-filter"), endpoint: $("endpoint-filter") }, { readOnly, onExpired });
  const endpoints = new EndpointsView($("endpoints"), {
    api,
    cls: { button: "", primary: "primary", danger: "danger" },
    readOnly,
    onExpired,
    onChange: () => events.load(),
    onList: (list) => events.useEndpoints(list),
  });
  await endpoints.load();
  await events.load();
}

start();
