// One conversation as it happened: the visitor's and the bot's messages in
// order, each block drawn with its state (pending, answered with the
// answer, expired, cancelled, closed by a takeover), attachments as links.

import { api, authorizedFetch, problem } from "./api.js";
import { h, stamp, when } from "./dom.js";

/** A block's state in words: {kind, text}. */
export function blockState(block) {
  const s = block.state || {};
  if (!s.disabled) return { kind: "pending", text: "pending — waiting for an answer" };
  switch (s.reason) {
    case "used": {
      const who = s.answered_by === "member" ? "a member" : "the visitor";
      return { kind: "answered", text: `answered by ${who}${answerOf(block) ? `: ${answerOf(block)}` : ""}` };
    }
    case "expired":
    case "storage_window":
      return { kind: "expired", text: "expired — no answer in time" };
    case "withdrawn":
      return { kind: "cancelled", text: "cancelled — the ask was withdrawn" };
    case "takeover":
      return { kind: "closed", text: "closed — a member took over" };
    default:
      return { kind: "closed", text: `closed (${s.reason || "disabled"})` };
  }
}

/** The answer given to an actions or form block, in words. */
function answerOf(block) {
  const s = block.state || {};
  if (s.chosen_action_id) {
    const b = (block.elements || []).find((e) => e.action_id === s.chosen_action_id);
    return b ? `“${b.label}”` : s.chosen_action_id;
  }
  if (s.values) return Object.entries(s.values).map(([k, v]) => `${k} = ${typeof v === "string" ? v : JSON.stringify(v)}`).join(", ");
  return "";
}

function blockView(block) {
  const st = blockState(block);
  const chosen = (block.state || {}).chosen_action_id;
  let body = null;
  if (block.type === "actions") {
    body = h("ul", { class: "t-buttons" }, (block.elements || []).map((b) =>
      h("li", { class: `t-button${b.action_id === chosen ? " chosen" : ""}` }, b.label, b.action_id === chosen ? h("span", { class: "sr-only" }, " (chosen)") : null)));
  } else if (block.type === "form") {
    const values = (block.state || {}).values || {};
    body = h("dl", { class: "t-form" }, (block.fields || []).map((f) => [
      h("dt", null, f.label || f.name),
      h("dd", null, f.name in values ? String(typeof values[f.name] === "string" ? values[f.name] : JSON.stringify(values[f.name])) : h("span", { class: "muted" }, "—")),
    ]));
  } else if (block.text) {
    body = h("p", null, typeof block.text === "string" ? block.text : block.text.text || "");
  }
  return h("div", { class: `t-block is-${st.kind}`, dataset: { state: st.kind } },
    h("div", { class: "t-block-head" }, h("span", { class: "mono small" }, block.type), h("span", { class: `t-state ${st.kind}` }, st.text)),
    body);
}

/** Downloads an attachment with the signed-in credential (a plain link carries none). */
async function download(a, ev) {
  ev.preventDefault();
  const r = await authorizedFetch(a.url);
  if (!r || !r.ok) return;
  const url = URL.createObjectURL(await r.blob());
  const link = h("a", { href: url, download: a.filename });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

function messageView(m) {
  const who = m.author.kind === "bot" ? "Bot" : `${m.author.display_name || m.author.kind}${m.author.kind === "member" ? " (member)" : ""}`;
  return h("li", { class: `t-msg from-${m.author.kind}`, dataset: { messageId: m.id } },
    h("div", { class: "t-msg-head" }, h("strong", null, who), " ", when(m.created_at)),
    m.text ? h("p", { class: "t-text" }, m.text) : null,
    ...(m.blocks || []).map(blockView),
    m.attachments && m.attachments.length
      ? h("ul", { class: "t-files" }, m.attachments.map((a) => h("li", null,
        h("a", { href: a.url, onclick: (ev) => download(a, ev) }, a.filename), h("span", { class: "muted small" }, ` ${a.content_type}, ${a.size} bytes`))))
      : null);
}

/** Every message of a conversation, oldest first (at most `max`). */
async function messages(id, max = 500) {
  const out = [];
  let cursor = null;
  do {
    const q = new URLSearchParams({ limit: "100" });
    if (cursor) q.set("cursor", cursor);
    const r = await api("GET", `/api/v1/conversations/${encodeURIComponent(id)}/messages?${q}`);
    if (!r.ok) return { error: problem(r) };
    out.push(...r.body.data);
    cursor = r.body.page.has_more ? r.body.page.next_cursor : null;
  } while (cursor && out.length < max);
  return { data: out.reverse(), cut: !!cursor };
}

/** Renders conversation `c` (a list item) into `el`. */
export async function showTranscript(el, c) {
  el.replaceChildren(h("p", { class: "muted" }, "Loading the conversation…"));
  const r = await messages(c.id);
  if (r.error) {
    el.replaceChildren(h("p", { class: "error" }, r.error));
    return;
  }
  el.replaceChildren(
    h("div", { class: "detail-head" },
      h("div", { class: "detail-title" },
        h("h3", null, c.visitor.display_name),
        h("p", { class: "muted small mono" }, c.id, " · ", c.visitor.id),
        h("p", { class: "muted small" }, "started ", stamp(c.created_at), ` · ${r.data.length} messages`))),
    r.cut ? h("p", { class: "note" }, "Only the newest 500 messages are shown.") : null,
    r.data.length
      ? h("ol", { class: "transcript", "aria-label": `Messages with ${c.visitor.display_name}` }, r.data.map(messageView))
      : h("p", { class: "muted" }, "No message yet."));
}
