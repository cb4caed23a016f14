// One delivery: payload, the request headers as sent on each attempt, every
// attempt's outcome, and Redeliver.

import { api, problem } from "./api.js";
import { badge, h, pretty, stamp, when } from "./dom.js";

const SIGNATURE = "v1,<base64 HMAC-SHA256 of \"{webhook-id}.{webhook-timestamp}.{body}\" — needs the signing secret, not shown here>";

/** The headers of attempt `number` at `at` (RFC 3339), as the server sends them. */
export function headersOf(eventId, number, at) {
  const ts = at ? String(Math.floor(new Date(at).getTime() / 1000)) : "<Unix seconds of the attempt>";
  return [
    ["Content-Type", "application/json"],
    ["webhook-id", eventId],
    ["webhook-timestamp", ts],
    ["webhook-signature", SIGNATURE],
    ["X-MyAIChatbot-Attempt", String(number)],
  ];
}

function headerBlock(rows) {
  return h("pre", { class: "code headers" }, rows.map(([k, v]) => [h("span", { class: "hk" }, `${k}: `), `${v}\n`]));
}

function attemptCard(e, a, open) {
  const ok = a.status_code >= 200 && a.status_code < 300;
  return h("div", { class: `attempt ${ok ? "ok" : "bad"}` },
    h("div", { class: "attempt-head" },
      h("strong", null, `#${a.number}`),
      when(a.at),
      h("span", { class: `code-chip ${ok ? "ok" : "bad"}` }, a.status_code === null ? "no answer" : a.status_code),
      h("span", { class: "muted" }, `${a.duration_ms} ms`)),
    a.error ? h("p", { class: "attempt-error" }, a.error) : null,
    a.response_excerpt ? h("details", null, h("summary", null, "Response excerpt"), h("pre", { class: "code" }, a.response_excerpt)) : null,
    h("details", { open }, h("summary", null, "Request headers"), headerBlock(headersOf(e.event_id, a.number, a.at))));
}

export class Detail {
  constructor(el, onChange) {
    this.el = el;
    this.onChange = onChange;
    this.id = null;
  }

  async show(id) {
    this.id = id;
    const r = await api("GET", `/api/v1/events/${encodeURIComponent(id)}`);
    if (this.id !== id) return;
    if (!r.ok) {
      this.el.replaceChildren(h("p", { class: "error" }, problem(r)));
      return;
    }
    this.render(r.body);
  }

  /** Reloads the shown delivery, if any. */
  refresh() {
    return this.id ? this.show(this.id) : null;
  }

  render(e) {
    const note = h("p", { class: "note", role: "status" });
    const redeliver = h("button", { type: "button", class: "btn btn-primary", onclick: () => this.redeliver(e.event_id, redeliver, note) }, "Redeliver");
    const attempts = [...(e.attempts || [])].sort((a, b) => b.number - a.number);
    this.el.replaceChildren(
      h("div", { class: "detail-head" },
        h("div", null, h("h3", { class: "mono" }, e.event_id), h("p", { class: "muted" }, e.type, " · created ", stamp(e.created_at))),
        h("div", { class: "detail-actions" }, badge(e.status), redeliver)),
      note,
      h("h4", null, "Payload"),
      h("pre", { class: "code payload" }, pretty(e.payload)),
      h("h4", null, `Attempts (${attempts.length})`),
      ...(attempts.length
        ? attempts.map((a, i) => attemptCard(e, a, i === 0))
        : [h("p", { class: "muted" }, "Not attempted yet. It will be sent with these headers:"), headerBlock(headersOf(e.event_id, 1, null))]),
    );
  }

  async redeliver(id, button, note) {
    button.disabled = true;
    const r = await api("POST", `/api/v1/events/${encodeURIComponent(id)}/redeliver`);
    button.disabled = false;
    note.className = r.ok ? "note ok" : "note error";
    note.textContent = r.ok ? "Queued: new attempts will follow with the same event id." : problem(r);
    if (r.ok) {
      this.onChange();
      setTimeout(() => this.id === id && this.show(id), 1500);
    }
  }
}
