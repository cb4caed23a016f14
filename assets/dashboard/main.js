// The reviewers' dashboard: sign in with a chatbot API key (or the admin
// token and a chatbot switcher), then endpoint health, pending
// interactions and deliveries, kept live.

import { actingHeaders, api, session, whenUnauthorized } from "./api.js";
import { resolve, showChatbot } from "./account.js";
import { Bulk } from "./bulk.js";
import { Conversations } from "./conversations.js";
import { Deliveries } from "./deliveries.js";
import { Detail } from "./detail.js";
import { Health } from "./health.js";
import { Inbox } from "./inbox.js";
import { EndpointsView } from "../lib/endpoints.js";
import { openStream } from "../lib/sse.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 5000;
const HEALTH_MS = 15000;

let stopStream = null;
let timers = [];

function stop() {
  if (stopStream) stopStream();
  stopStream = null;
  timers.forEach(clearInterval);
  timers = [];
}

function showLogin(message) {
  stop();
  $("app").hidden = true;
  $("no-bots").hidden = true;
  $("session").hidden = true;
  $("bot-info").hidden = true;
  detail.hint();
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
  {
    body: $("deliveries"), more: $("deliveries-more"), status: $("status-filter"), type: $("type-filter"),
    search: $("event-search"), endpoint: $("endpoint-filter"), error: $("deliveries-error"), detail: $("detail"), home: $("detail-home"),
  },
  (id) => detail.show(id),
);
const changed = debounce(() => {
  deliveries.refresh();
  detail.refresh();
  health.load();
}, 400);
const health = new Health(
  { stats: $("health"), warning: $("health-warning"), note: $("health-note"), chart: $("latency-chart"), test: $("send-test"), testResult: $("test-result") },
  changed,
);
const endpoints = new EndpointsView($("endpoints"), {
  api: (method, path, body) => api(method, path, body === undefined ? {} : { body }),
  cls: { button: "btn", primary: "btn btn-primary", danger: "btn btn-danger" },
  onChange: changed,
  onList: (list) => {
    deliveries.useEndpoints(list);
    detail.useEndpoints(list);
  },
});
const conversations = new Conversations({ list: $("conversations"), more: $("conv-more"), search: $("conv-search"), error: $("conv-error"), transcript: $("transcript") });
$("conv-filters").addEventListener("submit", (e) => {
  e.preventDefault();
  conversations.load(true);
});
const inbox = new Inbox({ list: $("inbox"), count: $("inbox-count"), error: $("inbox-error") }, changed);
new Bulk({ open: $("redeliver-all"), panel: $("bulk-confirm"), result: $("bulk-result") }, changed);

$("deliveries-refresh").onclick = () => deliveries.load(true);
$("inbox-refresh").onclick = () => inbox.load();
$("filters").addEventListener("submit", (e) => {
  e.preventDefault();
  deliveries.load(true);
});

async function open() {
  stop();
  const who = await resolve();
  if (who.error) {
    session.clear();
    return showLogin(who.error);
  }
  $("login").hidden = true;
  $("session").hidden = false;
  showChatbot(
    { info: $("bot-info"), name: $("bot-name"), url: $("bot-url"), switch: $("bot-switch"), switchLabel: $("bot-switch-label") },
    who,
    () => {
      deliveries.selected = null;
      detail.hint();
      $("test-result").textContent = "";
      $("bulk-result").textContent = "";
      open();
    },
  );
  if (!who.bot) {
    $("app").hidden = true;
    $("no-bots").hidden = false;
    return;
  }
  $("no-bots").hidden = true;
  $("app").hidden = false;

  await Promise.all([endpoints.load().then(() => deliveries.load(true)), inbox.load(), health.load(), conversations.load(true)]);

  stopStream = openStream("/api/v1/stream", {
    token: session.get(),
    headers: actingHeaders(),
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
  session.clear();
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
