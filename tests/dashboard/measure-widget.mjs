// Measures how the widget loads on a customer's page, in headless Chromium
// (playwright-core, the system's /usr/bin/chromium): the host page comes
// from a second origin served here, the widget from a running blockhook.
//
//   node tests/dashboard/measure-widget.mjs <blockhook-url> <chatbot-id> [rtt-ms] [runs]
//
// For a cold visit and a repeat visit (warm cache) it prints, as JSON: the
// requests and bytes on the wire before the launcher shows, the time to
// the launcher, and after a click on it the requests (preflights included)
// and the time until the panel shows the conversation live. Every request
// is delayed by `rtt-ms` (default 100) with Chromium's network emulation,
// so times are in round trips of that size rather than loopback noise.
// This is a benchmark, not a test: docs/notes/widget-loading.md holds its
// figures.

import { createServer } from "node:http";
import { chromium } from "playwright-core";

const [base, chatbot, rttArg, runsArg] = process.argv.slice(2);
if (!base || !chatbot) {
  process.stderr.write("usage: measure-widget.mjs <blockhook-url> <chatbot-id> [rtt-ms] [runs]\n");
  process.exit(64);
}
const RTT = Number(rttArg || 100);
const RUNS = Number(runsArg || 3);

const host = createServer((req, res) => {
  res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
  res.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Shop</title></head>
<body><h1>Shop</h1><p>Products.</p>
<script src="${base}/widget.js" data-chatbot="${chatbot}" async></script></body></html>`);
});
await new Promise((r) => host.listen(0, "127.0.0.1", r));
const hostUrl = `http://localhost:${host.address().port}/`;

const LAUNCHER = "document.querySelector('[data-blockhook-launcher]')?.shadowRoot?.querySelector('.bh-launcher')";
const LIVE = "document.querySelector('[data-blockhook-launcher]')?.shadowRoot?.querySelector('.bh-live.is-live')";

/** One visit in `context`: what crossed the wire until the launcher, then until live. */
async function visit(context) {
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.emulateNetworkConditions", {
    offline: false, latency: RTT, downloadThroughput: -1, uploadThroughput: -1,
  });
  const reqs = new Map();
  cdp.on("Network.requestWillBeSent", (e) => {
    reqs.set(e.requestId, { url: e.request.url, method: e.request.method, at: performance.now(), bytes: 0, type: e.type });
  });
  cdp.on("Network.responseReceived", (e) => {
    const r = reqs.get(e.requestId);
    if (r) {
      r.status = e.response.status;
      r.fromCache = e.response.fromDiskCache || e.response.fromMemoryCache || false;
    }
  });
  cdp.on("Network.loadingFinished", (e) => {
    const r = reqs.get(e.requestId);
    if (r) r.bytes = e.encodedDataLength;
  });
  const preflights = [];
  cdp.on("Network.requestWillBeSentExtraInfo", () => {});
  page.on("request", (r) => {
    if (r.method() === "OPTIONS") preflights.push(r.url());
  });

  const t0 = performance.now();
  await page.goto(hostUrl);
  await page.waitForFunction(`(() => { const b = ${LAUNCHER}; return b && b.getBoundingClientRect().width > 0; })()`, null, { timeout: 30000, polling: "raf" });
  const tLauncher = performance.now() - t0;
  const widgetOnly = (r) => r.url.startsWith(base);
  const before = [...reqs.values()].filter(widgetOnly);
  const beforeCount = before.length;
  const beforeBytes = before.reduce((s, r) => s + r.bytes, 0);

  const t1 = performance.now();
  await page.evaluate(`${LAUNCHER}.click()`);
  await page.waitForFunction(`Boolean(${LIVE})`, null, { timeout: 30000, polling: "raf" });
  const tLive = performance.now() - t1;
  const all = [...reqs.values()].filter(widgetOnly);
  const after = all.slice(beforeCount);
  await page.close();
  return {
    launcher: {
      ms: Math.round(tLauncher), round_trips: +(tLauncher / RTT).toFixed(1),
      requests: beforeCount, bytes: beforeBytes,
      urls: before.map((r) => `${r.method} ${r.url.slice(base.length)} ${r.status}${r.fromCache ? " (cache)" : ""} ${r.bytes}B`),
    },
    open_to_live: {
      ms: Math.round(tLive), round_trips: +(tLive / RTT).toFixed(1),
      requests: after.length, bytes: after.reduce((s, r) => s + r.bytes, 0),
      preflights: preflights.length,
      urls: after.map((r) => `${r.method} ${r.url.slice(base.length).split("?")[0]} ${r.status ?? "-"}${r.fromCache ? " (cache)" : ""} ${r.bytes}B`),
    },
  };
}

const browser = await chromium.launch({
  executablePath: process.env.BLOCKHOOK_CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});
const out = { rtt_ms: RTT, runs: [] };
try {
  for (let i = 0; i < RUNS; i++) {
    // A fresh profile (cold cache), then the same profile again (warm).
    const context = await browser.newContext();
    const cold = await visit(context);
    const warm = await visit(context);
    await context.close();
    out.runs.push({ cold, warm });
  }
} finally {
  await browser.close();
  host.close();
}
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
