// Drives the customer portal and the widget in headless Chromium
// (playwright-core, the system's /usr/bin/chromium) for
// tests/api/pages/portal.rs and tests/api/pages/widget_use.rs, and runs
// axe-core (pinned in package-lock.json) on them.
//
// Reads {scenario, ...} as JSON on stdin and prints what it saw as one JSON
// object on stdout; the Rust test asserts on it.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { endpointScenarios } from "./endpoints.mjs";

const input = JSON.parse(await new Promise((res) => {
  let s = "";
  process.stdin.on("data", (d) => (s += d));
  process.stdin.on("end", () => res(s));
}));

const WAIT = 15000;
const NARROW = { width: 360, height: 760 };
const DESKTOP = { width: 1280, height: 900 };
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** axe-core's violations in `target` (a page or a frame), shadow roots included. */
async function axe(target, include) {
  await target.evaluate(AXE);
  const run = () => target.evaluate((inc) => window.axe.run(inc ? { include: [inc] } : document, { resultTypes: ["violations"] }), include || null);
  let r;
  try {
    r = await run();
  } catch (e) {
    // The pages redraw on their own (live updates, polling): a node axe was
    // looking at can leave the document mid-run. Once more, then it fails.
    process.stderr.write(`axe-core run failed, once more: ${e}\n`);
    r = await run();
  }
  return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(" ")).slice(0, 5) }));
}

async function shot(page, name) {
  if (input.screenshots) await page.screenshot({ path: join(input.screenshots, name), fullPage: true });
}

/** The frame showing the portal inside `page`. */
async function portalFrame(page) {
  const deadline = Date.now() + WAIT;
  for (;;) {
    const f = page.frames().find((x) => x !== page.mainFrame() && /\/portal\/cb_/.test(x.url()));
    if (f) return f;
    if (Date.now() > deadline) throw new Error(`no portal frame: ${page.frames().map((x) => x.url())}`);
    await page.waitForEvent("framenavigated", { timeout: WAIT });
  }
}

const overflow = (t) => t.evaluate(() => ({ scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth }));

const LAUNCHER = (sel) => `document.querySelector('[data-blockhook-launcher]')?.shadowRoot?.querySelector(${JSON.stringify(sel)})`;

const scenarios = {
  /** The portal framed by an allowed origin: data of its chatbot only, 360 px, 1280 px, dark, axe. */
  async portal_frame(browser) {
    const out = {};
    for (const [scheme, size, name] of [["light", DESKTOP, "portal-1280.png"], ["light", NARROW, "portal-360.png"], ["dark", NARROW, "portal-360-dark.png"]]) {
      const context = await browser.newContext({ colorScheme: scheme, viewport: size });
      const page = await context.newPage();
      await page.goto(input.allowed_page);
      const frame = await portalFrame(page);
      await frame.waitForSelector("tr.event-row", { timeout: WAIT });
      await frame.waitForSelector(".endpoint", { timeout: WAIT });
      const r = {
        rows: await frame.locator("tr.event-row").evaluateAll((rs) => rs.map((x) => x.dataset.eventId)),
        text: await frame.evaluate(() => document.body.innerText),
        title: await frame.locator("#title").innerText(),
        overflow: await overflow(frame),
        background: await frame.evaluate(() => getComputedStyle(document.body).backgroundColor),
        buttons: await frame.locator("button[data-act], button.redeliver, #bulk button").count(),
      };
      // The detail of an event: its deliveries and attempts.
      await frame.locator(`tr[data-event-id="${input.a_event}"]`).click();
      await frame.waitForSelector("tr.detail-row .delivery", { timeout: WAIT });
      r.detail = await frame.locator("tr.detail-row").innerText();
      r.axe = await axe(frame);
      await shot(page, name);
      out[`${scheme}-${size.width}`] = r;
      await context.close();
    }
    // The same page on an origin the chatbot does not allow: the frame is refused.
    const context = await browser.newContext({ viewport: DESKTOP });
    const page = await context.newPage();
    await page.goto(input.refused_page);
    const deadline = Date.now() + WAIT;
    while (!page.frames().some((f) => f.url().startsWith("chrome-error:")) && Date.now() < deadline) {
      await page.waitForEvent("framenavigated", { timeout: WAIT }).catch(() => {});
    }
    out.refusedFrames = page.frames().filter((f) => f !== page.mainFrame()).map((f) => f.url());
    out.refusedRows = 0;
    for (const f of page.frames()) {
      out.refusedRows += await f.locator("tr.event-row").count().catch(() => 0);
    }
    await context.close();
    return out;
  },

  /** A read-only link: the data, no button that changes anything. */
  async portal_read_only(browser) {
    const page = await (await browser.newContext({ viewport: DESKTOP })).newPage();
    await page.goto(input.portal_url);
    await page.waitForSelector("tr.event-row", { timeout: WAIT });
    await page.waitForSelector(".endpoint", { timeout: WAIT });
    await page.locator("tr.event-row").first().click();
    await page.waitForSelector("tr.detail-row .delivery", { timeout: WAIT });
    return {
      mode: await page.locator("#mode").isVisible(),
      rows: await page.locator("tr.event-row").count(),
      // Shown buttons other than a row's details and paging.
      buttons: await page.locator("main button:not(.open):not(.more)").evaluateAll((bs) => bs.filter((b) => b.offsetParent !== null).map((b) => b.textContent)),
      axe: await axe(page),
    };
  },

  /** An expired or altered link: a clear message and no data. */
  async portal_refused_link(browser) {
    const page = await (await browser.newContext({ viewport: NARROW })).newPage();
    await page.goto(input.portal_url);
    await page.waitForSelector("#message.is-error", { timeout: WAIT });
    return {
      message: await page.locator("#message").innerText(),
      appHidden: await page.locator("#app").isHidden(),
      rows: await page.locator("tr.event-row").count(),
      axe: await axe(page),
    };
  },

  /** The launcher's panel on a phone: focus moves in, 16 px fields, asks before a new conversation, axe. */
  async widget_use(browser) {
    const context = await browser.newContext({ viewport: NARROW });
    const page = await context.newPage();
    await page.goto(input.launcher_page);
    await page.waitForFunction(`Boolean(${LAUNCHER(".bh-launcher")})`, null, { timeout: WAIT });
    const out = { requestsBeforeOpen: [] };
    await page.evaluate(`${LAUNCHER(".bh-launcher")}.click()`);
    await page.waitForFunction(`Boolean(${LAUNCHER(".bh-live.is-live")})`, null, { timeout: WAIT });
    await page.waitForFunction(() => {
      const root = document.querySelector("[data-blockhook-launcher]").shadowRoot;
      return root.activeElement && root.activeElement.classList.contains("bh-input");
    }, null, { timeout: WAIT });
    out.focused = await page.evaluate(() => document.querySelector("[data-blockhook-launcher]").shadowRoot.activeElement.className);
    out.fontSizes = await page.evaluate(() => [...document.querySelector("[data-blockhook-launcher]").shadowRoot.querySelectorAll("input, textarea, select")]
      .map((e) => parseFloat(getComputedStyle(e).fontSize)));
    const conv = () => page.evaluate((k) => JSON.parse(localStorage.getItem(k) || "{}").conversation_id, `blockhook.widget.${input.chatbot}`);
    out.first = await conv();
    await page.evaluate(`${LAUNCHER(".bh-header .bh-link")}.click()`);
    out.askShown = await page.evaluate(`!${LAUNCHER(".bh-confirm")}.hidden`);
    out.askText = await page.evaluate(`${LAUNCHER(".bh-confirm")}.textContent`);
    out.afterAsk = await conv();
    // The widget only: the host page's own markup is the host's.
    out.axeAsking = await axe(page, "[data-blockhook-launcher]");
    await page.evaluate(`[...${LAUNCHER(".bh-confirm")}.querySelectorAll("button")].find((b) => b.textContent === "Keep this one").click()`);
    out.keptHidden = await page.evaluate(`${LAUNCHER(".bh-confirm")}.hidden`);
    out.afterKeep = await conv();
    await page.evaluate(`${LAUNCHER(".bh-header .bh-link")}.click()`);
    await page.evaluate(`[...${LAUNCHER(".bh-confirm")}.querySelectorAll("button")].find((b) => b.textContent === "Start new").click()`);
    await page.waitForFunction((k) => JSON.parse(localStorage.getItem(k) || "{}").conversation_id, `blockhook.widget.${input.chatbot}`, { timeout: WAIT });
    await page.waitForFunction(({ k, first }) => {
      const c = JSON.parse(localStorage.getItem(k) || "{}").conversation_id;
      return c && c !== first;
    }, { k: `blockhook.widget.${input.chatbot}`, first: out.first }, { timeout: WAIT });
    out.afterStart = await conv();
    await page.waitForFunction(`Boolean(${LAUNCHER(".bh-live.is-live")})`, null, { timeout: WAIT });
    out.axe = await axe(page, "[data-blockhook-launcher]");
    await shot(page, "widget-360.png");
    await context.close();

    // Inline, in a container the page sized: the widget fills it.
    const inline = await (await browser.newContext({ viewport: DESKTOP })).newPage();
    await inline.goto(input.inline_page);
    await inline.waitForFunction(() => document.querySelector("#box")?.shadowRoot?.querySelector(".bh-live.is-live"), null, { timeout: WAIT });
    out.inline = await inline.evaluate(() => {
      const host = document.querySelector("#box").getBoundingClientRect();
      const w = document.querySelector("#box").shadowRoot.querySelector(".bh-widget").getBoundingClientRect();
      return { host: [host.width, host.height], widget: [w.width, w.height] };
    });
    out.axeInline = await axe(inline, "#box");
    await shot(inline, "widget-inline-1280.png");
    return out;
  },

  /** Conversations searched and read, and a test event to a down endpoint, at 1280 and 360 px, with axe. */
  async dashboard_review(browser) {
    const out = {};
    for (const size of [DESKTOP, NARROW]) {
      const page = await (await browser.newContext({ viewport: size })).newPage();
      const errors = [];
      page.on("pageerror", (e) => errors.push(String(e)));
      await page.goto(`${input.url}/dashboard`);
      await page.fill("#api-key", input.token);
      await page.click("#login-form button[type=submit]");
      await page.waitForSelector("#conversations button.conv-row", { timeout: WAIT });
      const rows = () => page.locator("#conversations button.conv-row").evaluateAll((bs) => bs.map((b) => b.dataset.conversationId));
      const r = { listed: await rows(), searches: {} };
      for (const [name, q] of Object.entries(input.searches)) {
        await page.fill("#conv-search", q);
        await page.waitForFunction((want) => {
          const ids = [...document.querySelectorAll("#conversations button.conv-row")].map((b) => b.dataset.conversationId);
          return JSON.stringify(ids) === JSON.stringify(want);
        }, input.expect[name], { timeout: WAIT }).catch(() => {});
        r.searches[name] = await rows();
      }
      await page.fill("#conv-search", "no such words anywhere");
      await page.waitForSelector("#conversations li.empty", { timeout: WAIT });
      r.noMatch = await page.locator("#conversations li.empty").innerText();
      await page.fill("#conv-search", "");
      await page.waitForSelector(`#conversations button[data-conversation-id="${input.open}"]`, { timeout: WAIT });
      await page.click(`#conversations button[data-conversation-id="${input.open}"]`);
      await page.waitForSelector("#transcript ol.transcript li.t-msg", { timeout: WAIT });
      r.transcript = await page.locator("#transcript li.t-msg").evaluateAll((ms) => ms.map((m) => ({
        from: [...m.classList].find((c) => c.startsWith("from-")),
        text: m.querySelector(".t-text")?.textContent || null,
        states: [...m.querySelectorAll(".t-block")].map((b) => [b.dataset.state, b.querySelector(".t-state").textContent]),
        chosen: [...m.querySelectorAll(".t-button.chosen")].map((b) => b.firstChild.textContent),
      })));
      await page.click(`#conversations button[data-conversation-id="${input.closed}"]`);
      await page.waitForFunction(() => document.querySelector("#transcript .t-block[data-state=closed]"), null, { timeout: WAIT });
      r.closedState = await page.locator("#transcript .t-block[data-state=closed] .t-state").first().innerText();
      await page.click(`#conversations button[data-conversation-id="${input.open}"]`);
      await page.waitForSelector("#transcript .t-block[data-state=answered]", { timeout: WAIT });

      // "Send test event" to a down endpoint: its error, at once.
      const started = Date.now();
      await page.click("#send-test");
      await page.waitForSelector("#test-result.test-done", { timeout: WAIT });
      r.testMs = Date.now() - started;
      r.testResult = await page.locator("#test-result").innerText();
      await page.waitForSelector("#deliveries tr.event-row", { timeout: WAIT });
      // Redeliver from the detail: sent now, the answer shown.
      await page.locator("#deliveries tr.event-row").first().click();
      await page.waitForSelector("#detail .detail-actions .btn-primary", { timeout: WAIT });
      const redeliverStarted = Date.now();
      await page.click("#detail .detail-actions .btn-primary");
      await page.waitForSelector("#detail p.note.redeliver-done", { timeout: WAIT });
      r.redeliverMs = Date.now() - redeliverStarted;
      r.redeliverResult = await page.locator("#detail p.note.redeliver-done").innerText();
      r.overflow = await overflow(page);
      r.axe = await axe(page);
      r.pageErrors = errors;
      await page.evaluate(() => document.getElementById("conversations-title").scrollIntoView());
      await shot(page, `dashboard-conversations-${size.width}.png`);
      out[size.width] = r;
      await page.context().close();
    }
    return out;
  },

  /** The dashboard signed in, for axe. */
  async dashboard_axe(browser) {
    const out = {};
    for (const size of [NARROW, DESKTOP]) {
      const page = await (await browser.newContext({ viewport: size })).newPage();
      await page.goto(`${input.url}/dashboard`);
      await page.fill("#api-key", input.token);
      await page.click("#login-form button[type=submit]");
      await page.waitForSelector("#session:not([hidden])", { timeout: WAIT });
      await page.waitForSelector("#deliveries tr.event-row", { timeout: WAIT });
      out[size.width] = await axe(page);
    }
    return out;
  },
};

Object.assign(scenarios, endpointScenarios({ input, WAIT, NARROW, DESKTOP, axe, shot, overflow, portalFrame }));

const browser = await chromium.launch({
  executablePath: input.chromium || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});
let code = 0;
try {
  const f = scenarios[input.scenario];
  if (!f) throw new Error(`no scenario ${input.scenario}`);
  process.stdout.write(JSON.stringify(await f(browser)));
} catch (e) {
  process.stderr.write(`${e.stack || e}\n`);
  code = 1;
} finally {
  await browser.close();
}
process.exit(code);
