"""Withdrawing a question (§15): the one a ``dialog_pending`` names, and one an
ask is waiting on."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from blockhook import ApiError, AsyncClient, Client, Withdrawn
from conftest import Bot, Visitor, until


def widget_blocks(visitor: Visitor) -> list[dict[str, Any]]:
    r = httpx.get(f"{visitor.url}/widget/v1/conversations/{visitor.conversation_id}/messages",
                  headers={"Authorization": f"Bearer {visitor.token}"})  # fmt: skip
    r.raise_for_status()
    return [b for m in r.json()["data"] for b in m["blocks"]]


def test_the_question_in_the_way_is_named_and_cancelled(bot: Bot) -> None:
    visitor = bot.visitor()
    with Client(bot.server.url, bot.api_key) as client:
        first = client.ask_start(visitor.conversation_id, "Deploy on Friday?")
        with pytest.raises(ApiError) as in_the_way:
            client.ask_start(visitor.conversation_id, "Deploy on Monday?")
        assert (in_the_way.value.status, in_the_way.value.code) == (409, "dialog_pending")
        assert in_the_way.value.interaction_id == first

        cancelled = client.interactions.cancel(first)
        assert (cancelled["id"], cancelled["status"]) == (first, "cancelled")
        assert client.wait_answer(first, timeout=30).answer == "withdrawn"
        assert [b["state"].get("reason") for b in widget_blocks(visitor)] == ["withdrawn"]

        with pytest.raises(ApiError) as twice:
            client.interactions.cancel(first)
        assert (twice.value.status, twice.value.code) == (409, "interaction_not_pending")
        with pytest.raises(ApiError) as unknown:
            client.interactions.cancel("int_00000000000000000000000000")
        assert (unknown.value.status, unknown.value.code) == (404, "not_found")
        # The conversation takes a new question now.
        assert client.ask_start(visitor.conversation_id, "Deploy on Monday?") != first


def test_a_guarded_call_waiting_on_a_cancelled_question_does_not_run(bot: Bot) -> None:
    visitor = bot.visitor()
    ran: list[str] = []
    with Client(bot.server.url, bot.api_key) as client:

        @client.require_answer(visitor.conversation_id, "Rotate the keys?")
        def rotate() -> None:
            ran.append("rotated")

        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(rotate)
            visitor.question()
            waiting = until(
                lambda: list(client.interactions.list(status="pending", conversation_id=visitor.conversation_id)),
                "the question in the inbox",
            )
            client.interactions.cancel(waiting[0]["id"])
            with pytest.raises(Withdrawn) as withdrawn:
                call.result(timeout=30)
    assert ran == []
    assert withdrawn.value.answer.answer == "withdrawn"
    assert withdrawn.value.answer.interaction_id == waiting[0]["id"]


def test_the_async_client_cancels_too(bot: Bot) -> None:
    visitor = bot.visitor()

    async def scenario() -> tuple[str, str]:
        async with AsyncClient(bot.server.url, bot.api_key) as client:
            asked = asyncio.ensure_future(client.ask(visitor.conversation_id, "Archive it?", timeout="5m"))
            await asyncio.to_thread(visitor.question)
            pending = [i async for i in client.interactions.list(conversation_id=visitor.conversation_id)]
            cancelled = await client.interactions.cancel(pending[0]["id"])
            answer = await asyncio.wait_for(asked, 30)
            return cancelled["status"], answer.answer

    assert asyncio.run(scenario()) == ("cancelled", "withdrawn")
