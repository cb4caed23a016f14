"""The errors the client raises."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from ._types import Answer, FieldError


class BlockhookError(Exception):
    """Base of every error this package raises on its own."""


class ApiError(BlockhookError):
    """The server answered with an error (an RFC 9457 problem).

    ``code`` is the problem's stable code (``not_found``, ``validation_failed``,
    ``dialog_pending`` …), ``errors`` the bad fields of a 422 (each with a JSON
    pointer ``field``), ``problem`` the whole body as sent.
    """

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        errors: list[FieldError] | None = None,
        problem: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.errors: list[FieldError] = list(errors or [])
        self.problem: dict[str, Any] = dict(problem or {})
        self.retry_after = retry_after

    @property
    def interaction_id(self) -> str | None:
        """With ``dialog_pending``: the unanswered question in the way (``int_…``),
        which ``client.interactions.cancel`` withdraws."""
        value = self.problem.get("interaction_id")
        return value if isinstance(value, str) else None


class NotApproved(BlockhookError):
    """A question guarding a call ended without the person approving it."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(f"the question was {answer.answer}")
        self.answer = answer


class Declined(NotApproved):
    """The person declined; ``comment`` is theirs, if they left one."""

    @property
    def comment(self) -> str | None:
        return self.answer.comment


class Expired(NotApproved):
    """Nobody answered before the question's timeout."""


class Withdrawn(NotApproved):
    """The question was withdrawn (cancelled, or a person took the conversation over)."""


class WebhookVerificationError(BlockhookError):
    """A webhook's signature, timestamp or body did not check out."""
