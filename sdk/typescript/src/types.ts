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
export type CreatedConversation = S["CreatedConversation"] & { widget_url?: string };

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
export interface Conversation {
  id: string;
  visitor: Person;
  created_at: string;
  last_message_at: string | null;
  pending_interactions: number;
}

/** A webhook endpoint (§13). */
export interface Endpoint {
  id: string;
  url: string;
  description: string | null;
  default: boolean;
  event_types: string[] | null;
  filter: Record<string, Array<string | number | boolean>> | null;
  replies: boolean;
  rate_limit: string | null;
  headers: Record<string, string>;
  enabled: boolean;
  disabled_reason: string | null;
  created_at: string;
  updated_at: string;
  /** On creation and rotation only. */
  signing_secret?: string;
}

export type EndpointFields = Partial<
  Pick<Endpoint, "description" | "event_types" | "filter" | "replies" | "rate_limit" | "headers" | "enabled">
>;
