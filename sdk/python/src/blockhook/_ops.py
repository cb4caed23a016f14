"""The API's operations as flows (see ``_core``), one place for both clients."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ._core import Call, Flow, call, new_idempotency_key
from ._types import EventType, FilterValue


def _q(**params: Any) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


# §6 interactions
def interaction_get(iid: str) -> Flow[Any]:
    return call(Call("GET", f"/api/v1/interactions/{iid}"))


def interaction_respond(iid: str, body: Mapping[str, Any], key: str | None) -> Flow[Any]:
    # One key per call, kept for every retry of it: a retry after a lost
    # answer gets the first answer back instead of a second effect.
    headers = {"Idempotency-Key": key or new_idempotency_key()}
    return call(Call("POST", f"/api/v1/interactions/{iid}/responses", json=dict(body), headers=headers))


def interaction_cancel(iid: str) -> Flow[Any]:
    return call(Call("POST", f"/api/v1/interactions/{iid}/cancel"))


# §16 conversations
def conversation_create(display_name: str | None) -> Flow[Any]:
    return call(Call("POST", "/api/v1/conversations", json=_q(display_name=display_name)))


def conversation_delete(cid: str) -> Flow[Any]:
    return call(Call("DELETE", f"/api/v1/conversations/{cid}", empty=True))


def message_post(cid: str, body: Mapping[str, Any]) -> Flow[Any]:
    return call(Call("POST", f"/api/v1/conversations/{cid}/messages", json=dict(body)))


# §13 endpoints
def endpoint_create(
    url: str,
    *,
    description: str | None,
    event_types: Sequence[EventType] | None,
    filter: Mapping[str, Sequence[FilterValue]] | None,
    replies: bool | None,
    rate_limit: str | None,
    headers: Mapping[str, str] | None,
    enabled: bool | None,
) -> Flow[Any]:
    body = _q(
        url=url,
        description=description,
        event_types=None if event_types is None else list(event_types),
        filter=None if filter is None else {k: list(v) for k, v in filter.items()},
        replies=replies,
        rate_limit=rate_limit,
        headers=None if headers is None else dict(headers),
        enabled=enabled,
    )
    return call(Call("POST", "/api/v1/endpoints", json=body))


def endpoint_get(eid: str) -> Flow[Any]:
    return call(Call("GET", f"/api/v1/endpoints/{eid}"))


def endpoint_update(eid: str, changes: Mapping[str, Any]) -> Flow[Any]:
    return call(Call("PATCH", f"/api/v1/endpoints/{eid}", json=dict(changes)))


def endpoint_delete(eid: str) -> Flow[Any]:
    return call(Call("DELETE", f"/api/v1/endpoints/{eid}", empty=True))


def endpoint_rotate_secret(eid: str) -> Flow[Any]:
    return call(Call("POST", f"/api/v1/endpoints/{eid}/rotate-secret"))


def endpoint_test(eid: str) -> Flow[Any]:
    return call(Call("POST", f"/api/v1/endpoints/{eid}/test"))


# §3, §13 events
def event_get(event_id: str) -> Flow[Any]:
    return call(Call("GET", f"/api/v1/events/{event_id}"))


def event_redeliver(event_id: str, endpoint_id: str | None) -> Flow[Any]:
    body = _q(endpoint_id=endpoint_id) or None
    return call(Call("POST", f"/api/v1/events/{event_id}/redeliver", json=body))


def event_redeliver_all(status: str, since: str | None, endpoint_id: str | None) -> Flow[Any]:
    body = _q(status=status, since=since, endpoint_id=endpoint_id)
    return call(Call("POST", "/api/v1/events/redeliver", json=body))


def event_test() -> Flow[Any]:
    return call(Call("POST", "/api/v1/events/test", json={}))
