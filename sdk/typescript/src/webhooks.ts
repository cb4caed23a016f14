// Verifying webhooks (Standard Webhooks signatures) and typing their events (§4).
import { Webhook, WebhookVerificationError as StdError } from "standardwebhooks";
import { WebhookVerificationError } from "./errors.js";
import type { components } from "./openapi.js";

type S = components["schemas"];

export type ButtonClicked = S["ButtonClickedEvent"];
export type FormSubmitted = S["FormSubmittedEvent"];
export type MessageReceived = S["MessageReceivedEvent"];
/** `webhook.test`: sent on request to check an endpoint. */
export interface WebhookTest {
  api_version: string;
  block_kit_version: string;
  event: "webhook.test";
  type: "webhook.test";
  event_id: string;
  chatbot_id: string;
  sent_at: string;
  delivery_attempt: number;
}
/** A verified event of a type this version of the package does not know. */
export interface UnknownEvent {
  type: "unknown";
  raw: Record<string, unknown>;
}
/** A webhook's event; switch on `type`. */
export type WebhookEvent = ButtonClicked | FormSubmitted | MessageReceived | WebhookTest | UnknownEvent;

const KNOWN = new Set(["interaction.button_clicked", "interaction.form_submitted", "message.received", "webhook.test"]);

export type HeadersLike = Headers | Record<string, string | string[] | undefined>;

function plainHeaders(headers: HeadersLike): Record<string, string> {
  const out: Record<string, string> = {};
  const entries: Iterable<[string, string | string[] | undefined]> =
    typeof (headers as Headers).entries === "function" && typeof (headers as Headers).get === "function"
      ? (headers as Headers).entries()
      : Object.entries(headers);
  for (const [k, v] of entries) {
    if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(" ") : v;
  }
  return out;
}

/**
 * Verifies a delivery and returns its typed event. `secret` is the
 * endpoint's `whsec_…` secret, or several (during a rotation either may
 * sign). `body` must be the raw body as received (a string or bytes). The
 * `webhook-timestamp` must be within 5 minutes of now.
 */
export function verifyWebhook(secret: string | string[], headers: HeadersLike, body: string | Uint8Array): WebhookEvent {
  const secrets = typeof secret === "string" ? [secret] : secret;
  if (secrets.length === 0) throw new WebhookVerificationError("no secret given");
  const plain = plainHeaders(headers);
  let reason = "no matching signature";
  for (const s of secrets) {
    let wh: Webhook;
    try {
      wh = new Webhook(s);
    } catch (e) {
      throw new WebhookVerificationError(`bad secret: ${(e as Error).name}`);
    }
    try {
      wh.verify(body, plain, { jsonParse: false });
    } catch (e) {
      if (e instanceof StdError) {
        reason = e.message;
        continue;
      }
      throw e;
    }
    let data: unknown;
    try {
      data = JSON.parse(typeof body === "string" ? body : new TextDecoder().decode(body));
    } catch (e) {
      throw new WebhookVerificationError(`the body is not JSON: ${(e as Error).message}`);
    }
    return parseEvent(data);
  }
  throw new WebhookVerificationError(reason);
}

/** A webhook body (already verified) as its typed event. */
export function parseEvent(data: unknown): WebhookEvent {
  if (!data || typeof data !== "object" || typeof (data as { type?: unknown }).type !== "string") {
    throw new WebhookVerificationError("the body is not an event");
  }
  const event = data as Record<string, unknown>;
  if (!KNOWN.has(event.type as string)) return { type: "unknown", raw: event };
  return event as unknown as WebhookEvent;
}
