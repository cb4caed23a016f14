"""The asyncio client: the same operations as ``Client``, awaited."""

from __future__ import annotations

import asyncio
import functools
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping, ParamSpec, Sequence, TypeVar

import httpx

from . import _core, _ops
from ._core import Call, Flow, Sleep
from ._sync import call_text, outcome, settings
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


class AsyncClient:
    """The asyncio twin of ``Client`` (same arguments, same operations)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url, api_key = settings(base_url, api_key)
        self.max_retries = max_retries
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._owns_http = http_client is None
        self._headers = {"Authorization": f"Bearer {api_key}", "User-Agent": "blockhook-python/0.1"}
        self.interactions = AsyncInteractions(self)
        self.conversations = AsyncConversations(self)
        self.endpoints = AsyncEndpoints(self)
        self.events = AsyncEvents(self)

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, call: Call) -> Any:
        attempt = 0
        while True:
            try:
                response = await self._http.request(
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
            await asyncio.sleep(delay)
            attempt += 1

    async def _run(self, flow: Flow[T]) -> T:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = flow.throw(error) if error is not None else flow.send(value)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            value, error = None, None
            if isinstance(step, Sleep):
                await asyncio.sleep(step.seconds)
                continue
            try:
                value = await self._send(step)
            except Exception as e:
                error = e

    async def ask(
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
        """Asks a person in the conversation and waits for the answer (see ``Client.ask``)."""
        body = _core.ask_body(
            message, options=options, multiple=multiple, custom=custom, accept=accept,
            decline=decline, comment=comment, title=title, timeout=timeout, attachment=attachment,
        )  # fmt: skip
        return await self._run(_core.ask(conversation_id, body))

    async def ask_start(
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
        """Asks without waiting; returns the interaction id."""
        body = _core.ask_body(
            message, options=options, multiple=multiple, custom=custom, accept=accept,
            decline=decline, comment=comment, title=title, timeout=timeout, attachment=attachment,
        )  # fmt: skip
        return await self._run(_core.ask_start(conversation_id, body))

    async def wait_answer(self, interaction_id: str, timeout: float | str = 600) -> Answer:
        return await self._run(_core.wait_answer(interaction_id, _core.seconds(timeout)))

    def require_answer(
        self,
        conversation_id: str,
        message: str | Callable[..., str] | None = None,
        *,
        options: Sequence[OptionLike] | None = None,
        **ask_options: Any,
    ) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
        """Guards a coroutine function with a question (see ``Client.require_answer``)."""

        def decorate(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
            @functools.wraps(fn)
            async def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
                if callable(message):
                    text = message(*args, **kwargs)
                else:
                    text = message or call_text(fn, args, kwargs)
                outcome(await self.ask(conversation_id, text, options=options, **ask_options))
                return await fn(*args, **kwargs)

            return guarded

        return decorate


async def _pages(client: AsyncClient, path: str, params: Mapping[str, Any]) -> AsyncIterator[Any]:
    cursor: str | None = None
    while True:
        items, cursor = await client._run(_core.page(path, params, cursor))
        for item in items:
            yield item
        if cursor is None:
            return


class AsyncInteractions:
    def __init__(self, client: AsyncClient) -> None:
        self._c = client

    def list(
        self, *, status: str | None = None, conversation_id: str | None = None, limit: int = 100
    ) -> AsyncIterator[Interaction]:
        params = {"status": status, "conversation_id": conversation_id, "limit": limit}
        return _pages(self._c, "/api/v1/interactions", params)

    async def get(self, interaction_id: str) -> Interaction:
        return await self._c._run(_ops.interaction_get(interaction_id))

    async def respond(
        self, interaction_id: str, body: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> Interaction:
        flow = _ops.interaction_respond(interaction_id, body, idempotency_key)
        return await self._c._run(flow)

    async def cancel(self, interaction_id: str) -> Interaction:
        return await self._c._run(_ops.interaction_cancel(interaction_id))


class AsyncConversations:
    def __init__(self, client: AsyncClient) -> None:
        self._c = client

    async def create(self, display_name: str | None = None) -> CreatedConversation:
        return await self._c._run(_ops.conversation_create(display_name))

    def list(self, *, limit: int = 100) -> AsyncIterator[Conversation]:
        return _pages(self._c, "/api/v1/conversations", {"limit": limit})

    async def delete(self, conversation_id: str) -> None:
        await self._c._run(_ops.conversation_delete(conversation_id))

    async def post_message(self, conversation_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self._c._run(_ops.message_post(conversation_id, body))


class AsyncEndpoints:
    def __init__(self, client: AsyncClient) -> None:
        self._c = client

    async def create(
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
        flow = _ops.endpoint_create(
            url, description=description, event_types=event_types, filter=filter, replies=replies,
            rate_limit=rate_limit, headers=headers, enabled=enabled,
        )  # fmt: skip
        return await self._c._run(flow)

    def list(self, *, limit: int = 100) -> AsyncIterator[Endpoint]:
        return _pages(self._c, "/api/v1/endpoints", {"limit": limit})

    async def get(self, endpoint_id: str) -> Endpoint:
        return await self._c._run(_ops.endpoint_get(endpoint_id))

    async def update(self, endpoint_id: str, **changes: Any) -> Endpoint:
        return await self._c._run(_ops.endpoint_update(endpoint_id, changes))

    async def delete(self, endpoint_id: str) -> None:
        await self._c._run(_ops.endpoint_delete(endpoint_id))

    async def rotate_secret(self, endpoint_id: str) -> str:
        return str((await self._c._run(_ops.endpoint_rotate_secret(endpoint_id)))["signing_secret"])

    async def test(self, endpoint_id: str) -> str:
        return str((await self._c._run(_ops.endpoint_test(endpoint_id)))["event_id"])


class AsyncEvents:
    def __init__(self, client: AsyncClient) -> None:
        self._c = client

    async def get(self, event_id: str) -> EventRecord:
        return await self._c._run(_ops.event_get(event_id))

    def list(
        self,
        *,
        status: str | None = None,
        type: str | None = None,
        endpoint_id: str | None = None,
        limit: int = 100,
    ) -> AsyncIterator[EventRecord]:
        params = {"status": status, "type": type, "endpoint_id": endpoint_id, "limit": limit}
        return _pages(self._c, "/api/v1/events", params)

    async def redeliver(self, event_id: str, *, endpoint_id: str | None = None) -> None:
        await self._c._run(_ops.event_redeliver(event_id, endpoint_id))

    async def redeliver_all(
        self, status: str, *, since: str | None = None, endpoint_id: str | None = None
    ) -> int:
        return int((await self._c._run(_ops.event_redeliver_all(status, since, endpoint_id)))["count"])

    async def test(self) -> str:
        return str((await self._c._run(_ops.event_test()))["event_id"])
