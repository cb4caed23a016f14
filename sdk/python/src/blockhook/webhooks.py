"""Verifying webhooks (Standard Webhooks signatures) and typing their events (§4)."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any, Mapping, Sequence, TypeVar, Union

from standardwebhooks.webhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError as _StdError

from ._errors import WebhookVerificationError


@dataclass(frozen=True)
class User:
    """Who answered: ``kind`` is ``visitor`` or ``member``."""

    kind: str
    id: str
    display_name: str


@dataclass(frozen=True)
class ButtonClicked:
    """``interaction.button_clicked``: a person clicked a button."""

    type: str
    event_id: str
    chatbot_id: str
    conversation_id: str
    message_id: str
    block_id: str
    action_id: str
    value: str
    label: str
    message_metadata: dict[str, Any]
    user: User
    clicked_at: str
    response_url: str
    api_version: str
    raw: dict[str, Any]


@dataclass(frozen=True)
class FormSubmitted:
    """``interaction.form_submitted``: a person sent a form; ``values`` are typed."""

    type: str
    event_id: str
    chatbot_id: str
    conversation_id: str
    message_id: str
    block_id: str
    form_id: str
    values: dict[str, Any]
    message_metadata: dict[str, Any]
    user: User
    submitted_at: str
    response_url: str
    api_version: str
    raw: dict[str, Any]


@dataclass(frozen=True)
class MessageReceived:
    """``message.received``: a visitor wrote a message."""

    type: str
    event_id: str
    chatbot_id: str
    conversation_id: str
    message_id: str
    user: User
    text: str
    received_at: str
    response_url: str
    api_version: str
    raw: dict[str, Any]


@dataclass(frozen=True)
class WebhookTest:
    """``webhook.test``: sent on request to check an endpoint."""

    type: str
    event_id: str
    chatbot_id: str
    sent_at: str
    api_version: str
    raw: dict[str, Any]


@dataclass(frozen=True)
class UnknownEvent:
    """A verified event of a type this version of the package does not know."""

    type: str
    event_id: str
    raw: dict[str, Any]


Event = Union[ButtonClicked, FormSubmitted, MessageReceived, WebhookTest, UnknownEvent]

_TYPES: dict[str, type[Any]] = {
    "interaction.button_clicked": ButtonClicked,
    "interaction.form_submitted": FormSubmitted,
    "message.received": MessageReceived,
    "webhook.test": WebhookTest,
}
E = TypeVar("E")


def _build(cls: type[E], data: dict[str, Any]) -> E:
    args: dict[str, Any] = {"raw": data}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name == "raw":
            continue
        if f.name not in data:
            raise WebhookVerificationError(f"{data.get('type')} event without {f.name!r}")
        value = data[f.name]
        if f.name == "user":
            value = User(kind=value["kind"], id=value["id"], display_name=value["display_name"])
        args[f.name] = value
    return cls(**args)


def parse_event(data: dict[str, Any]) -> Event:
    """A webhook body (already verified) as its typed event."""
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise WebhookVerificationError("the body is not an event")
    cls = _TYPES.get(data["type"])
    if cls is None:
        return UnknownEvent(type=data["type"], event_id=str(data.get("event_id", "")), raw=data)
    return _build(cls, data)  # type: ignore[no-any-return]


def verify_webhook(
    secret: str | Sequence[str], headers: Mapping[str, str], body: bytes | str
) -> Event:
    """Verifies a delivery and returns its typed event.

    ``secret`` is the endpoint's ``whsec_…`` secret, or several (during a
    rotation, either may sign). ``body`` must be the raw bytes as received.
    The ``webhook-timestamp`` must be within 5 minutes of now. Raises
    ``WebhookVerificationError`` on any mismatch.
    """
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if not secrets:
        raise WebhookVerificationError("no secret given")
    plain = {k.lower(): v for k, v in headers.items()}
    reason = "no matching signature"
    for s in secrets:
        try:
            Webhook(s).verify(body, plain, json_parse=False)
        except _StdError as e:
            reason = str(e)
            continue
        except Exception as e:  # a malformed secret
            raise WebhookVerificationError(f"bad secret: {type(e).__name__}") from None
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise WebhookVerificationError(f"the body is not JSON: {e}") from None
        return parse_event(data)
    raise WebhookVerificationError(reason)
