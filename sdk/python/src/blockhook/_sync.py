"""The blocking client."""

from __future__ import annotations

import functools
import os
import time
from typing import Any, Callable, Iterator, Mapping, ParamSpec, Sequence, TypeVar

import httpx

from . import _core, _ops
from ._core import Call, Flow, Sleep
from ._errors import BlockhookError, Declined, Expired, Withdrawn
from ._types import (
    Answer,
    Attachment,
    Conversation,
    CreatedConversation,
    Endpoint,
    EventRecord,
    EventType,
    FilterValue,
    Interaction,
    OptionLike,
)

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def settings(base_url: str | None, api_key: str | None) -> tuple[str, str]:
    url = base_url or os.environ.get("BLOCKHOOK_URL") or _core.DEFAULT_URL
    key = api_key or os.environ.get("BLOCKHOOK_API_KEY")
    if not key:
        raise BlockhookError("no API key: pass api_key= or set BLOCKHOOK_API_KEY")
    return url.rstrip("/"), key


def outcome(answer: Answer) -> None:
    """Raises unless the answer lets a guarded call run."""
    if answer.approved:
        return
    if answer.answer == "declined":
        raise Declined(answer)
    if answer.answer == "expired":
        raise Expired(answer)
    raise Withdrawn(answer)


def call_text(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The default question of a guarded call: ``Run deploy('prod')?``."""
    shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    text = f"Run {fn.__name__}({', '.join(shown)})?"
    return text if len(text) <= 600 else text[:597] + "…?"


class Client:
    """A blockhook client for one chatbot (its API key).

    ``base_url`` and ``api_key`` default to ``BLOCKHOOK_URL`` and
    ``BLOCKHOOK_API_KEY``. Requests answered 429 or 503 are retried up to
    ``max_retries`` times, waiting as ``Retry-After`` says.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.base_url, api_key = settings(base_url, api_key)
        self.max_retries = max_retries
        self._http = http_client or httpx.Client(timeout=timeout)
        self._owns_http = http_client is None
        self._headers = {"Authorization": f"Bearer {api_key}", "User-Agent": "blockhook-python/0.1"}
        self.interactions = Interactions(self)
        self.conversations = Conversations(self)
        self.endpoints = Endpoints(self)
        self.events = Events(self)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the driver ----------------------------------------------------------

    def _send(self, call: Call) -> Any:
        attempt = 0
        while True:
            response: httpx.Response | None = None
            try:
                response = self._http.request(
                    call.method,
                    self.base_url + call.path,
                    params=call.params,
                    json=call.json,
                    headers={**self._headers, **call.headers},
                    timeout=call.timeout if call.timeout is not None else httpx.USE_CLIENT_DEFAULT,
                )
            except httpx.TransportError as e:
                delay = _core.retry_delay(call, attempt, None, e) if attempt < self.max_retries and call.retry else None
                if delay is None:
                    raise
            else:
                delay = _core.retry_delay(call, attempt, response, None) if attempt < self.max_retries and call.retry else None
                if delay is None:
                    return _core.parse(call, response)
            time.sleep(delay)
            attempt += 1

    def _run(self, flow: Flow[T]) -> T:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = flow.throw(error) if error is not None else flow.send(value)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            value, error = None, None
            if isinstance(step, Sleep):
                time.sleep(step.seconds)
                continue
            try:
                value = self._send(step)
            except Exception as e:  # handed to the flow, which may re-attach
                error = e

    # -- ask (§7, §12) -------------------------------------------------------

    def ask(
        self,
        conversation_id: str,
        message: str,
        *,
        options: Sequence[OptionLike] | None = None,
        multiple: bool = False,
        custom: bool = False,
        accept: str | None = None,
        decline: str | None = None,
        comment: bool = False,
        title: str | None = None,
        timeout: float | str = 600,
        attachment: Attachment | None = None,
    ) -> Answer:
        """Asks a person in the conversation and waits for the answer.

        The question is asked without holding a connection and the answer is
        long-polled, so the wait survives dropped connections and a restart
        of the server: it re-attaches until the question's ``timeout``.
        """
        body = _core.ask_body(
            message, options=options, multiple=multiple, custom=custom, accept=accept,
            decline=decline, comment=comment, title=title, timeout=timeout, attachment=attachment,
        )  # fmt: skip
        return self._run(_core.ask(conversation_id, body))

    def ask_start(
        self,
        conversation_id: str,
        message: str,
        *,
        options: Sequence[OptionLike] | None = None,
        multiple: bool = False,
        custom: bool = False,
        accept: str | None = None,
        decline: str | None = None,
        comment: bool = False,
        title: str | None = None,
        timeout: float | str = 600,
        attachment: Attachment | None = None,
    ) -> str:
        """Asks without waiting; returns the interaction id (see ``wait_answer``)."""
        body = _core.ask_body(
            message, options=options, multiple=multiple, custom=custom, accept=accept,
            decline=decline, comment=comment, title=title, timeout=timeout, attachment=attachment,
        )  # fmt: skip
        return self._run(_core.ask_start(conversation_id, body))

    def wait_answer(self, interaction_id: str, timeout: float | str = 600) -> Answer:
        """Waits for the answer of a question asked with ``ask_start``."""
        return self._run(_core.wait_answer(interaction_id, _core.seconds(timeout)))

    def require_answer(
        self,
        conversation_id: str,
        message: str | Callable[..., str] | None = None,
        *,
        options: Sequence[OptionLike] | None = None,
        **ask_options: Any,
    ) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Guards a function with a question: it runs only when the person
        accepts (or chooses an option); otherwise ``Declined``, ``Expired``
        or ``Withdrawn`` is raised and the function does not run.

        ``message`` may be a function of the call's arguments; by default the
        question shows the call (``Run deploy('prod')?``).
        """

        def decorate(fn: Callable[P, R]) -> Callable[P, R]:
            @functools.wraps(fn)
            def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
                if callable(message):
                    text = message(*args, **kwargs)
                else:
                    text = message or call_text(fn, args, kwargs)
                outcome(self.ask(conversation_id, text, options=options, **ask_options))
                return fn(*args, **kwargs)

            return guarded

        return decorate


def _pages(client: Client, path: str, params: Mapping[str, Any]) -> Iterator[Any]:
    cursor: str | None = None
    while True:
        items, cursor = client._run(_core.page(path, params, cursor))
        yield from items
        if cursor is None:
            return


class Interactions:
    """The inbox (§6): every interactive block of a bot message."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def list(
        self, *, status: str | None = None, conversation_id: str | None = None, limit: int = 100
    ) -> Iterator[Interaction]:
        """Every matching interaction, newest first, fetching pages as needed."""
        params = {"status": status, "conversation_id": conversation_id, "limit": limit}
        return _pages(self._c, "/api/v1/interactions", params)

    def get(self, interaction_id: str) -> Interaction:
        return self._c._run(_ops.interaction_get(interaction_id))  # type: ignore[no-any-return]

    def respond(
        self, interaction_id: str, body: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> Interaction:
        """Answers as a member, e.g. ``{"type": "confirmation", "confirmed": True}``.

        An ``Idempotency-Key`` is made for the call (or taken from
        ``idempotency_key``) and kept for its retries: an answer sent twice
        takes effect once.
        """
        flow = _ops.interaction_respond(interaction_id, body, idempotency_key)
        return self._c._run(flow)  # type: ignore[no-any-return]

    def cancel(self, interaction_id: str) -> Interaction:
        """Withdraws a pending question (§15)."""
        return self._c._run(_ops.interaction_cancel(interaction_id))  # type: ignore[no-any-return]


class Conversations:
    """Conversations started by the bot (§16)."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def create(self, display_name: str | None = None) -> CreatedConversation:
        return self._c._run(_ops.conversation_create(display_name))  # type: ignore[no-any-return]

    def list(self, *, limit: int = 100) -> Iterator[Conversation]:
        return _pages(self._c, "/api/v1/conversations", {"limit": limit})

    def delete(self, conversation_id: str) -> None:
        """Erases the conversation and everything in it (§11)."""
        self._c._run(_ops.conversation_delete(conversation_id))

    def post_message(self, conversation_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Posts a bot message (§3): ``{"text", "blocks"?, "metadata"?}``."""
        return self._c._run(_ops.message_post(conversation_id, body))


class Endpoints:
    """The chatbot's webhook endpoints (§13)."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def create(
        self,
        url: str,
        *,
        description: str | None = None,
        event_types: Sequence[EventType] | None = None,
        filter: Mapping[str, Sequence[FilterValue]] | None = None,
        replies: bool | None = None,
        rate_limit: str | None = None,
        headers: Mapping[str, str] | None = None,
        enabled: bool | None = None,
    ) -> Endpoint:
        """Adds an endpoint; an argument left ``None`` takes the server's
        default. The answer carries the endpoint's ``signing_secret``."""
        flow = _ops.endpoint_create(
            url, description=description, event_types=event_types, filter=filter, replies=replies,
            rate_limit=rate_limit, headers=headers, enabled=enabled,
        )  # fmt: skip
        return self._c._run(flow)  # type: ignore[no-any-return]

    def list(self, *, limit: int = 100) -> Iterator[Endpoint]:
        """Every endpoint, the default (the chatbot's ``webhook_url``) first."""
        return _pages(self._c, "/api/v1/endpoints", {"limit": limit})

    def get(self, endpoint_id: str) -> Endpoint:
        return self._c._run(_ops.endpoint_get(endpoint_id))  # type: ignore[no-any-return]

    def update(self, endpoint_id: str, **changes: Any) -> Endpoint:
        """Changes the settings named (``url``, ``description``, ``event_types``,
        ``filter``, ``replies``, ``rate_limit``, ``headers``, ``enabled``);
        ``None`` sets one back to its default."""
        return self._c._run(_ops.endpoint_update(endpoint_id, changes))  # type: ignore[no-any-return]

    def delete(self, endpoint_id: str) -> None:
        """Deletes the endpoint (the default one: ``ApiError`` 409 ``default_endpoint``)."""
        self._c._run(_ops.endpoint_delete(endpoint_id))

    def rotate_secret(self, endpoint_id: str) -> str:
        """A new signing secret; the old one keeps signing too for 24 h."""
        return str(self._c._run(_ops.endpoint_rotate_secret(endpoint_id))["signing_secret"])

    def test(self, endpoint_id: str) -> str:
        """Sends a ``webhook.test`` to this endpoint only; returns its event id."""
        return str(self._c._run(_ops.endpoint_test(endpoint_id))["event_id"])


class Events:
    """The deliveries log (§3, §13)."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def get(self, event_id: str) -> EventRecord:
        """The event with its attempts (and, with endpoints, its deliveries)."""
        return self._c._run(_ops.event_get(event_id))  # type: ignore[no-any-return]

    def list(
        self,
        *,
        status: str | None = None,
        type: str | None = None,
        endpoint_id: str | None = None,
        limit: int = 100,
    ) -> Iterator[EventRecord]:
        params = {"status": status, "type": type, "endpoint_id": endpoint_id, "limit": limit}
        return _pages(self._c, "/api/v1/events", params)

    def redeliver(self, event_id: str, *, endpoint_id: str | None = None) -> None:
        """Delivers the event again (new attempts, same ``event_id`` and body)."""
        self._c._run(_ops.event_redeliver(event_id, endpoint_id))

    def redeliver_all(
        self, status: str, *, since: str | None = None, endpoint_id: str | None = None
    ) -> int:
        """Redelivers every ``dead`` or ``failed`` event; returns how many."""
        return int(self._c._run(_ops.event_redeliver_all(status, since, endpoint_id))["count"])

    def test(self) -> str:
        """Sends a signed ``webhook.test`` to the default endpoint; returns its event id."""
        return str(self._c._run(_ops.event_test())["event_id"])
