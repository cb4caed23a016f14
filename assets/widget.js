// blockhook chat widget, for any site. One tag embeds it:
//   <script src="{public_url}/widget.js" data-chatbot="cb_…" async></script>
// shows a launcher button (bottom right) that opens the chat panel; or put
// <div data-blockhook-widget data-chatbot="cb_…"></div> where the chat should
// sit, and load this script. Each widget lives in its own shadow root, so the
// page's styles and the widget's never meet. The modules under
// /assets/widget/ come from the server this script came from; if they cannot
// be loaded, a short notice says so.
//
// This file is all a page loads until the launcher is opened: the panel's
// modules (under content-hashed names the build writes into PANEL_MODULES,
// cached for a year) and its stylesheet are fetched, all at once, on first
// open, or as soon as a pointer or focus comes to the launcher.
(() => {
  "use strict";
  const script = document.currentScript;
  const origin = script && script.src ? new URL(script.src).origin : location.origin;
  const FAIL = "The chat is unavailable right now. Please try again later.";
  const CHAT_ICON = "M4 5h16a2 2 0 0 1 2 2v9a2 2 0 0 1-2 2h-8l-5 4v-4H4a2 2 0 0 1-2-2V7a2 2 0 0 1 2-2z";
  // The panel's modules, filled in by the build (build.rs).
  const PANEL_MODULES = /* panel-modules */ [];
  const CSS = `${origin}/assets/widget.css`;
  const CLOSE_ICON = "M6.4 5 12 10.6 17.6 5 19 6.4 13.4 12 19 17.6 17.6 19 12 13.4 6.4 19 5 17.6 10.6 12 5 6.4z";
  // What must hold even when widget.css cannot be loaded: the shadow host
  // ignores the page's rules, and the launcher and its panel are placed.
  const SHELL = `
:host([data-blockhook-launcher]) { all: initial !important; display: block !important; position: static !important; width: 0 !important; height: 0 !important; }
:host([data-blockhook-widget]) { display: block; }
.bh-root { all: initial; display: block; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #111827; }
.bh-sized { height: 100%; }
.bh-sized > .bh-widget { box-sizing: border-box; height: 100%; min-height: 0; }
.bh-panel:focus { outline: none; }
.bh-launcher {
  position: fixed; right: 20px; bottom: 20px; z-index: 2147483000;
  display: flex; align-items: center; justify-content: center;
  width: 56px; height: 56px; margin: 0; padding: 0; border: 0; border-radius: 50%;
  background: #2563eb; color: #fff; cursor: pointer;
  box-shadow: 0 6px 20px rgba(17, 24, 39, 0.25);
}
.bh-launcher:hover { background: #1d4ed8; }
.bh-launcher:focus-visible { outline: 3px solid #93c5fd; outline-offset: 3px; }
.bh-launcher svg { width: 28px; height: 28px; fill: currentColor; }
.bh-panel {
  position: fixed; right: 20px; bottom: 88px; z-index: 2147483000;
  display: flex; flex-direction: column;
  width: 380px; max-width: calc(100vw - 24px); height: min(620px, calc(100vh - 112px));
}
.bh-panel[hidden] { display: none; }
.bh-panel > * { flex: 1; min-height: 0; }
@media (max-width: 480px) {
  .bh-panel { left: 8px; right: 8px; width: auto; max-width: none; bottom: 80px; height: calc(100vh - 96px); }
  .bh-launcher { right: 12px; bottom: 12px; }
}
.bh-fail {
  flex: 0 0 auto; margin: 0; padding: 14px 16px; background: #fff; color: #374151;
  border: 1px solid #e5e7eb; border-radius: 12px; font-size: 14px;
  box-shadow: 0 10px 30px rgba(17, 24, 39, 0.08);
}`;

  function el(tag, attrs) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  function icon(path) {
    const t = document.createElement("template");
    t.innerHTML = `<svg viewBox="0 0 24 24" aria-hidden="true"><path d="${path}"/></svg>`;
    return t.content.firstChild;
  }

  /** A shadow root on `host` with the widget's styles (the full sheet now,
   * or with `styles()` when the panel opens); returns its box. */
  function shell(host, lazy) {
    const root = host.shadowRoot || host.attachShadow({ mode: "open", serializable: true });
    const box = el("div", { class: "bh-root" });
    root.replaceChildren(box);
    if (!lazy) styles(root);
    // A constructed sheet, not a <style>: a page's Content-Security-Policy
    // without 'unsafe-inline' would refuse the element.
    if ("adoptedStyleSheets" in root && typeof CSSStyleSheet.prototype.replaceSync === "function") {
      const sheet = new CSSStyleSheet();
      sheet.replaceSync(SHELL);
      root.adoptedStyleSheets = [sheet];
    } else {
      const style = el("style");
      style.textContent = SHELL;
      root.prepend(style);
    }
    return box;
  }

  /** The widget's stylesheet, once, in `root`. */
  function styles(root) {
    if (!root.querySelector("link[rel=stylesheet]")) root.prepend(el("link", { rel: "stylesheet", href: CSS }));
  }

  /** Fetches every module of the panel at once (not one import level
   * after another) and its stylesheet; once. */
  let preloaded = false;
  function preload() {
    if (preloaded) return;
    preloaded = true;
    for (const m of PANEL_MODULES) {
      document.head.append(el("link", { rel: "modulepreload", href: origin + m }));
    }
    document.head.append(el("link", { rel: "preload", as: "style", href: CSS }));
  }

  function fail(box) {
    const p = el("p", { class: "bh-fail", role: "status" });
    p.textContent = FAIL;
    box.replaceChildren(p);
  }

  let modules = null;
  const load = () => (modules = modules || import(`${origin}/assets/widget/main.js`));

  function options(data) {
    return {
      chatbot: data.chatbot || null,
      greeting: data.greeting,
      seed: data.conversationId && data.visitorToken
        ? { conversation_id: data.conversationId, visitor_token: data.visitorToken }
        : null,
    };
  }

  /** Mounts the widget in `box`; `then()` runs once its composer is there. */
  function mount(box, opts, then) {
    load()
      .then((m) => {
        const started = m.mount(box, opts);
        if (then) then();
        return started;
      })
      .catch(() => fail(box));
  }

  function inline(host) {
    if (host.shadowRoot) return;
    // A container the page gave a height is filled; one without keeps the
    // widget's own height.
    const sized = host.getBoundingClientRect().height >= 1;
    const box = shell(host);
    box.classList.add("bh-inline");
    if (sized) box.classList.add("bh-sized");
    mount(box, options(host.dataset));
  }

  function launcher(opts) {
    const host = el("div", { "data-blockhook-launcher": "" });
    document.body.append(host);
    const box = shell(host, true);
    box.classList.add("bh-embed");
    const panel = el("div", { class: "bh-panel", id: "bh-panel", role: "dialog", "aria-label": "Chat", tabindex: "-1", hidden: "" });
    const button = el("button", { class: "bh-launcher", type: "button", "aria-controls": "bh-panel" });
    box.append(panel, button);
    let started = false;
    // Focus goes into the panel as it opens: to the message box once it is
    // there, to the panel itself until then.
    const focusInside = () => {
      if (panel.hidden) return;
      const active = host.shadowRoot.activeElement;
      if (active && active !== panel && panel.contains(active)) return;
      const input = panel.querySelector("textarea:not([disabled])");
      (input && input.offsetParent !== null ? input : panel).focus({ preventScroll: true });
    };
    const toggle = (open) => {
      panel.hidden = !open;
      button.setAttribute("aria-expanded", String(open));
      button.setAttribute("aria-label", open ? "Close chat" : "Open chat");
      button.replaceChildren(icon(open ? CLOSE_ICON : CHAT_ICON));
      if (open && !started) {
        started = true;
        preload();
        styles(host.shadowRoot);
        mount(panel, opts, focusInside);
      }
      if (open) focusInside();
    };
    toggle(false);
    button.addEventListener("click", () => toggle(panel.hidden));
    button.addEventListener("pointerenter", preload, { once: true });
    button.addEventListener("focus", preload, { once: true });
    panel.addEventListener("keydown", (e) => {
      if (e.key !== "Escape") return;
      toggle(false);
      button.focus();
    });
  }

  const start = () => {
    document.querySelectorAll("[data-blockhook-widget]").forEach(inline);
    if (script && script.dataset.chatbot) launcher(options(script.dataset));
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
