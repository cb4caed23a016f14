// blockhook: ask a person and wait, answer the inbox, verify and type webhooks.
export { Client, Conversations, Endpoints, Events, Interactions, requireApproved, seconds } from "./client.js";
export type { AskOptions, ClientOptions, GuardOptions } from "./client.js";
export {
  ApiError,
  BlockhookError,
  Declined,
  Expired,
  NotApproved,
  WebhookVerificationError,
  Withdrawn,
} from "./errors.js";
export type * from "./types.js";
export { parseEvent, verifyWebhook } from "./webhooks.js";
export type {
  ButtonClicked,
  FormSubmitted,
  HeadersLike,
  MessageReceived,
  UnknownEvent,
  WebhookEvent,
  WebhookTest,
} from "./webhooks.js";
export type { components, operations, paths } from "./openapi.js";
