// The API's shapes, taken from the types generated from the server's
// /openapi.json (openapi.ts, by scripts/generate.mjs), so they cannot drift.
import type { components } from "./openapi.js";

type S = components["schemas"];

export type FieldError = S["FieldError"];
export type Problem = S["Problem"];
export type Person = S["Person"];
export type Message = S["Message"];
export type AskOption = S["AskOption"];
export type AskAttachment = S["AskAttachment"];
/** An answer from the inbox, by interaction type. */
export type InteractionResponse = S["Answer"];
export type Interaction = Omit<S["Interaction"], "response"> & {
  /** The answer exactly as sent, plus `submitted_at`; null while unanswered. */
  response?: Record<string, unknown> | null;
};
export type EventRecord = S["Event"];
export type EventWithAttempts = S["EventWithAttempts"];
/** A conversation the bot started (§16), with the link that opens the widget on it. */
export type CreatedConversation = S["StartedConversation"];

/** How a question ended (§7). */
export interface Answer {
  answer: "chose" | "custom" | "accepted" | "declined" | "expired" | "withdrawn";
  /** With `chose`: the chosen option ids. */
  options?: string[] | null;
  /** With `custom`: the text. */
  text?: string | null;
  /** With `declined`: the comment, if one was left. */
  comment?: string | null;
  interactionId: string;
}

/** A conversation as listed by the bot (§16). */
export type Conversation = S["ConversationItem"];

/** A webhook endpoint (§13). */
export type Endpoint = S["Endpoint"];
/** A new endpoint, with its `signing_secret` (shown on creation and rotation only). */
export type CreatedEndpoint = S["CreatedEndpoint"];
/** The body of `POST /api/v1/endpoints`. */
export type NewEndpoint = S["NewEndpoint"];
/** The body of `PATCH /api/v1/endpoints/{id}`: every key optional, `null` resets a setting. */
export type EndpointChange = S["EndpointChange"];
/** What `endpoints.create` takes beside the url. */
export type EndpointFields = Omit<NewEndpoint, "url">;
/** An event's delivery to one endpoint (§13). */
export type Delivery = S["Delivery"];
/** One delivery attempt, with the endpoint it went to. */
export type Attempt = S["Attempt"];
