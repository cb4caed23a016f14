// DOM helpers shared by the widget and the dashboard.

/** Creates an element: h("div", {class: "x", onclick: f}, child, "text"). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** "/values/a~1b" → "a/b" (a JSON pointer segment, unescaped). */
export function valueName(pointer) {
  const m = /^\/values\/(.+)$/.exec(pointer || "");
  return m ? m[1].replace(/~1/g, "/").replace(/~0/g, "~") : null;
}
