"""Typed shapes of what the API sends back (§6, §7, §13, §16 of the contract).

Collections and objects are plain dicts typed as ``TypedDict``: a field the
server adds later is kept, not dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypedDict, Union

class FieldError(TypedDict):
    field: str
    code: str
    message: str


class Person(TypedDict):
    kind: str
    id: str
    display_name: str


class Interaction(TypedDict):
    id: str
    conversation_id: str
    message_id: str
    block_id: str
    type: str
    status: str
    prompt: str
    payload: dict[str, Any]
    response: dict[str, Any] | None
    expires_at: str | None
    created_at: str
    updated_at: str
    answered_at: str | None


class Attempt(TypedDict):
    endpoint_id: str  # §13: the endpoint it went to
    number: int
    at: str
    status_code: int | None
    duration_ms: int | None
    error: str | None
    response_excerpt: str | None
    request_headers: dict[str, str] | None


class Delivery(TypedDict):
    """An event's delivery to one endpoint (§13)."""

    endpoint_id: str
    status: str
    attempts: int


class _EventExtra(TypedDict, total=False):
    attempts: list[Attempt]  # on GET /api/v1/events/{id}
    deliveries: list[Delivery]  # on GET /api/v1/events/{id}: one per endpoint
    next_attempt_at: str | None
    attempt_count: int


class EventRecord(_EventExtra):
    """An event of the deliveries log."""

    event_id: str
    type: str
    created_at: str
    status: str
    payload: dict[str, Any]


class _EndpointExtra(TypedDict, total=False):
    signing_secret: str  # on creation and rotation only


class Endpoint(_EndpointExtra):
    id: str
    url: str
    description: str
    default: bool
    event_types: list[str] | None
    filter: dict[str, list[FilterValue]] | None
    replies: bool
    rate_limit: str | None
    headers: dict[str, str]
    enabled: bool
    disabled_reason: str | None
    created_at: str
    updated_at: str


class _CreatedConversationExtra(TypedDict, total=False):
    widget_url: str  # §16 (the bot's route); not on the widget's


class CreatedConversation(_CreatedConversationExtra):
    conversation_id: str
    visitor: Person
    visitor_token: str


class Conversation(TypedDict):
    id: str
    visitor: Person
    created_at: str
    last_message_at: str | None
    pending_interactions: int


class Option(TypedDict, total=False):
    """An option of a question: ``id`` (required), ``label``, ``detail``."""

    id: str
    label: str
    detail: str


class Attachment(TypedDict):
    """A file the person can open from the question (``data`` is base64)."""

    filename: str
    content_type: str
    data: str


FilterValue = Union[str, int, float, bool]
"""A value an endpoint's filter allows (§13)."""

EventType = Literal["interaction.button_clicked", "interaction.form_submitted", "message.received"]
"""An event type an endpoint can be limited to (§13)."""

OptionLike = Union[str, Option]
"""A string is the option's id and label."""

AnswerKind = Literal["chose", "custom", "accepted", "declined", "expired", "withdrawn"]


@dataclass(frozen=True)
class Answer:
    """How a question ended (§7).

    ``answer`` is ``chose`` (``options`` holds the chosen ids), ``custom``
    (``text``), ``accepted``, ``declined`` (``comment`` if one was left),
    ``expired`` or ``withdrawn``.
    """

    answer: AnswerKind
    options: list[str] | None = None
    text: str | None = None
    comment: str | None = None
    interaction_id: str | None = None

    @property
    def approved(self) -> bool:
        """The person accepted, chose an option, or wrote their own answer."""
        return self.answer in ("accepted", "chose", "custom")

    @classmethod
    def from_json(cls, body: dict[str, Any], interaction_id: str | None = None) -> Answer:
        return cls(
            answer=body["answer"],
            options=body.get("options"),
            text=body.get("text"),
            comment=body.get("comment"),
            interaction_id=interaction_id or body.get("interaction_id"),
        )
