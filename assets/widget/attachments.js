// A question's attachments: one file link each, with name and size. The file
// is served only with the visitor token in the Authorization header (never in
// a URL), so the widget fetches it and links the bytes as a blob: URL that
// downloads under the file's name.

import { h } from "../lib/dom.js";
import { ORIGIN } from "./api.js";

/** "512 B", "3.0 KB", "1.2 MB" (1 KB = 1024 bytes). */
export function size(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

// Attachment id → a promise of its blob: URL, fetched once per page (a
// message is rendered again on every update).
const files = new Map();

function load(a, token) {
  if (!files.has(a.id)) {
    files.set(a.id, (async () => {
      const res = await fetch(`${ORIGIN}/widget/v1/attachments/${encodeURIComponent(a.id)}`, {
        headers: { Authorization: `Bearer ${token}` },
        cache: "no-store",
      });
      if (!res.ok) throw new Error(String(res.status));
      return URL.createObjectURL(await res.blob());
    })());
    files.get(a.id).catch(() => files.delete(a.id));
  }
  return files.get(a.id);
}

async function fetchFile(a, token, link, err) {
  try {
    link.href = await load(a, token);
    link.setAttribute("download", a.filename);
    link.dataset.ready = "true";
  } catch (e) {
    err.textContent = "This file could not be loaded.";
  }
}

/** The links of `m.attachments` (null when it has none). */
export function renderAttachments(m, token) {
  const list = m.attachments || [];
  if (!list.length) return null;
  return h("ul", { class: "bh-block bh-files" }, list.map((a) => {
    const err = h("span", { class: "bh-error", role: "alert" });
    const link = h("a", {
      class: "bh-file",
      href: "#",
      title: `Download ${a.filename}`,
      dataset: { attachmentId: a.id },
      onclick: (e) => {
        if (link.dataset.ready !== "true") e.preventDefault();
      },
    },
      h("span", { class: "bh-file-name" }, a.filename),
      " ",
      h("span", { class: "bh-file-size" }, `(${size(a.size)})`));
    fetchFile(a, token, link, err);
    return h("li", {}, link, err);
  }));
}
