// blockhook chat widget. Put `<div data-blockhook-widget data-chatbot="cb_…">`
// on a page and load this script: it adds the widget's stylesheet and mounts
// the widget (modules under /assets/widget/, from the server it came from).
(() => {
  "use strict";
  const script = document.currentScript;
  const origin = script && script.src ? new URL(script.src).origin : location.origin;
  const css = `${origin}/assets/widget.css`;
  if (![...document.querySelectorAll("link[rel=stylesheet]")].some((l) => l.href === css)) {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = css;
    document.head.append(link);
  }
  const start = () => import(`${origin}/assets/widget/main.js`).then((m) => m.mountAll());
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
