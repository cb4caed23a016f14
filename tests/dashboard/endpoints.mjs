// The endpoint pages (§13 in §17's portal and in the dashboard), driven for
// tests/api/pages/portal_endpoints.rs: add (a 422 shown at its field),
// pause, enable, test (its delivery seen), rotate (the secret once),
// delete (confirmed), read-only, at 360 and 1280 px, light and dark, axe.

const card = (id) => `article.endpoint[data-endpoint-id="${id}"]`;

/** The scenarios, given pages.mjs's helpers. */
export function endpointScenarios({ input, WAIT, NARROW, DESKTOP, axe, shot, overflow, portalFrame }) {
  /** Fills the open "new endpoint" form of `t` (page or frame). */
  async function fill(t, { url, header, filter, type, rate }) {
    const form = t.locator("form.endpoint-form.new");
    await form.locator("input[name=url]").fill(url);
    if (type) await form.locator(`input[name=event_types][value="${type}"]`).check();
    if (filter && !(await form.locator("[name=filter-key]").count())) {
      await form.locator("[data-add=filter]").click();
      await form.locator("[name=filter-key]").fill(filter[0]);
      await form.locator("[name=filter-value]").fill(filter[1]);
    }
    if (header) {
      if (!(await form.locator("[name=headers-key]").count())) await form.locator("[data-add=headers]").click();
      await form.locator("[name=headers-key]").fill(header[0]);
      await form.locator("[name=headers-value]").fill(header[1]);
    }
    if (rate) await form.locator("input[name=rate_limit]").fill(rate);
    await form.locator("button[type=submit]").click();
  }

  /** Where the form shows the error of `pointer`: its text, and whether it sits at that field. */
  async function errorAt(t, pointer) {
    const sel = `form.endpoint-form .field-error[data-for="${pointer}"]`;
    await t.waitForSelector(sel, { timeout: WAIT });
    return t.locator(sel).evaluate((p) => {
      const box = p.parentElement;
      const control = box.querySelector("input");
      return {
        text: p.textContent,
        code: p.dataset.code,
        box: box.classList.contains("pair") ? "pair" : box.dataset.pointer,
        boxValue: control ? control.value : null,
        invalid: control ? control.getAttribute("aria-invalid") : null,
        describedBy: control ? control.getAttribute("aria-describedby") === p.id : false,
      };
    });
  }

  const ids = (t) => t.locator("article.endpoint").evaluateAll((cs) => cs.map((c) => ({
    id: c.dataset.endpointId, state: c.dataset.state, default: Boolean(c.querySelector(".ep-default")),
    url: c.querySelector(".ep-url").textContent, actions: [...c.querySelectorAll(":scope > .actions [data-act]")].map((b) => b.dataset.act),
  })));

  return {
    /** The whole life of an endpoint through the portal framed on another origin. */
    async portal_endpoints(browser) {
      const out = {};
      const context = await browser.newContext({ viewport: DESKTOP });
      const page = await context.newPage();
      const errors = [];
      page.on("pageerror", (e) => errors.push(String(e)));
      await page.goto(input.allowed_page);
      const f = await portalFrame(page);
      await f.waitForSelector(".endpoint .ep-health:not(:empty)", { timeout: WAIT });
      out.before = await ids(f);
      out.text = await f.evaluate(() => document.body.innerText);

      await f.click("[data-act=add]");
      await fill(f, { url: "not a url" });
      out.urlError = await errorAt(f, "/url");
      await fill(f, { url: input.receiver_url, header: ["Content-Type", "text/plain"], filter: ["type", "webhook.test"], type: "interaction.button_clicked", rate: "10/s" });
      out.headerError = await errorAt(f, "/headers/Content-Type");
      out.axeForm = await axe(f);
      await shot(page, "portal-endpoint-422-1280.png");
      await fill(f, { url: input.receiver_url, header: ["X-Shop", "plants"] });
      await f.waitForSelector(".endpoint .secret-box .secret", { timeout: WAIT });
      out.created = await ids(f);
      out.createdSecret = await f.locator(".secret-box .secret").innerText();
      const id = await f.locator(".secret-box").evaluate((b) => b.closest("[data-endpoint-id]").dataset.endpointId);
      out.id = id;

      await f.click(`${card(id)} [data-act=pause]`);
      await f.waitForSelector(`${card(id)}[data-state=paused]`, { timeout: WAIT });
      out.paused = (await ids(f)).find((e) => e.id === id);
      await f.click(`${card(id)} [data-act=enable]`);
      await f.waitForSelector(`${card(id)}[data-state=enabled]`, { timeout: WAIT });
      out.enabled = (await ids(f)).find((e) => e.id === id);

      await f.click(`${card(id)} [data-act=test]`);
      await f.waitForSelector(`${card(id)} .ep-result[data-outcome]`, { timeout: 20000 });
      out.test = { outcome: await f.locator(`${card(id)} .ep-result`).getAttribute("data-outcome"), text: await f.locator(`${card(id)} .ep-result`).innerText() };
      await f.waitForSelector(`${card(id)} .ep-health:has-text("1 succeeded")`, { timeout: WAIT }).catch(() => {});
      out.health = await f.locator(`${card(id)} .ep-health`).innerText();

      // The events filtered by the endpoint, and the test event's delivery to it.
      await f.selectOption("#endpoint-filter", id);
      await f.waitForFunction(() => document.querySelectorAll("tr.event-row").length === 1 && document.querySelector("tr.event-row td:nth-child(2)").textContent === "webhook.test", null, { timeout: WAIT });
      out.filtered = await f.locator("tr.event-row").evaluateAll((rs) => rs.map((r) => r.dataset.eventId));
      // The detail is read when it opens: opened again (read again) when a
      // list load still on its way redrew the table and closed it, or when
      // it was read before the attempt's record was written.
      const attempt = `tr.detail-row .delivery[data-endpoint-id="${id}"] tr.attempt`;
      for (let tries = 0; ; tries++) {
        if (await f.locator("tr.detail-row").count()) await f.locator("tr.event-row").first().click();
        await f.locator("tr.event-row").first().click();
        const shown = await f.waitForSelector(attempt, { timeout: WAIT / 3 }).then(() => true, () => false);
        if (shown) break;
        if (tries === 2) throw new Error(`no attempt of ${id} in the event's detail: ${await f.locator("tr.detail-row").allInnerTexts()}`);
      }
      out.delivery = await f.locator(`tr.detail-row .delivery[data-endpoint-id="${id}"]`).innerText();
      await f.click(`tr.detail-row .delivery[data-endpoint-id="${id}"] button.redeliver`);
      await f.waitForFunction(() => /Queued again/.test(document.querySelector("tr.detail-row .result")?.textContent || ""), null, { timeout: WAIT });
      out.redelivered = await f.locator("tr.detail-row .result").innerText();
      await f.selectOption("#endpoint-filter", "");

      await f.click(`${card(id)} [data-act=rotate]`);
      await f.waitForSelector("dialog.confirm-dialog[open]", { timeout: WAIT });
      out.axeDialog = await axe(f);
      await f.click("dialog.confirm-dialog [data-confirm=yes]");
      await f.waitForSelector(`${card(id)} .secret-box .secret`, { timeout: WAIT });
      out.rotatedSecret = await f.locator(`${card(id)} .secret-box .secret`).innerText();
      await f.click(`${card(id)} [data-act=copy]`);
      await f.waitForSelector(`${card(id)} .copy-note:not(:empty)`, { timeout: WAIT });

      // Edit: the form filled with the endpoint, saved.
      await f.click(`${card(id)} [data-act=edit]`);
      out.editUrl = await f.locator(`${card(id)} form input[name=url]`).inputValue();
      await f.fill(`${card(id)} form input[name=description]`, "Order system");
      await f.click(`${card(id)} form button[type=submit]`);
      await f.waitForSelector(`${card(id)} .ep-desc`, { timeout: WAIT });
      out.edited = await f.locator(`${card(id)} .ep-desc`).innerText();

      // Delete: the dialog takes the focus (on Cancel) and Escape closes it.
      await f.click(`${card(id)} [data-act=delete]`);
      await f.waitForSelector("dialog.confirm-dialog[open]", { timeout: WAIT });
      out.dialogFocus = await f.evaluate(() => document.activeElement.dataset.confirm);
      await page.keyboard.press("Escape");
      // The key reaches the framed page on its own schedule: wait for the dialog to go.
      await f.waitForFunction(() => !document.querySelector("dialog.confirm-dialog"), null, { timeout: WAIT }).catch(() => {});
      out.dialogClosed = await f.locator("dialog.confirm-dialog").count();
      out.afterCancel = (await ids(f)).map((e) => e.id);
      await f.click(`${card(id)} [data-act=delete]`);
      await f.click("dialog.confirm-dialog [data-confirm=yes]");
      await f.waitForFunction((x) => !document.querySelector(`article.endpoint[data-endpoint-id="${x}"]`), id, { timeout: WAIT });
      out.after = await ids(f);
      out.textAfter = await f.evaluate(() => document.body.innerText);
      out.axe = await axe(f);
      out.overflow = await overflow(f);
      await shot(page, "portal-endpoints-1280.png");
      out.pageErrors = errors;
      await context.close();

      // 360 px in dark mode: the list, the add form with a 422, axe.
      const dark = await browser.newContext({ viewport: NARROW, colorScheme: "dark" });
      const p2 = await dark.newPage();
      await p2.goto(input.allowed_page);
      const g = await portalFrame(p2);
      await g.waitForSelector(".endpoint .ep-health:not(:empty)", { timeout: WAIT });
      await g.click("[data-act=add]");
      await fill(g, { url: input.receiver_url, header: ["Webhook-Id", "x"] });
      out.narrowError = await errorAt(g, "/headers/Webhook-Id");
      out.narrowOverflow = await overflow(g);
      out.narrowAxe = await axe(g);
      out.narrowBackground = await g.evaluate(() => getComputedStyle(document.querySelector(".endpoint")).backgroundColor);
      await shot(p2, "portal-endpoints-360-dark.png");
      await dark.close();
      return out;
    },

    /** A read-only link: the endpoints and deliveries, no action. */
    async portal_endpoints_read_only(browser) {
      const page = await (await browser.newContext({ viewport: NARROW })).newPage();
      await page.goto(input.portal_url);
      await page.waitForSelector(".endpoint .ep-health:not(:empty)", { timeout: WAIT });
      await page.waitForSelector("tr.event-row", { timeout: WAIT });
      await page.locator("tr.event-row").first().click();
      await page.waitForSelector("tr.detail-row .delivery", { timeout: WAIT });
      const out = {
        endpoints: await ids(page),
        deliveries: await page.locator("tr.detail-row .delivery").evaluateAll((ds) => ds.map((d) => d.dataset.endpointId)),
        buttons: await page.locator("main button:not(.open):not(.more)").evaluateAll((bs) => bs.filter((b) => b.offsetParent !== null).map((b) => b.textContent)),
        forms: await page.locator("form").count(),
        axe: await axe(page),
      };
      await shot(page, "portal-endpoints-read-only-360.png");
      return out;
    },

    /** The dashboard's endpoints: add one, test it, its delivery in the event's detail, redeliver to it; 1280 and 360 px, axe. */
    async dashboard_endpoints(browser) {
      const out = {};
      for (const size of [DESKTOP, NARROW]) {
        const page = await (await browser.newContext({ viewport: size })).newPage();
        const errors = [];
        page.on("pageerror", (e) => errors.push(String(e)));
        await page.goto(`${input.url}/dashboard`);
        await page.fill("#api-key", input.token);
        await page.click("#login-form button[type=submit]");
        await page.waitForSelector("#endpoints .endpoint .ep-health:not(:empty)", { timeout: WAIT });
        const r = { before: await ids(page) };
        await page.click("#endpoints [data-act=add]");
        await fill(page, { url: "not a url" });
        r.urlError = await errorAt(page, "/url");
        await fill(page, { url: `${input.receiver_url}?w=${size.width}` });
        await page.waitForSelector("#endpoints .secret-box .secret", { timeout: WAIT });
        r.secret = await page.locator("#endpoints .secret-box .secret").innerText();
        const id = await page.locator("#endpoints .secret-box").evaluate((b) => b.closest("[data-endpoint-id]").dataset.endpointId);
        r.id = id;
        r.created = await ids(page);
        await page.click(`${card(id)} [data-act=test]`);
        await page.waitForSelector(`${card(id)} .ep-result[data-outcome]`, { timeout: 20000 });
        r.test = await page.locator(`${card(id)} .ep-result`).getAttribute("data-outcome");
        await page.selectOption("#endpoint-filter", id);
        await page.waitForFunction(() => document.querySelectorAll("#deliveries tr.event-row").length === 1, null, { timeout: WAIT });
        await page.locator("#deliveries tr.event-row").first().click();
        await page.waitForSelector(`#detail .delivery[data-endpoint-id="${id}"] .attempt`, { timeout: WAIT });
        r.delivery = await page.locator(`#detail .delivery[data-endpoint-id="${id}"]`).innerText();
        await page.click(`#detail .delivery[data-endpoint-id="${id}"] button.redeliver-endpoint`);
        await page.waitForSelector(`#detail .delivery[data-endpoint-id="${id}"] .redeliver-endpoint-done, #detail .redeliver-endpoint-done`, { timeout: WAIT });
        r.redelivered = await page.locator("#detail .redeliver-endpoint-done").first().innerText();
        r.overflow = await overflow(page);
        r.axe = await axe(page);
        r.pageErrors = errors;
        await page.evaluate(() => document.getElementById("endpoints-title").scrollIntoView());
        await shot(page, `dashboard-endpoints-${size.width}.png`);
        out[size.width] = r;
        await page.context().close();
      }
      return out;
    },
  };
}
