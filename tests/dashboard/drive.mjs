// Drives the reviewers' dashboard in headless Chromium (playwright-core,
// the system's /usr/bin/chromium) for tests/api/pages/dashboard.rs.
//
// Reads {scenario, url, token, ...} as JSON on stdin and prints what it saw
// as one JSON object on stdout; the Rust test asserts on it. Any error is a
// non-zero exit with the message on stderr.

import { chromium } from "playwright-core";
import { join } from "node:path";

const input = JSON.parse(await new Promise((res) => {
  let s = "";
  process.stdin.on("data", (d) => (s += d));
  process.stdin.on("end", () => res(s));
}));

const WAIT = 15000;
const NARROW = { width: 360, height: 760 };
const DESKTOP = { width: 1280, height: 900 };

async function overflow(page) {
  return page.evaluate(() => ({
    scrollWidth: document.documentElement.scrollWidth,
    clientWidth: document.documentElement.clientWidth,
  }));
}

/** Whether the element is fully inside the viewport horizontally and shown. */
async function inView(page, selector) {
  const box = await page.locator(selector).first().boundingBox();
  const vw = page.viewportSize().width;
  return !!box && box.x >= 0 && box.x + box.width <= vw && box.width > 0;
}

async function signIn(page, token) {
  await page.goto(`${input.url}/dashboard`);
  await page.fill("#api-key", token);
  await page.click("#login-form button[type=submit]");
  await page.waitForSelector("#session:not([hidden])", { timeout: WAIT });
}

async function shot(page, name) {
  if (input.screenshots) await page.screenshot({ path: join(input.screenshots, name), fullPage: true });
}

const text = (page, sel) => page.locator(sel).first().innerText();

const scenarios = {
  /** 360 px: nothing overflows, Sign out is on screen, the detail opens under its row. */
  async narrow(page) {
    await page.setViewportSize(NARROW);
    await signIn(page, input.token);
    await page.waitForSelector("#deliveries tr.event-row", { timeout: WAIT });
    await page.waitForSelector("#inbox .interaction", { timeout: WAIT });
    const out = { loaded: await overflow(page), signOutVisible: await inView(page, "#sign-out") };
    out.botName = await text(page, "#bot-name");
    out.botUrlVisible = await inView(page, "#bot-url");
    const row = page.locator("#deliveries tr.event-row").first();
    await row.click();
    await page.waitForSelector("#deliveries tr.detail-row .detail-head", { timeout: WAIT });
    const rowBox = await row.boundingBox();
    const detailBox = await page.locator("#deliveries tr.detail-row .detail").boundingBox();
    out.detailGap = detailBox.y - (rowBox.y + rowBox.height);
    out.detailInside = detailBox.x >= 0 && detailBox.x + detailBox.width <= NARROW.width;
    out.withDetail = await overflow(page);
    await page.locator("#inbox .interaction summary.interaction-head").first().click();
    await page.waitForSelector("#inbox .interaction[open] .answer button", { timeout: WAIT });
    out.withInboxOpen = await overflow(page);
    out.answerVisible = await inView(page, "#inbox .interaction[open] .answer button");
    await page.locator("#inbox .interaction summary.interaction-head").first().click();
    await page.evaluate(() => window.scrollTo(0, 0));
    await shot(page, "dashboard-360.png");
    return out;
  },

  /** Desktop: the hint, test event, filters and search, headers sent, inbox, chart, bulk redeliver. */
  async desktop(page) {
    await page.setViewportSize(DESKTOP);
    await signIn(page, input.token);
    await page.waitForSelector("#deliveries tr.event-row", { timeout: WAIT });
    const out = {};
    out.botName = await text(page, "#bot-name");
    out.botUrl = await text(page, "#bot-url");
    out.hint = await text(page, "#detail");
    out.overflow = await overflow(page);

    // Inbox: compact until opened, the visitor and what they said, button styles.
    await page.waitForSelector("#inbox .interaction", { timeout: WAIT });
    const card = page.locator("#inbox .interaction").first();
    out.cardVisitor = await card.locator(".visitor").innerText();
    out.cardSaid = await card.locator(".said").innerText();
    out.answerHiddenBeforeOpen = !(await card.locator(".answer button").first().isVisible());
    out.cardHeight = (await card.boundingBox()).height;
    await card.locator("summary.interaction-head").click();
    out.answerShownAfterOpen = await card.locator(".answer button").first().isVisible();
    out.optionClasses = await card.locator(".answer button").evaluateAll((bs) => bs.map((b) => [b.dataset.optionId, b.className]));

    // The headers actually sent, on the chosen delivery.
    await page.locator(`#deliveries tr[data-event-id="${input.event_id}"]`).click();
    await page.waitForSelector("#detail .attempt .sent-headers pre", { timeout: WAIT });
    out.headersShown = await text(page, "#detail .attempt .sent-headers pre");

    // Search by event id, then filters by status and type.
    await page.fill("#event-search", input.event_id);
    await page.waitForFunction((id) => {
      const rows = [...document.querySelectorAll("#deliveries tr.event-row")];
      return rows.length === 1 && rows[0].dataset.eventId === id;
    }, input.event_id, { timeout: WAIT });
    out.searchRows = await page.locator("#deliveries tr.event-row").count();
    await page.fill("#event-search", "evt_00000000000000000000000000");
    await page.waitForSelector("#deliveries td.empty", { timeout: WAIT });
    out.searchEmpty = await text(page, "#deliveries td.empty");
    await page.fill("#event-search", "");
    await page.selectOption("#type-filter", "message.received");
    await page.waitForFunction(() => {
      const cells = [...document.querySelectorAll("#deliveries tr.event-row td.type-cell")];
      return cells.length > 0 && cells.every((c) => c.textContent === "message.received");
    }, null, { timeout: WAIT });
    out.typeRows = await page.locator("#deliveries tr.event-row").count();
    await page.selectOption("#type-filter", "");
    await page.selectOption("#status-filter", "dead");
    await page.waitForFunction(() => {
      const rows = [...document.querySelectorAll("#deliveries tr.event-row")];
      return rows.length > 0 && rows.every((r) => r.querySelector(".badge").textContent === "dead");
    }, null, { timeout: WAIT });
    out.deadRows = await page.locator("#deliveries tr.event-row").count();
    await page.selectOption("#status-filter", "");

    // Send test event: the result of its first attempt.
    await page.click("#send-test");
    await page.waitForSelector("#test-result.test-done", { timeout: WAIT });
    out.testResult = await text(page, "#test-result");

    // Redeliver all: a count, a confirmation, then what was queued.
    await page.click("#redeliver-all");
    await page.waitForSelector("#bulk-confirm button[data-status=dead]", { timeout: WAIT });
    out.confirmText = await text(page, "#bulk-confirm");
    out.confirmButton = await text(page, "#bulk-confirm button[data-status=dead]");
    await page.click("#bulk-confirm button[data-status=dead]");
    await page.waitForSelector("#bulk-result.bulk-done", { timeout: WAIT });
    out.bulkResult = await text(page, "#bulk-result");

    // The latency chart, drawn once attempts exist.
    await page.evaluate(() => window.scrollTo(0, 0));
    // Attached, not "visible": with equal latencies the line is flat, a box of
    // no height, which the driver counts as hidden.
    await page.waitForSelector("#latency-chart svg polyline.p90", { state: "attached", timeout: WAIT });
    out.chartLines = await page.locator("#latency-chart svg polyline").count();
    out.chartPoints = await page.locator("#latency-chart svg polyline.p50").getAttribute("points");
    await page.locator("#inbox .interaction summary.interaction-head").first().click();
    await shot(page, "dashboard-desktop.png");
    return out;
  },

  /** The admin token: a chatbot switcher; switching shows the other chatbot. */
  async admin(page) {
    await page.setViewportSize(DESKTOP);
    // A wrong credential is refused at sign-in with a reason.
    await page.goto(`${input.url}/dashboard`);
    await page.fill("#api-key", "adm_wrong");
    await page.click("#login-form button[type=submit]");
    await page.waitForFunction(() => document.getElementById("login-error").textContent !== "", null, { timeout: WAIT });
    const refused = await text(page, "#login-error");
    await signIn(page, input.token);
    await page.waitForSelector("#bot-switch option", { state: "attached", timeout: WAIT });
    const out = {};
    out.options = await page.locator("#bot-switch option").evaluateAll((os) => os.map((o) => [o.value, o.textContent]));
    out.firstUrl = await text(page, "#bot-url");
    await page.selectOption("#bot-switch", input.switch_to);
    await page.waitForFunction((u) => document.getElementById("bot-url").textContent === u, input.switch_url, { timeout: WAIT });
    await page.waitForSelector(`#deliveries tr[data-event-id="${input.switch_event}"]`, { timeout: WAIT });
    out.switchedUrl = await text(page, "#bot-url");
    out.rows = await page.locator("#deliveries tr.event-row").evaluateAll((rs) => rs.map((r) => r.dataset.eventId));
    out.refused = refused;
    // The switcher fits at 360 px too.
    await page.setViewportSize(NARROW);
    out.narrow = await overflow(page);
    out.narrowSignOut = await inView(page, "#sign-out");
    out.narrowSwitch = await inView(page, "#bot-switch");
    return out;
  },

  /** A chatbot with nothing yet: every list says what to do. */
  async empty(page) {
    await page.setViewportSize(NARROW);
    await signIn(page, input.token);
    await page.waitForSelector("#deliveries td.empty", { timeout: WAIT });
    await page.waitForSelector("#inbox .empty", { timeout: WAIT });
    await page.waitForSelector("#latency-chart .empty", { timeout: WAIT });
    return {
      deliveries: await text(page, "#deliveries td.empty"),
      inbox: await text(page, "#inbox .empty"),
      chart: await text(page, "#latency-chart .empty"),
      hint: await text(page, "#detail"),
      overflow: await overflow(page),
      signOutVisible: await inView(page, "#sign-out"),
    };
  },
};

const browser = await chromium.launch({
  executablePath: input.chromium || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});
let code = 0;
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const f = scenarios[input.scenario];
  if (!f) throw new Error(`no scenario ${input.scenario}`);
  const out = await f(page);
  out.pageErrors = errors;
  process.stdout.write(JSON.stringify(out));
} catch (e) {
  process.stderr.write(`${e.stack || e}\n`);
  code = 1;
} finally {
  // Playwright gave the browser a fresh profile of its own, removed here.
  await browser.close();
}
process.exit(code);
