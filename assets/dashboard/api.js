// The API, authenticated with the credential kept in session storage: a
// chatbot API key, or the admin token acting for the chatbot chosen in the
// switcher (`Blockhook-Chatbot` header).

const KEY = "blockhook.dashboard.api_key";
const BOT = "blockhook.dashboard.chatbot";

export const session = {
  get: () => sessionStorage.getItem(KEY),
  set: (k) => sessionStorage.setItem(KEY, k),
  /** The chatbot the admin token acts for (null with a chatbot key). */
  chatbot: () => sessionStorage.getItem(BOT),
  setChatbot: (id) => (id ? sessionStorage.setItem(BOT, id) : sessionStorage.removeItem(BOT)),
  clear: () => {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(BOT);
  },
};

/** The headers that say who is asking (without Authorization). */
export function actingHeaders() {
  const id = session.chatbot();
  return id ? { "Blockhook-Chatbot": id } : {};
}

/** Called when the server refuses the key. */
let onUnauthorized = () => {};
export function whenUnauthorized(f) {
  onUnauthorized = f;
}

/** One request; resolves to {status, ok, body} and never throws on HTTP errors. */
export async function api(method, path, { body, headers, quiet } = {}) {
  const h = { Accept: "application/json", ...actingHeaders(), Authorization: `Bearer ${session.get()}`, ...(headers || {}) };
  if (body !== undefined) h["Content-Type"] = "application/json";
  let res;
  try {
    res = await fetch(path, { method, headers: h, cache: "no-store", body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    return { status: 0, ok: false, body: { detail: `The server cannot be reached (${e.message}).` } };
  }
  let json = {};
  try {
    json = await res.json();
  } catch {
    json = {};
  }
  if (res.status === 401 && !quiet) onUnauthorized();
  return { status: res.status, ok: res.ok, body: json || {} };
}

/** Words for a problem+json answer. */
export function problem(r) {
  const p = r.body || {};
  return p.detail || p.title || p.code || `The server answered ${r.status}.`;
}

/** A fresh Idempotency-Key (works outside secure contexts too). */
export function idempotencyKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

/** A GET with the signed-in credential, as a plain Response (null when unreachable). */
export async function authorizedFetch(path) {
  try {
    return await fetch(path, { headers: { ...actingHeaders(), Authorization: `Bearer ${session.get()}` }, cache: "no-store" });
  } catch {
    return null;
  }
}

/**
 * Sends event `id` now, whatever the endpoint's circuit breaker says
 * (POST /api/v1/events/{id}/send-now); resolves to {ok, text, sent} for
 * the page: the status code or error and the latency.
 */
export async function sendNow(id) {
  const r = await api("POST", `/api/v1/events/${encodeURIComponent(id)}/send-now`);
  if (!r.ok) return { ok: false, text: problem(r) };
  const a = r.body.attempt;
  if (!a) return { ok: false, pending: true, text: "Not sent yet: it waits behind an earlier event of its conversation, or the endpoint is disabled. It goes out with the queue." };
  return { ...attemptResult(a), sent: r.body.sent };
}

/** One attempt as the page shows it: {ok, attempt, text}. */
export function attemptResult(a) {
  const good = a.status_code >= 200 && a.status_code < 300;
  const answer = a.status_code === null ? (a.error || "no answer") : `${a.status_code}${good ? "" : ` (${a.error || "not accepted"})`}`;
  return { ok: good, attempt: a, text: `${good ? "Accepted" : "Failed"}: ${answer} in ${a.duration_ms} ms (attempt #${a.number})` };
}
