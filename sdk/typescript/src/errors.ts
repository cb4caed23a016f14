// The errors the client throws.
import type { Answer, FieldError, Problem } from "./types.js";

/** Base of every error this package throws on its own. */
export class BlockhookError extends Error {
  override name = "BlockhookError";
}

/**
 * The server answered with an error (an RFC 9457 problem): `code` is its
 * stable code (`not_found`, `validation_failed`, `dialog_pending` …),
 * `errors` the bad fields of a 422 (each with a JSON pointer `field`).
 */
export class ApiError extends BlockhookError {
  override name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly errors: FieldError[] = [],
    readonly problem: Partial<Problem> & Record<string, unknown> = {},
    readonly retryAfter: number | null = null,
  ) {
    super(`${status} ${code}: ${detail}`);
  }

  /** With `dialog_pending`: the unanswered question in the way (`int_…`), which `interactions.cancel` withdraws. */
  get interactionId(): string | undefined {
    const id = this.problem.interaction_id;
    return typeof id === "string" ? id : undefined;
  }
}

/** A question guarding a call ended without the person approving it. */
export class NotApproved extends BlockhookError {
  override name = "NotApproved";
  constructor(readonly answer: Answer) {
    super(`the question was ${answer.answer}`);
  }
}

/** The person declined; `comment` is theirs, if they left one. */
export class Declined extends NotApproved {
  override name = "Declined";
  get comment(): string | undefined {
    return this.answer.comment ?? undefined;
  }
}

/** Nobody answered before the question's timeout. */
export class Expired extends NotApproved {
  override name = "Expired";
}

/** The question was withdrawn (cancelled, or a person took the conversation over). */
export class Withdrawn extends NotApproved {
  override name = "Withdrawn";
}

/** A webhook's signature, timestamp or body did not check out. */
export class WebhookVerificationError extends BlockhookError {
  override name = "WebhookVerificationError";
}
