// The portal's calls: its session is a bearer kept in this module's memory
// only (no cookie: a frame on another site would lose a third-party one).

let session = null;

export function useSession(s) {
  session = s;
}

/** One request; resolves to {status, ok, body}, never throws. */
export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (session) headers.Authorization = `Bearer ${session}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res;
  try {
    res = await fetch(path, { method, headers, cache: "no-store", body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    return { status: 0, ok: false, body: { detail: "The server cannot be reached." } };
  }
  let json = {};
  try {
    json = await res.json();
  } catch {
    json = {};
  }
  return { status: res.status, ok: res.ok, body: json || {} };
}

/** Words for a problem+json answer. */
export function problem(r) {
  const p = r.body || {};
  const first = p.errors && p.errors[0];
  if (first) return `${first.field}: ${first.message}`;
  return p.detail || p.title || p.code || `The server answered ${r.status}.`;
}

/** "3 s ago", "in 2 min", never a time in the past for what is still to come. */
export function when(iso, future) {
  const t = Date.parse(iso);
  if (isNaN(t)) return "";
  let s = Math.round((t - Date.now()) / 1000);
  if (future && s <= 0) return "any moment now";
  const ago = s < 0;
  s = Math.abs(s);
  const text = s < 60 ? `${s} s` : s < 3600 ? `${Math.round(s / 60)} min` : s < 86400 ? `${Math.round(s / 3600)} h` : `${Math.round(s / 86400)} d`;
  return ago ? `${text} ago` : `in ${text}`;
}
