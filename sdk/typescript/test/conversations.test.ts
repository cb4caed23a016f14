// Conversations started by the bot (§16).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client } from "../src/index.js";
import { Bot, Receiver, Server, Visitor } from "./helpers.js";

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

test("a conversation started by the bot is listed and answered in", async () => {
  const started = await client.conversations.create({ displayName: "Ada" });
  assert.equal(started.visitor.display_name, "Ada");
  const visitor = new Visitor(server.url, started.conversation_id, started.visitor_token);
  const asked = client.ask(visitor.conversationId, "Ready?");
  await visitor.question();
  const listed = [];
  for await (const c of client.conversations.list({ limit: 1 })) listed.push(c);
  assert.equal(listed.find((c) => c.id === visitor.conversationId)?.pending_interactions, 1);
  await visitor.click("accept");
  assert.equal((await asked).answer, "accepted");
});
