// The reviewers' dashboard: sign in with a chatbot API key, then deliveries,
// pending interactions and endpoint health, kept live.

import { api, problem, session, whenUnauthorized } from "./api.js";
import { Deliveries } from "./deliveries.js";
import { Detail } from "./detail.js";
import { Health } from "./health.js";
import { Inbox } from "./inbox.js";
import { openStream } from "../lib/sse.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 5000;
const HEALTH_MS = 15000;

let stopStream = null;
let timers = [];

function showLogin(message) {
  if (stopStream) stopStream();
  timers.forEach(clearInterval);
  timers = [];
  $("app").hidden = true;
  $("session").hidden = true;
  $("bot-name").textContent = "";
  detail.id = null;
  $("detail").replaceChildren();
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("api-key").focus();
}

function debounce(f, ms) {
  let t = null;
  return () => {
    clearTimeout(t);
    t = setTimeout(f, ms);
  };
}

const detail = new Detail($("detail"), () => deliveries.load(true));
const deliveries = new Deliveries(
  { body: $("deliveries"), more: $("deliveries-more"), filter: $("status-filter"), error: $("deliveries-error") },
  (id) => detail.show(id),
);
const health = new Health(
  { stats: $("health"), warning: $("health-warning"), note: $("health-note") },
  (id) => ($("bot-name").textContent = id),
);
const changed = debounce(() => {
  deliveries.refresh();
  detail.refresh();
  health.load();
}, 400);
const inbox = new Inbox({ list: $("inbox"), count: $("inbox-count"), error: $("inbox-error") }, changed);

$("deliveries-refresh").onclick = () => deliveries.load(true);
$("inbox-refresh").onclick = () => inbox.load();

async function open() {
  const check = await api("GET", "/api/v1/events?limit=1");
  if (!check.ok) {
    session.clear();
    return showLogin(check.status === 401 ? "This key is not valid." : problem(check));
  }
  $("login").hidden = true;
  $("app").hidden = false;
  $("session").hidden = false;

  await Promise.all([deliveries.load(true), inbox.load(), health.load()]);

  stopStream = openStream("/api/v1/stream", {
    token: session.get(),
    onEvent: (f) => {
      try {
        inbox.onEvent(f.event, JSON.parse(f.data));
      } catch {
        return;
      }
      changed();
    },
    onState: (live) => {
      $("live").classList.toggle("is-live", live);
      $("live").title = live ? "Live" : "Reconnecting…";
    },
    onFatal: () => showLogin("The key was refused."),
  });
  timers.push(setInterval(() => {
    if ($("auto-refresh").checked && !document.hidden) {
      deliveries.refresh();
      detail.refresh();
    }
  }, POLL_MS));
  timers.push(setInterval(() => !document.hidden && health.load(), HEALTH_MS));
}

whenUnauthorized(() => {
  session.clear();
  showLogin("The key was refused.");
});

$("login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const key = $("api-key").value.trim();
  if (!key) return;
  session.set(key);
  $("api-key").value = "";
  open();
});

$("sign-out").addEventListener("click", () => {
  session.clear();
  showLogin("");
});

if (session.get()) open();
else showLogin("");
