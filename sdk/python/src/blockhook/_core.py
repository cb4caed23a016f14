"""What the sync and the async client share, free of I/O.

Each operation is a generator ("flow") that yields what it needs done — an
HTTP ``Call`` or a ``Sleep`` — and gets the parsed answer back (or has the
call's exception thrown into it). ``Client`` and ``AsyncClient`` only drive
these flows, so the waiting, re-attaching and paging logic exists once.
"""

from __future__ import annotations

import json
import random
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Generator, Mapping, Sequence, TypeVar, Union

import httpx

from ._errors import ApiError
from ._types import Answer, Attachment, OptionLike

DEFAULT_URL = "http://127.0.0.1:8080"
# The longest `wait` the answer route takes (§12).
MAX_WAIT_S = 50
# Retry-After longer than this is not slept through: the error is raised.
MAX_RETRY_AFTER_S = 60.0


@dataclass
class Call:
    """One API request. ``idempotent``: safe to send again after a lost answer."""

    method: str
    path: str
    params: Mapping[str, Any] | None = None
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    # No body to parse (204s).
    empty: bool = False
    # False: the caller handles failures itself (the answer's long poll).
    retry: bool = True

    @property
    def idempotent(self) -> bool:
        return self.method in ("GET", "HEAD") or "Idempotency-Key" in self.headers


@dataclass
class Sleep:
    seconds: float


Step = Union[Call, Sleep]
T = TypeVar("T")
Flow = Generator[Step, Any, T]


# -- retries -----------------------------------------------------------------


def backoff(attempt: int, base: float = 0.5, cap: float = 8.0) -> float:
    """Exponential backoff with full jitter: attempt 0 → up to 0.5 s, doubling to ``cap``."""
    return random.uniform(base / 2, min(cap, base * (2**attempt)))


def retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (delta-seconds form; the HTTP-date form is read too)."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def retry_delay(
    call: Call, attempt: int, response: httpx.Response | None, error: Exception | None
) -> float | None:
    """How long to wait before sending ``call`` again, or None to give up now.

    429 and 503 are retried (the server stored nothing), waiting the longer
    of ``Retry-After`` and the backoff. A connection that could not be made
    is retried too (nothing was sent); any other lost connection only when
    the call is idempotent (a GET, or a POST with an ``Idempotency-Key``).
    """
    if response is not None:
        if response.status_code not in (429, 503):
            return None
        after = retry_after(response)
        if after is not None and after > MAX_RETRY_AFTER_S:
            return None
        return max(after or 0.0, backoff(attempt))
    if isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout)):
        return backoff(attempt)
    if isinstance(error, httpx.TransportError) and call.idempotent:
        return backoff(attempt)
    return None


def api_error(response: httpx.Response) -> ApiError:
    """The problem+json body of an error response as an ``ApiError``."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    after = retry_after(response)
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        return ApiError(
            status=response.status_code,
            code=body["code"],
            detail=str(body.get("detail", "")),
            errors=body.get("errors") or [],
            problem=body,
            retry_after=after,
        )
    text = response.text[:200]
    return ApiError(
        status=response.status_code,
        code=f"http_{response.status_code}",
        detail=text or response.reason_phrase,
        retry_after=after,
    )


def parse(call: Call, response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise api_error(response)
    if call.empty or response.status_code == 204 or not response.content:
        return None
    return response.json()


# -- ask and wait (§7, §12, §15) ---------------------------------------------

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def seconds(timeout: float | str) -> float:
    """A duration (a number of seconds or ``"500ms"``, ``"90s"``, ``"10m"``, ``"2h"``, ``"1d"``)."""
    if isinstance(timeout, (int, float)):
        return float(timeout)
    m = _DURATION.match(timeout.strip())
    if not m:
        raise ValueError(f"not a duration: {timeout!r}")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def ask_body(
    message: str,
    *,
    options: Sequence[OptionLike] | None,
    multiple: bool,
    custom: bool,
    accept: str | None,
    decline: str | None,
    comment: bool,
    title: str | None,
    timeout: float | str,
    attachment: Attachment | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message, "wait": False, "timeout": timeout}
    if options is not None:
        body["options"] = list(options)
    if multiple:
        body["multiple"] = True
    if custom:
        body["custom"] = True
    if accept is not None:
        body["accept"] = accept
    if decline is not None:
        body["decline"] = decline
    if comment:
        body["comment"] = True
    if title is not None:
        body["title"] = title
    if attachment is not None:
        body["attachment"] = attachment
    return body


def ask_start(conversation_id: str, body: dict[str, Any]) -> Flow[str]:
    r = yield Call("POST", f"/api/v1/conversations/{conversation_id}/ask", json=body)
    return str(r["interaction_id"])


def wait_answer(interaction_id: str, timeout_s: float, clock: Any = time.monotonic) -> Flow[Answer]:
    """Waits for the answer of a question asked without waiting.

    Long-polls ``…/answer?wait=`` and re-attaches on its own while the
    server is unreachable or restarting (§15), until the question's timeout
    (plus a minute's grace for the server to come back and say ``expired``).
    """
    give_up = clock() + timeout_s + 60.0
    failures = 0
    while True:
        left = give_up - clock()
        wait = int(max(1, min(MAX_WAIT_S, left)))
        try:
            r = yield Call(
                "GET",
                f"/api/v1/interactions/{interaction_id}/answer",
                params={"wait": wait},
                timeout=wait + 15.0,
                retry=False,
            )
        except (httpx.TransportError, ApiError) as e:
            if isinstance(e, ApiError) and e.status not in (429, 502, 503, 504):
                raise
            if clock() >= give_up:
                raise
            yield Sleep(min(backoff(failures), max(0.0, give_up - clock())))
            failures += 1
            continue
        failures = 0
        if r.get("answer") != "pending":
            return Answer.from_json(r, interaction_id)


def ask(conversation_id: str, body: dict[str, Any]) -> Flow[Answer]:
    interaction_id = yield from ask_start(conversation_id, body)
    return (yield from wait_answer(interaction_id, seconds(body["timeout"])))


# -- collections -------------------------------------------------------------


def page(path: str, params: Mapping[str, Any], cursor: str | None) -> Flow[tuple[list[Any], str | None]]:
    """One page of a collection: its items and the next cursor (None at the end)."""
    q = {k: v for k, v in params.items() if v is not None}
    if cursor is not None:
        q["cursor"] = cursor
    r = yield Call("GET", path, params=q)
    more = r.get("page", {}).get("has_more") and r["page"].get("next_cursor")
    return list(r["data"]), (r["page"]["next_cursor"] if more else None)


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


def call(c: Call) -> Flow[Any]:
    return (yield c)
