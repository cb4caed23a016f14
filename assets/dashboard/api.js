// The chatbot API, authenticated with the key kept in session storage.

const KEY = "blockhook.dashboard.api_key";

export const session = {
  get: () => sessionStorage.getItem(KEY),
  set: (k) => sessionStorage.setItem(KEY, k),
  clear: () => sessionStorage.removeItem(KEY),
};

/** Called when the server refuses the key. */
let onUnauthorized = () => {};
export function whenUnauthorized(f) {
  onUnauthorized = f;
}

/** One request; resolves to {status, ok, body} and never throws on HTTP errors. */
export async function api(method, path, { body, headers } = {}) {
  const h = { Accept: "application/json", Authorization: `Bearer ${session.get()}`, ...(headers || {}) };
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
  if (res.status === 401) onUnauthorized();
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
