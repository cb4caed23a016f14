// The widget API of the server this module came from.

export const ORIGIN = new URL(import.meta.url).origin;

/** One request; resolves to {status, ok, body} (body {} when not JSON). */
export async function call(method, path, token, body) {
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res;
  try {
    res = await fetch(ORIGIN + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (e) {
    return { status: 0, ok: false, body: {} };
  }
  let json = null;
  try {
    json = await res.json();
  } catch {
    json = null;
  }
  return { status: res.status, ok: res.ok, body: json || {} };
}

/** What a visitor reads when the server cannot be reached (or refuses this site). */
export const UNAVAILABLE = "The chat is unavailable right now. Please try again later.";

export const REASONS = {
  expired: "This has expired.",
  takeover: "A team member has taken over this conversation.",
  storage_window: "This conversation is past its storage window.",
  replaced: "This was replaced by a newer reply.",
  withdrawn: "This question was withdrawn.",
};

/** Words for a visitor from a problem+json answer. */
export function problem(r) {
  const p = r.body || {};
  if (p.code === "interaction_closed") {
    const reason = Object.keys(REASONS).find((k) => (p.detail || "").includes(k));
    return reason ? REASONS[reason] : p.detail || "This is closed.";
  }
  if (p.code === "block_disabled") return "This was already answered.";
  if (r.status === 0) return "The chat server could not be reached. Please try again.";
  if (!p.code) return `Something went wrong (${r.status}). Please try again.`;
  return p.detail || p.title || p.code;
}
