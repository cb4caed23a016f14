// Withdrawing a question (§15): the one a dialog_pending names, and one an
// ask is waiting on.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { ApiError, Client, Withdrawn } from "../src/index.js";
import { Bot, Receiver, Server, until } from "./helpers.js";

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

function problem(status: number, code: string) {
  return (e: unknown) => {
    assert.ok(e instanceof ApiError);
    assert.deepEqual([e.status, e.code], [status, code]);
    return true;
  };
}

test("the question in the way is named by dialog_pending and cancelled", async () => {
  const visitor = await bot.visitor();
  const first = await client.askStart(visitor.conversationId, "Deploy on Friday?");
  let inTheWay: ApiError | undefined;
  await assert.rejects(client.askStart(visitor.conversationId, "Deploy on Monday?"), (e: unknown) => {
    inTheWay = e as ApiError;
    return problem(409, "dialog_pending")(e);
  });
  assert.equal(inTheWay?.interactionId, first);

  const cancelled = await client.interactions.cancel(first);
  assert.deepEqual([cancelled.id, cancelled.status], [first, "cancelled"]);
  assert.equal((await client.waitAnswer(first, { timeout: 30 })).answer, "withdrawn");
  assert.deepEqual((await visitor.blocks()).map((b) => b.state.reason), ["withdrawn"]);

  await assert.rejects(client.interactions.cancel(first), problem(409, "interaction_not_pending"));
  await assert.rejects(client.interactions.cancel("int_00000000000000000000000000"), problem(404, "not_found"));
  // The conversation takes a new question now.
  assert.notEqual(await client.askStart(visitor.conversationId, "Deploy on Monday?"), first);
});

test("a guarded function waiting on a cancelled question does not run", async () => {
  const visitor = await bot.visitor();
  const ran: string[] = [];
  const rotate = client.requireAnswer(visitor.conversationId, { message: "Rotate the keys?" })(() => {
    ran.push("rotated");
  });
  // Settled into a value at once: the rejection may come before the
  // assertions below look at it, and is then never left unhandled.
  const call = rotate().then(
    () => undefined,
    (e: unknown) => e,
  );
  await visitor.question();
  const waiting = await until(async () => {
    for await (const i of client.interactions.list({ status: "pending", conversationId: visitor.conversationId })) return i;
    return undefined;
  }, "the question in the inbox");
  await client.interactions.cancel(waiting.id);
  const e = await call;
  assert.ok(e instanceof Withdrawn, `rejected with Withdrawn: ${String(e)}`);
  assert.equal(e.answer.answer, "withdrawn");
  assert.equal(e.answer.interactionId, waiting.id);
  assert.deepEqual(ran, []);
});
