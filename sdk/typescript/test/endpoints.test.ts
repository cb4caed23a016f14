// Endpoints (§13) through client.endpoints, and the deliveries log read and
// redelivered per endpoint.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { ApiError, Client, type Endpoint, type EventRecord, verifyWebhook } from "../src/index.js";
import { Bot, Receiver, Server, until } from "./helpers.js";

const server = new Server();
let receiver: Receiver;
let other: Receiver;
let bot: Bot;
let client: Client;

before(async () => {
  await server.start();
  receiver = await new Receiver().start();
  other = await new Receiver().start();
  bot = await server.bot(receiver.url);
  client = new Client({ baseUrl: server.url, apiKey: bot.apiKey });
});

after(async () => {
  await receiver.close();
  await other.close();
  await server.stop();
});

async function all<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const i of items) out.push(i);
  return out;
}

function problem(status: number, code: string) {
  return (e: unknown) => {
    assert.ok(e instanceof ApiError);
    assert.deepEqual([e.status, e.code], [status, code]);
    return true;
  };
}

test("endpoints are created, listed, changed, tested, rotated and deleted", async () => {
  const buys = await client.endpoints.create(other.url, {
    description: "buys",
    event_types: ["interaction.button_clicked"],
    filter: { action_id: ["buy"] },
  });
  assert.match(buys.id, /^ep_/);
  assert.match(buys.signing_secret, /^whsec_/);
  assert.deepEqual([buys.default, buys.replies, buys.enabled], [false, false, true]);
  assert.deepEqual(buys.filter, { action_id: ["buy"] });
  const paused = await client.endpoints.create(`${other.url}/paused`, { enabled: false });
  assert.deepEqual([paused.enabled, paused.disabled_reason], [false, "paused"]);

  // Pages of one, the default endpoint (the chatbot's webhook_url) first.
  const listed: Endpoint[] = await all(client.endpoints.list({ limit: 1 }));
  assert.deepEqual(listed.slice(1).map((e) => e.id), [buys.id, paused.id]);
  assert.deepEqual([listed[0]?.default, listed[0]?.url], [true, receiver.url]);
  assert.ok(listed.every((e) => !("signing_secret" in e)));

  const changed = await client.endpoints.update(buys.id, { rate_limit: "5/s", headers: { "X-Team": "sales" } });
  assert.deepEqual([changed.rate_limit, changed.headers, changed.description], ["5/s", { "X-Team": "sales" }, "buys"]);
  assert.deepEqual(await client.endpoints.get(buys.id), changed);
  assert.equal((await client.endpoints.update(buys.id, { rate_limit: null })).rate_limit, null);

  // A test goes to that endpoint only, signed with its own secret.
  const eventId = await client.endpoints.test(buys.id);
  const delivery = await other.next("webhook.test", eventId);
  const event = verifyWebhook(buys.signing_secret, delivery.headers, delivery.body);
  assert.deepEqual([event.type, event.type === "webhook.test" && event.event_id], ["webhook.test", eventId]);
  assert.equal(delivery.headers["x-team"], "sales");
  const record = await until(async () => {
    const r = await client.events.get(eventId);
    return r.status === "succeeded" ? r : undefined;
  }, "the test to be delivered");
  assert.deepEqual(record.deliveries, [{ endpoint_id: buys.id, status: "succeeded", attempts: 1 }]);
  assert.deepEqual(record.attempts.map((a) => a.endpoint_id), [buys.id]);
  assert.deepEqual((await all(client.events.list({ endpointId: buys.id }))).map((e) => e.event_id), [eventId]);
  assert.deepEqual(await all(client.events.list({ endpointId: paused.id })), []);

  // Redelivered to that endpoint: the same webhook-id again.
  await client.events.redeliver(eventId, { endpointId: buys.id });
  await until(() => other.got.filter((d) => d.headers["webhook-id"] === eventId).length === 2, "the redelivery");
  await assert.rejects(client.events.redeliver(eventId, { endpointId: paused.id }), problem(404, "not_found"));

  // A new secret signs what follows.
  const secret = await client.endpoints.rotateSecret(buys.id);
  assert.match(secret, /^whsec_/);
  assert.notEqual(secret, buys.signing_secret);
  const next = await client.endpoints.test(buys.id);
  const rotated = await other.next("webhook.test", next);
  assert.equal(verifyWebhook(secret, rotated.headers, rotated.body).type, "webhook.test");

  await client.endpoints.delete(buys.id);
  await assert.rejects(client.endpoints.get(buys.id), problem(404, "not_found"));
  await assert.rejects(client.endpoints.delete(listed[0]?.id ?? ""), problem(409, "default_endpoint"));
  assert.deepEqual((await all(client.endpoints.list())).map((e) => e.id), [listed[0]?.id, paused.id]);
});

test("an endpoint gets only the clicks its filter matches", async () => {
  const visitor = await bot.visitor();
  const buys = await client.endpoints.create(`${other.url}/buys`, { filter: { action_id: ["buy"] } });
  for (const choice of ["skip", "buy"]) {
    const asked = client.ask(visitor.conversationId, "Buy it?", { options: ["buy", "skip"] });
    await visitor.click(choice);
    assert.deepEqual((await asked).options, [choice]);
  }
  const delivery = await other.next("interaction.button_clicked", visitor.conversationId);
  const event = verifyWebhook(buys.signing_secret, delivery.headers, delivery.body);
  assert.equal(event.type === "interaction.button_clicked" && event.action_id, "buy");
  const routed: EventRecord[] = await all(client.events.list({ endpointId: buys.id }));
  assert.deepEqual(routed.map((e) => (e.payload as { action_id?: string }).action_id), ["buy"]);
  // The default endpoint got both.
  await until(
    () => receiver.got.filter((d) => d.body.includes(visitor.conversationId) && d.body.includes("button_clicked")).length === 2,
    "both clicks at the default endpoint",
  );
});

test("a bad endpoint is refused with pointers", async () => {
  await assert.rejects(
    client.endpoints.create("http://127.0.0.1:9/hook", {
      event_types: ["interaction.button_clicked", "order.paid" as "message.received"],
      filter: { action_id: [] },
      headers: { Host: "example.com" },
    }),
    (e: unknown) => {
      problem(422, "validation_failed")(e);
      const errors = (e as ApiError).errors.map((f) => [f.field, f.code]).sort();
      assert.deepEqual(errors, [
        ["/event_types/1", "unknown_event_type"],
        ["/filter/action_id", "invalid_filter"],
        ["/headers/Host", "forbidden_header"],
      ]);
      return true;
    },
  );
});
