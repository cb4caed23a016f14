// "Redeliver all failed/dead": counts what would go out, asks to confirm,
// then queues one redelivery per event (POST /api/v1/events/redeliver).

import { api, problem } from "./api.js";
import { h } from "./dom.js";

/** How many events of `status` (at most 100 counted; "100+" beyond). */
async function count(status) {
  const r = await api("GET", `/api/v1/events?status=${status}&limit=100`);
  if (!r.ok) return { error: problem(r) };
  const n = r.body.data.length;
  return { n, label: r.body.page.has_more ? `${n}+` : String(n) };
}

export class Bulk {
  /** els: {open, panel, result}; onDone() after a redelivery was queued. */
  constructor(els, onDone) {
    this.els = els;
    this.onDone = onDone;
    els.open.addEventListener("click", () => this.ask());
  }

  close() {
    this.els.panel.hidden = true;
    this.els.panel.replaceChildren();
  }

  async ask() {
    const { panel, result } = this.els;
    result.textContent = "";
    panel.hidden = false;
    panel.replaceChildren(h("p", { class: "muted" }, "Counting failed and dead deliveries…"));
    const [dead, failed] = await Promise.all([count("dead"), count("failed")]);
    const err = dead.error || failed.error;
    if (err) {
      panel.replaceChildren(h("p", { class: "error" }, err));
      return;
    }
    const cancel = h("button", { type: "button", class: "btn", onclick: () => this.close() }, "Cancel");
    if (!dead.n && !failed.n) {
      panel.replaceChildren(h("p", null, "Nothing to redeliver: no delivery is failed or dead."), cancel);
      return;
    }
    const choice = (status, c) => c.n
      ? h("button", { type: "button", class: "btn btn-primary", dataset: { status }, onclick: () => this.run(status) }, `Redeliver ${c.label} ${status}`)
      : null;
    panel.replaceChildren(
      h("p", null, `Redeliver every ${dead.n ? `dead (${dead.label})` : ""}${dead.n && failed.n ? " or " : ""}${failed.n ? `failed (${failed.label})` : ""} delivery now? Each is queued once more under its own event id, and failed ones keep their own retries too. While the endpoint's circuit is open, they wait for it to close.`),
      h("div", { class: "confirm-actions" }, choice("dead", dead), choice("failed", failed), cancel));
  }

  async run(status) {
    const { result } = this.els;
    this.els.panel.querySelectorAll("button").forEach((b) => (b.disabled = true));
    const r = await api("POST", "/api/v1/events/redeliver", { body: { status } });
    this.close();
    result.className = r.ok ? "note ok bulk-done" : "note error";
    result.textContent = r.ok
      ? `Queued ${r.body.count} ${status} ${r.body.count === 1 ? "delivery" : "deliveries"} for redelivery.`
      : problem(r);
    if (r.ok) this.onDone();
  }
}
