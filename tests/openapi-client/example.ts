// A typed client of blockhook, generated from /openapi.json by
// openapi-typescript and used through openapi-fetch. `tsc --noEmit` must
// accept it: a conversation, a bot message with buttons, a click, and an
// answer to an interaction.
import createClient from "openapi-fetch";
import type { components, paths } from "./generated/api";

type Message = components["schemas"]["Message"];
type Interaction = components["schemas"]["Interaction"];

export async function walkThrough(base: string, chatbotId: string, apiKey: string): Promise<Interaction> {
  const client = createClient<paths>({ baseUrl: base });

  const conv = await client.POST("/widget/v1/chatbots/{chatbot_id}/conversations", {
    params: { path: { chatbot_id: chatbotId } },
    body: { display_name: "Ada" },
  });
  if (!conv.data) throw new Error(conv.error?.detail ?? "no conversation");
  const { conversation_id, visitor_token } = conv.data;

  const bot = { Authorization: `Bearer ${apiKey}` };
  const posted = await client.POST("/api/v1/conversations/{cid}/messages", {
    params: { path: { cid: conversation_id } },
    headers: bot,
    body: {
      text: "Want a callback?",
      blocks: [
        {
          type: "actions",
          block_id: "b1",
          elements: [
            { type: "button", action_id: "yes", label: "Yes please", value: "callback" },
            { type: "button", action_id: "no", label: "No" },
          ],
        },
      ],
    },
  });
  if (!posted.data) throw new Error(posted.error?.detail ?? "not posted");
  const message: Message = posted.data;

  const clicked = await client.POST("/widget/v1/messages/{mid}/clicks", {
    params: { path: { mid: message.id } },
    headers: { Authorization: `Bearer ${visitor_token}` },
    body: { block_id: "b1", action_id: "yes" },
  });
  if (clicked.error) {
    // A problem: code and pointers are typed.
    const fields: string[] = (clicked.error.errors ?? []).map((e) => `${e.field}: ${e.code}`);
    throw new Error(`${clicked.error.code} ${fields.join(", ")}`);
  }
  const state = clicked.data.message.blocks[0]?.state;
  console.log(state?.disabled, state?.chosen_action_id);

  const pending = await client.GET("/api/v1/interactions", {
    params: { query: { status: "pending", conversation_id } },
    headers: bot,
  });
  const first = pending.data?.data[0];
  if (!first) throw new Error("nothing pending");

  const answered = await client.POST("/api/v1/interactions/{id}/responses", {
    params: { path: { id: first.id }, header: { "Idempotency-Key": crypto.randomUUID() } },
    headers: bot,
    body: { type: "choice", option_ids: ["no"] },
  });
  if (!answered.data) throw new Error(answered.error?.code ?? "not answered");
  return answered.data;
}
