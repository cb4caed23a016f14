// The client against a real server: asks answered in the widget, guarded
// calls, the inbox, webhooks, problems.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  ApiError,
  Client,
  Declined,
  verifyWebhook,
  WebhookVerificationError,
  type Interaction,
} from "../src/index.js";
import { Bot, hangFirst, loseFirstAnswer, Receiver, Server } from "./helpers.js";

const server = new Server();
let receiver: Receiver;
let bot: Bot;
let client: Client;

before(async () => {
  await server.start();
  receiver = await new Receiver().start();
  bot = await server.bot(receiver.url);
  client = new Client({ baseUrl: server.url, apiKey: bot.apiKey });
});

after(async () => {
  await receiver.close();
  await server.stop();
});

test("an ask is answered by a click in the widget", async () => {
  const visitor = await bot.visitor();
  const asked = client.ask(visitor.conversationId, "Which colour?", { options: ["red", { id: "blue", label: "Blue" }] });
  assert.equal((await visitor.question()).text, "Which colour?");
  await visitor.click("blue");
  const answer = await asked;
  assert.equal(answer.answer, "chose");
  assert.deepEqual(answer.options, ["blue"]);
  assert.match(answer.interactionId, /^int_/);
});

test("a declined question keeps the guarded function from running", async () => {
  const visitor = await bot.visitor();
  const ran: string[] = [];
  const dropTable = client.requireAnswer(visitor.conversationId, { comment: true })(async function dropTable(name: string) {
    ran.push(name);
    return name;
  });
  const call = dropTable("users");
  assert.equal((await visitor.question()).text, 'Run dropTable("users")?');
  await visitor.click("decline", "not on a Friday");
  await assert.rejects(call, (e: unknown) => {
    assert.ok(e instanceof Declined);
    assert.equal(e.comment, "not on a Friday");
    return true;
  });
  assert.deepEqual(ran, []);
});

test("an accepted question runs the guarded function", async () => {
  const visitor = await bot.visitor();
  const deploy = client.requireAnswer(visitor.conversationId, { message: (env: string) => `Deploy to ${env}?` })(
    (env: string) => `deployed ${env}`,
  );
  const call = deploy("prod");
  assert.equal((await visitor.question()).text, "Deploy to prod?");
  await visitor.click("accept");
  assert.equal(await call, "deployed prod");
});

test("the inbox answered twice with one key takes effect once", async () => {
  const visitor = await bot.visitor();
  const id = await client.askStart(visitor.conversationId, "Refund order 991?");
  const body = { type: "confirmation", confirmed: true } as const;
  const first = await client.interactions.respond(id, body, { idempotencyKey: "refund-991" });
  const again = await client.interactions.respond(id, body, { idempotencyKey: "refund-991" });
  assert.deepEqual(again, first);
  assert.equal(first.status, "answered");
  // Another key is another answer, which the interaction no longer takes.
  await assert.rejects(client.interactions.respond(id, body), (e: unknown) => {
    assert.ok(e instanceof ApiError);
    assert.equal(e.status, 409);
    assert.equal(e.code, "interaction_not_pending");
    return true;
  });
  assert.equal((await client.waitAnswer(id, { timeout: 30 })).answer, "accepted");
  const clicks = [];
  for await (const e of client.events.list({ type: "interaction.button_clicked" })) {
    if ((e.payload as { conversation_id?: string }).conversation_id === visitor.conversationId) clicks.push(e);
  }
  assert.equal(clicks.length, 1);
});

test("a retried answer reuses its Idempotency-Key", async () => {
  const visitor = await bot.visitor();
  const id = await client.askStart(visitor.conversationId, "Ship it?");
  const proxy = await loseFirstAnswer(server.port);
  const keys: string[] = [];
  const recording: typeof fetch = (input, init) => {
    if (String(input).endsWith("/responses")) keys.push(new Headers(init?.headers).get("idempotency-key") ?? "");
    return fetch(input, init);
  };
  try {
    const viaProxy = new Client({ baseUrl: proxy.url, apiKey: bot.apiKey, fetch: recording });
    const answered = await viaProxy.interactions.respond(id, { type: "confirmation", confirmed: false });
    // The first answer was lost on the way back; the retry carried the same
    // key and got the first answer again (a new key would get a 409).
    assert.equal(keys.length, 2);
    assert.ok(keys[0]);
    assert.equal(keys[0], keys[1]);
    assert.equal(answered.status, "answered");
    assert.equal(answered.response?.confirmed, false);
  } finally {
    proxy.close();
  }
});

test("a read that times out on a hung server is sent again", async () => {
  const visitor = await bot.visitor();
  const id = await client.askStart(visitor.conversationId, "Still there?");
  const proxy = await hangFirst(server.port);
  try {
    const viaProxy = new Client({ baseUrl: proxy.url, apiKey: bot.apiKey, timeoutMs: 500 });
    const started = Date.now();
    assert.equal((await viaProxy.interactions.get(id)).status, "pending");
    assert.ok(Date.now() - started >= 500);
    // A call that may not be repeated is not: the timeout reaches the caller.
    const once = await hangFirst(server.port);
    try {
      const other = await bot.visitor();
      const noRetry = new Client({ baseUrl: once.url, apiKey: bot.apiKey, timeoutMs: 500 });
      await assert.rejects(noRetry.askStart(other.conversationId, "Twice?"), { name: "TimeoutError" });
    } finally {
      once.close();
    }
  } finally {
    proxy.close();
  }
});

test("interactions.list iterates every page", async () => {
  const asked = new Set<string>();
  const conversations: string[] = [];
  for (let i = 0; i < 3; i++) {
    const v = await bot.visitor();
    conversations.push(v.conversationId);
    asked.add(await client.askStart(v.conversationId, `Question ${i}`));
  }
  const listed: Interaction[] = [];
  for await (const i of client.interactions.list({ status: "pending", limit: 1 })) {
    if (conversations.includes(i.conversation_id)) listed.push(i);
  }
  assert.deepEqual(new Set(listed.map((i) => i.id)), asked);
  assert.equal(listed.length, 3);
});

test("a real delivery is verified and a tampered one refused", async () => {
  const visitor = await bot.visitor();
  await client.askStart(visitor.conversationId, "Approve the invoice?", { accept: "Approve", decline: "Reject" });
  await visitor.click("accept");
  const delivery = await receiver.next("interaction.button_clicked", visitor.conversationId);
  const event = verifyWebhook(bot.signingSecret, delivery.headers, delivery.body);
  assert.equal(event.type, "interaction.button_clicked");
  if (event.type !== "interaction.button_clicked") return;
  assert.equal(event.conversation_id, visitor.conversationId);
  assert.equal(event.label, "Approve");
  assert.equal(event.user.kind, "visitor");
  assert.equal(event.event_id, delivery.headers["webhook-id"]);

  const tampered = Buffer.from(delivery.body.toString().replace('"accept"', '"decline"'));
  assert.notDeepEqual(tampered, delivery.body);
  assert.throws(() => verifyWebhook(bot.signingSecret, delivery.headers, tampered), WebhookVerificationError);
  const otherSecret = `whsec_${"A".repeat(43)}=`;
  assert.throws(() => verifyWebhook(otherSecret, delivery.headers, delivery.body), WebhookVerificationError);
  // Either of two secrets (a rotation) verifies; Headers work as well as a record.
  const headers = new Headers(delivery.headers as Record<string, string>);
  assert.deepEqual(verifyWebhook([otherSecret, bot.signingSecret], headers, delivery.body.toString()), event);
});

test("webhook.test events are typed", async () => {
  const eventId = await client.events.test();
  const delivery = await receiver.next("webhook.test", eventId);
  const event = verifyWebhook(bot.signingSecret, delivery.headers, delivery.body);
  assert.equal(event.type, "webhook.test");
  assert.equal(event.type === "webhook.test" && event.event_id, eventId);
  assert.equal((await client.events.get(eventId)).type, "webhook.test");
});

test("problems carry status, code, detail and pointers", async () => {
  const visitor = await bot.visitor();
  await assert.rejects(client.ask("conv_00000000000000000000000000", "Anyone?"), (e: unknown) => {
    assert.ok(e instanceof ApiError);
    assert.deepEqual([e.status, e.code], [404, "not_found"]);
    assert.ok(e.detail);
    return true;
  });
  await assert.rejects(client.askStart(visitor.conversationId, "x".repeat(601)), (e: unknown) => {
    assert.ok(e instanceof ApiError);
    assert.deepEqual([e.status, e.code], [422, "validation_failed"]);
    assert.deepEqual(e.errors.map((f) => f.field), ["/message"]);
    return true;
  });
  const stranger = new Client({ baseUrl: server.url, apiKey: "sk_not_a_key" });
  await assert.rejects(stranger.interactions.get("int_00000000000000000000000000"), { status: 401, code: "unauthorized" });
});
