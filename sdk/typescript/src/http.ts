// Sending one request: auth, JSON, problems as ApiError, and retries with
// backoff on 429/503 honouring Retry-After.
import { ApiError } from "./errors.js";
import type { FieldError } from "./types.js";

/** Retry-After longer than this is not waited out: the error is thrown. */
const MAX_RETRY_AFTER_S = 60;

export interface Call {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, string | number | undefined | null>;
  body?: unknown;
  headers?: Record<string, string>;
  timeoutMs?: number;
  /** false: the caller handles failures itself (the answer's long poll). */
  retry?: boolean;
  signal?: AbortSignal;
}

export interface Transport {
  baseUrl: string;
  apiKey: string;
  maxRetries: number;
  timeoutMs: number;
  fetch: typeof fetch;
}

/** Exponential backoff with jitter: attempt 0 → up to 0.5 s, doubling to `cap`. */
export function backoff(attempt: number, base = 0.5, cap = 8): number {
  const high = Math.min(cap, base * 2 ** attempt);
  return base / 2 + Math.random() * Math.max(0, high - base / 2);
}

export function retryAfter(headers: Headers): number | null {
  const value = headers.get("retry-after");
  if (value === null) return null;
  const n = Number(value);
  if (Number.isFinite(n)) return Math.max(0, n);
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, (at - Date.now()) / 1000);
}

export function sleep(seconds: number, signal?: AbortSignal): Promise<void> {
  return new Promise((ok, fail) => {
    if (signal?.aborted) return fail(signal.reason);
    const t = setTimeout(ok, seconds * 1000);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      fail(signal.reason);
    }, { once: true });
  });
}

function idempotent(call: Call): boolean {
  return call.method === "GET" || call.headers?.["Idempotency-Key"] !== undefined;
}

/** A connection that was never made: nothing was sent, so trying again is safe. */
function notConnected(e: unknown): boolean {
  const code = (e as { cause?: { code?: string } })?.cause?.code;
  return code === "ECONNREFUSED" || code === "UND_ERR_CONNECT_TIMEOUT" || code === "ENOTFOUND";
}

/**
 * A network failure: fetch's TypeError, or a request that timed out (no
 * answer in time, e.g. a server that hangs) — as opposed to the caller's
 * own abort or an ApiError.
 */
export function isNetworkError(e: unknown, callerSignal?: AbortSignal): boolean {
  if (e instanceof TypeError) return true;
  return (e as { name?: unknown })?.name === "TimeoutError" && !callerSignal?.aborted;
}

async function apiError(r: Response): Promise<ApiError> {
  const text = await r.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const after = retryAfter(r.headers);
  if (body && typeof body === "object" && typeof (body as { code?: unknown }).code === "string") {
    const p = body as { code: string; detail?: string; errors?: FieldError[] | null };
    return new ApiError(r.status, p.code, String(p.detail ?? ""), p.errors ?? [], p as Record<string, unknown>, after);
  }
  return new ApiError(r.status, `http_${r.status}`, text.slice(0, 200) || r.statusText, [], {}, after);
}

export async function send<T>(t: Transport, call: Call): Promise<T> {
  const url = new URL(t.baseUrl + call.path);
  for (const [k, v] of Object.entries(call.query ?? {})) {
    if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
  }
  const headers: Record<string, string> = { authorization: `Bearer ${t.apiKey}`, ...call.headers };
  if (call.body !== undefined) headers["content-type"] = "application/json";
  for (let attempt = 0; ; attempt++) {
    const mayRetry = call.retry !== false && attempt < t.maxRetries;
    const timeout = AbortSignal.timeout(call.timeoutMs ?? t.timeoutMs);
    const signal = call.signal ? AbortSignal.any([call.signal, timeout]) : timeout;
    let r: Response;
    try {
      r = await t.fetch(url, {
        method: call.method,
        headers,
        body: call.body === undefined ? undefined : JSON.stringify(call.body),
        signal,
      });
    } catch (e) {
      if (mayRetry && isNetworkError(e, call.signal) && (notConnected(e) || idempotent(call))) {
        await sleep(backoff(attempt), call.signal);
        continue;
      }
      throw e;
    }
    if (r.status === 429 || r.status === 503) {
      const after = retryAfter(r.headers);
      if (mayRetry && (after === null || after <= MAX_RETRY_AFTER_S)) {
        await r.body?.cancel();
        await sleep(Math.max(after ?? 0, backoff(attempt)), call.signal);
        continue;
      }
    }
    if (r.status >= 400) throw await apiError(r);
    if (r.status === 204) return undefined as T;
    const text = await r.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }
}
