// An ask outlives a crash of the server; 429s are waited out.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiError, Client } from "../src/index.js";
import { Receiver, Server, until } from "./helpers.js";

test("an ask survives a server restart", async () => {
  const server = new Server();
  const receiver = await new Receiver().start();
  await server.start();
  try {
    const bot = await server.bot(receiver.url);
    const visitor = await bot.visitor();
    const answerRequests: number[] = [];
    const recording: typeof fetch = (input, init) => {
      if (String(input).includes("/answer")) answerRequests.push(Date.now());
      return fetch(input, init);
    };
    const client = new Client({ baseUrl: server.url, apiKey: bot.apiKey, fetch: recording });
    let settled = false;
    const asked = client.ask(visitor.conversationId, "Proceed?", { timeout: 120 }).finally(() => (settled = true));
    await visitor.question();
    await until(() => answerRequests.length > 0, "the client to wait for the answer");
    await server.kill();
    const killedAt = Date.now();
    // The client notices and keeps trying while the server is down.
    await until(() => answerRequests.some((t) => t > killedAt), "a request to the dead server");
    assert.equal(settled, false);
    await server.start();
    await visitor.click("accept");
    assert.equal((await asked).answer, "accepted");
  } finally {
    await server.stop();
    await receiver.close();
  }
});

test("an ask survives a graceful restart", async () => {
  const server = new Server();
  const receiver = await new Receiver().start();
  await server.start();
  try {
    const bot = await server.bot(receiver.url);
    const visitor = await bot.visitor();
    const waits: number[] = [];
    const answers: string[] = [];
    const recording: typeof fetch = async (input, init) => {
      if (!String(input).includes("/answer")) return fetch(input, init);
      waits.push(Date.now());
      const r = await fetch(input, init);
      answers.push(await r.clone().text());
      return r;
    };
    const client = new Client({ baseUrl: server.url, apiKey: bot.apiKey, fetch: recording });
    let settled = false;
    const asked = client.ask(visitor.conversationId, "Proceed?", { timeout: 120 }).finally(() => (settled = true));
    await visitor.question();
    await until(() => waits.length > 0, "the client to wait for the answer");
    await new Promise((ok) => setTimeout(ok, 300)); // the wait is held by the server
    // SIGTERM: the server ends the held wait with "pending" and exits 0.
    const stopping = Date.now();
    assert.equal(await server.terminate(), 0);
    assert.ok(Date.now() - stopping < 10_000);
    await until(() => answers.length > 0, "the held wait to end");
    assert.equal(JSON.parse(answers[0] ?? "{}").answer, "pending");
    assert.equal(settled, false);
    await server.start();
    await visitor.click("accept");
    assert.equal((await asked).answer, "accepted");
  } finally {
    await server.stop();
    await receiver.close();
  }
});

test("rate-limited calls wait for Retry-After", async () => {
  const server = new Server(["--limit-api-key", "1/s"]);
  const receiver = await new Receiver().start();
  await server.start();
  try {
    const bot = await server.bot(receiver.url);
    const impatient = new Client({ baseUrl: server.url, apiKey: bot.apiKey, maxRetries: 0 });
    await assert.rejects(
      (async () => {
        for (let i = 0; i < 5; i++) for await (const _ of impatient.events.list());
      })(),
      (e: unknown) => {
        assert.ok(e instanceof ApiError);
        assert.deepEqual([e.status, e.code], [429, "rate_limited"]);
        assert.ok((e.retryAfter ?? 0) >= 1);
        return true;
      },
    );
    const patient = new Client({ baseUrl: server.url, apiKey: bot.apiKey });
    for (let i = 0; i < 3; i++) {
      const all = [];
      for await (const e of patient.events.list()) all.push(e);
      assert.deepEqual(all, []);
    }
  } finally {
    await server.stop();
    await receiver.close();
  }
});
