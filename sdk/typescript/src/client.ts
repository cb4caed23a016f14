// The client: ask and wait, guarded calls, the inbox, conversations,
// endpoints and the deliveries log.
import { ApiError, BlockhookError, Declined, Expired, Withdrawn } from "./errors.js";
import { backoff, type Call, isNetworkError, send, sleep, type Transport } from "./http.js";
import type {
  Answer,
  AskAttachment,
  AskOption,
  Conversation,
  CreatedConversation,
  CreatedEndpoint,
  Endpoint,
  EndpointChange,
  EndpointFields,
  EventRecord,
  EventWithAttempts,
  Interaction,
  InteractionResponse,
  Message,
} from "./types.js";

/** The longest `wait` the answer route takes (§12). */
const MAX_WAIT_S = 50;

export interface ClientOptions {
  /** Default: `BLOCKHOOK_URL`, else `http://127.0.0.1:8080`. */
  baseUrl?: string;
  /** The chatbot's API key (`sk_…`). Default: `BLOCKHOOK_API_KEY`. */
  apiKey?: string;
  /** Retries of a request answered 429 or 503 (default 3). */
  maxRetries?: number;
  /** Timeout of one request in ms (default 30 000; the answer's long poll takes longer). */
  timeoutMs?: number;
  /** Your own fetch (a proxy agent, instrumentation). */
  fetch?: typeof fetch;
}

export interface AskOptions {
  options?: AskOption[];
  multiple?: boolean;
  custom?: boolean;
  accept?: string;
  decline?: string;
  comment?: boolean;
  title?: string;
  /** Seconds, or `"90s"`, `"10m"`, `"2h"`, `"1d"` (default 600 s). */
  timeout?: number | string;
  attachment?: AskAttachment;
  /** Stops waiting (the question stays open until its timeout). */
  signal?: AbortSignal;
}

export interface GuardOptions extends AskOptions {
  /** The question, or a function of the call's arguments; by default it shows the call (`Run deploy("prod")?`). */
  message?: string | ((...args: never) => string);
}

const UNITS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 };

/** A duration in seconds: a number of seconds, or `"500ms"`, `"90s"`, `"10m"`, `"2h"`, `"1d"`. */
export function seconds(d: number | string): number {
  if (typeof d === "number") return d;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(d.trim());
  if (!m) throw new BlockhookError(`not a duration: ${JSON.stringify(d)}`);
  return Number(m[1]) * (UNITS[m[2] as string] as number);
}

function env(name: string): string | undefined {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
}

function newKey(): string {
  return globalThis.crypto.randomUUID();
}

/** Throws unless the answer lets a guarded call run. */
export function requireApproved(answer: Answer): void {
  if (answer.answer === "accepted" || answer.answer === "chose" || answer.answer === "custom") return;
  if (answer.answer === "declined") throw new Declined(answer);
  if (answer.answer === "expired") throw new Expired(answer);
  throw new Withdrawn(answer);
}

function callText(name: string, args: unknown[]): string {
  const text = `Run ${name || "this"}(${args.map((a) => JSON.stringify(a) ?? String(a)).join(", ")})?`;
  return text.length <= 600 ? text : `${text.slice(0, 597)}…?`;
}

type Page<T> = { data: T[]; page: { has_more: boolean; next_cursor?: string | null } };

/** A blockhook client for one chatbot (its API key). */
export class Client {
  readonly interactions: Interactions;
  readonly conversations: Conversations;
  readonly endpoints: Endpoints;
  readonly events: Events;
  readonly #t: Transport;

  constructor(options: ClientOptions = {}) {
    const apiKey = options.apiKey ?? env("BLOCKHOOK_API_KEY");
    if (!apiKey) throw new BlockhookError("no API key: pass apiKey or set BLOCKHOOK_API_KEY");
    const baseUrl = (options.baseUrl ?? env("BLOCKHOOK_URL") ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
    this.#t = {
      baseUrl,
      apiKey,
      maxRetries: options.maxRetries ?? 3,
      timeoutMs: options.timeoutMs ?? 30_000,
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
    };
    this.interactions = new Interactions(this);
    this.conversations = new Conversations(this);
    this.endpoints = new Endpoints(this);
    this.events = new Events(this);
  }

  /** @internal */
  request<T>(call: Call): Promise<T> {
    return send<T>(this.#t, call);
  }

  /** @internal Every item of a collection, newest first, page by page. */
  async *paginate<T>(path: string, query: Call["query"] = {}): AsyncGenerator<T> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.request<Page<T>>({ method: "GET", path, query: { ...query, cursor } });
      yield* page.data;
      if (!page.page.has_more || !page.page.next_cursor) return;
      cursor = page.page.next_cursor;
    }
  }

  /**
   * Asks a person in the conversation and waits for the answer. The
   * question is asked without holding a connection and the answer is
   * long-polled, so the wait survives dropped connections and a restart of
   * the server: it re-attaches until the question's timeout.
   */
  async ask(conversationId: string, message: string, options: AskOptions = {}): Promise<Answer> {
    const id = await this.askStart(conversationId, message, options);
    return this.waitAnswer(id, { timeout: options.timeout ?? 600, signal: options.signal });
  }

  /** Asks without waiting; returns the interaction id (see `waitAnswer`). */
  async askStart(conversationId: string, message: string, options: AskOptions = {}): Promise<string> {
    const { signal, ...rest } = options;
    const body = { message, wait: false, timeout: 600, ...rest };
    const r = await this.request<{ interaction_id: string }>({
      method: "POST",
      path: `/api/v1/conversations/${encodeURIComponent(conversationId)}/ask`,
      body,
      signal,
    });
    return r.interaction_id;
  }

  /** Waits for the answer of a question asked with `askStart`. */
  async waitAnswer(
    interactionId: string,
    options: { timeout?: number | string; signal?: AbortSignal } = {},
  ): Promise<Answer> {
    // The question's timeout, plus a minute for a restarting server to
    // come back and say `expired`.
    const giveUp = Date.now() + (seconds(options.timeout ?? 600) + 60) * 1000;
    for (let failures = 0; ; ) {
      const wait = Math.floor(Math.max(1, Math.min(MAX_WAIT_S, (giveUp - Date.now()) / 1000)));
      let r: Omit<Answer, "interactionId"> | { answer: "pending" };
      try {
        r = await this.request({
          method: "GET",
          path: `/api/v1/interactions/${encodeURIComponent(interactionId)}/answer`,
          query: { wait },
          timeoutMs: (wait + 15) * 1000,
          retry: false,
          signal: options.signal,
        });
      } catch (e) {
        const passing =
          isNetworkError(e, options.signal) || (e instanceof ApiError && [429, 502, 503, 504].includes(e.status));
        if (!passing || Date.now() >= giveUp) throw e;
        await sleep(Math.min(backoff(failures++), Math.max(0, (giveUp - Date.now()) / 1000)), options.signal);
        continue;
      }
      failures = 0;
      if (r.answer !== "pending") return { ...r, interactionId };
    }
  }

  /**
   * Guards a function with a question: it runs only when the person accepts
   * (or chooses an option); otherwise `Declined`, `Expired` or `Withdrawn`
   * is thrown and it does not run.
   */
  requireAnswer(
    conversationId: string,
    options: GuardOptions = {},
  ): <A extends unknown[], R>(fn: (...args: A) => R | Promise<R>) => (...args: A) => Promise<R> {
    const { message, ...ask } = options;
    return <A extends unknown[], R>(fn: (...args: A) => R | Promise<R>) =>
      async (...args: A): Promise<R> => {
        const text = typeof message === "function"
          ? (message as (...a: A) => string)(...args)
          : message ?? callText(fn.name, args);
        requireApproved(await this.ask(conversationId, text, ask));
        return await fn(...args);
      };
  }
}

/** The inbox (§6): every interactive block of a bot message. */
export class Interactions {
  constructor(private readonly c: Client) {}

  /** Every matching interaction, newest first, fetching pages as needed. */
  list(filter: { status?: string; conversationId?: string; limit?: number } = {}): AsyncGenerator<Interaction> {
    return this.c.paginate<Interaction>("/api/v1/interactions", {
      status: filter.status,
      conversation_id: filter.conversationId,
      limit: filter.limit ?? 100,
    });
  }

  get(id: string): Promise<Interaction> {
    return this.c.request({ method: "GET", path: `/api/v1/interactions/${encodeURIComponent(id)}` });
  }

  /**
   * Answers as a member. An `Idempotency-Key` is made for the call (or
   * taken from `idempotencyKey`) and kept for its retries: an answer sent
   * twice takes effect once.
   */
  respond(id: string, body: InteractionResponse, options: { idempotencyKey?: string } = {}): Promise<Interaction> {
    return this.c.request({
      method: "POST",
      path: `/api/v1/interactions/${encodeURIComponent(id)}/responses`,
      body,
      headers: { "Idempotency-Key": options.idempotencyKey ?? newKey() },
    });
  }

  /** Withdraws a pending question (§15). */
  cancel(id: string): Promise<Interaction> {
    return this.c.request({ method: "POST", path: `/api/v1/interactions/${encodeURIComponent(id)}/cancel` });
  }
}

/** Conversations started by the bot (§16). */
export class Conversations {
  constructor(private readonly c: Client) {}

  create(options: { displayName?: string } = {}): Promise<CreatedConversation> {
    const body = options.displayName === undefined ? {} : { display_name: options.displayName };
    return this.c.request({ method: "POST", path: "/api/v1/conversations", body });
  }

  list(options: { limit?: number } = {}): AsyncGenerator<Conversation> {
    return this.c.paginate<Conversation>("/api/v1/conversations", { limit: options.limit ?? 100 });
  }

  /** Erases the conversation and everything in it (§11). */
  async delete(id: string): Promise<void> {
    await this.c.request({ method: "DELETE", path: `/api/v1/conversations/${encodeURIComponent(id)}` });
  }

  /** Posts a bot message (§3). */
  postMessage(id: string, body: { text?: string; blocks?: unknown[]; metadata?: Record<string, unknown> }): Promise<Message> {
    return this.c.request({ method: "POST", path: `/api/v1/conversations/${encodeURIComponent(id)}/messages`, body });
  }
}

/** The chatbot's webhook endpoints (§13). */
export class Endpoints {
  constructor(private readonly c: Client) {}

  /** The answer carries the endpoint's `signing_secret`. */
  create(url: string, fields: EndpointFields = {}): Promise<CreatedEndpoint> {
    return this.c.request({ method: "POST", path: "/api/v1/endpoints", body: { url, ...fields } });
  }

  /** Every endpoint, the default (the chatbot's `webhook_url`) first, page by page. */
  list(options: { limit?: number } = {}): AsyncGenerator<Endpoint> {
    return this.c.paginate<Endpoint>("/api/v1/endpoints", { limit: options.limit ?? 100 });
  }

  get(id: string): Promise<Endpoint> {
    return this.c.request({ method: "GET", path: `/api/v1/endpoints/${encodeURIComponent(id)}` });
  }

  /** Changes some settings; `null` sets one back to its default. */
  update(id: string, changes: EndpointChange): Promise<Endpoint> {
    return this.c.request({ method: "PATCH", path: `/api/v1/endpoints/${encodeURIComponent(id)}`, body: changes });
  }

  /** Deletes an endpoint and its deliveries not yet made; the default one → `ApiError` 409 `default_endpoint`. */
  async delete(id: string): Promise<void> {
    await this.c.request({ method: "DELETE", path: `/api/v1/endpoints/${encodeURIComponent(id)}` });
  }

  /** A new signing secret; the old one keeps signing too for 24 h. */
  async rotateSecret(id: string): Promise<string> {
    const r = await this.c.request<{ signing_secret: string }>({
      method: "POST",
      path: `/api/v1/endpoints/${encodeURIComponent(id)}/rotate-secret`,
    });
    return r.signing_secret;
  }

  /** Sends a `webhook.test` to this endpoint only; returns its event id. */
  async test(id: string): Promise<string> {
    const r = await this.c.request<{ event_id: string }>({
      method: "POST",
      path: `/api/v1/endpoints/${encodeURIComponent(id)}/test`,
    });
    return r.event_id;
  }
}

/** The deliveries log (§3, §13). */
export class Events {
  constructor(private readonly c: Client) {}

  /** The event with its attempts (and, with endpoints, its deliveries). */
  get(id: string): Promise<EventWithAttempts> {
    return this.c.request({ method: "GET", path: `/api/v1/events/${encodeURIComponent(id)}` });
  }

  list(filter: { status?: string; type?: string; endpointId?: string; limit?: number } = {}): AsyncGenerator<EventRecord> {
    return this.c.paginate<EventRecord>("/api/v1/events", {
      status: filter.status,
      type: filter.type,
      endpoint_id: filter.endpointId,
      limit: filter.limit ?? 100,
    });
  }

  /** Delivers the event again (new attempts, the same `event_id` and body). */
  async redeliver(id: string, options: { endpointId?: string } = {}): Promise<void> {
    const body = options.endpointId === undefined ? undefined : { endpoint_id: options.endpointId };
    await this.c.request({ method: "POST", path: `/api/v1/events/${encodeURIComponent(id)}/redeliver`, body });
  }

  /** Redelivers every `dead` or `failed` event; returns how many. */
  async redeliverAll(status: "dead" | "failed", options: { since?: string; endpointId?: string } = {}): Promise<number> {
    const body = { status, since: options.since, endpoint_id: options.endpointId };
    const r = await this.c.request<{ count: number }>({ method: "POST", path: "/api/v1/events/redeliver", body });
    return r.count;
  }

  /** Sends a signed `webhook.test` to the default endpoint; returns its event id. */
  async test(): Promise<string> {
    const r = await this.c.request<{ event_id: string }>({ method: "POST", path: "/api/v1/events/test", body: {} });
    return r.event_id;
  }
}
