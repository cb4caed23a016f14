"""Asking a person: answered in the widget, guarded calls, the no-wait ask."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from blockhook import Answer, ApiError, AsyncClient, Client, Declined, Expired, FormSubmitted, verify_webhook
from conftest import Bot, Receiver


def test_ask_is_answered_by_a_widget_click(bot: Bot) -> None:
    visitor = bot.visitor()
    with Client(bot.server.url, bot.api_key) as client, ThreadPoolExecutor(1) as pool:
        asked = pool.submit(
            client.ask, visitor.conversation_id, "Which colour?", options=["red", {"id": "blue", "label": "Blue"}]
        )
        question = visitor.question()
        assert question["text"] == "Which colour?"
        visitor.click("blue")
        answer = asked.result(timeout=30)
    assert answer == Answer(answer="chose", options=["blue"], interaction_id=answer.interaction_id)
    assert answer.interaction_id and answer.interaction_id.startswith("int_")
    assert answer.approved


def test_a_declined_question_keeps_the_guarded_call_from_running(bot: Bot) -> None:
    visitor = bot.visitor()
    ran: list[str] = []
    with Client(bot.server.url, bot.api_key) as client:

        @client.require_answer(visitor.conversation_id, comment=True)
        def drop_table(name: str) -> str:
            ran.append(name)
            return name

        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(drop_table, "users")
            assert visitor.question()["text"] == "Run drop_table('users')?"
            visitor.click("decline", comment="not on a Friday")
            with pytest.raises(Declined) as declined:
                call.result(timeout=30)
    assert ran == []
    assert declined.value.comment == "not on a Friday"
    assert declined.value.answer.answer == "declined"


def test_an_accepted_question_runs_the_guarded_coroutine(bot: Bot) -> None:
    visitor = bot.visitor()

    async def scenario() -> str:
        async with AsyncClient(bot.server.url, bot.api_key) as client:

            @client.require_answer(visitor.conversation_id, lambda env: f"Deploy to {env}?")
            async def deploy(env: str) -> str:
                return f"deployed {env}"

            call = asyncio.ensure_future(deploy("prod"))
            question = await asyncio.to_thread(visitor.question)
            assert question["text"] == "Deploy to prod?"
            await asyncio.to_thread(visitor.click, "accept")
            return await asyncio.wait_for(call, 30)

    assert asyncio.run(scenario()) == "deployed prod"


def test_an_unanswered_question_expires(bot: Bot) -> None:
    visitor = bot.visitor()
    with Client(bot.server.url, bot.api_key) as client:

        @client.require_answer(visitor.conversation_id, "Still there?", timeout=5)
        def ping() -> None:
            raise AssertionError("must not run")

        with pytest.raises(Expired):
            ping()


def test_ask_start_then_wait_answer(bot: Bot, receiver: Receiver) -> None:
    visitor = bot.visitor()
    with Client(bot.server.url, bot.api_key) as client:
        interaction_id = client.ask_start(visitor.conversation_id, "Name it", custom=True)
        assert client.interactions.get(interaction_id)["status"] == "pending"
        # A second question while one is open is refused, as a typed problem.
        with pytest.raises(ApiError) as pending:
            client.ask_start(visitor.conversation_id, "And another?")
        assert (pending.value.status, pending.value.code) == (409, "dialog_pending")
        message = visitor.question()
        form = next(b for b in message["blocks"] if b["type"] == "form")
        import httpx

        r = httpx.post(
            f"{visitor.url}/widget/v1/messages/{message['id']}/forms/{form['form_id']}",
            json={"values": {"custom": "Blockhook"}},
            headers={"Authorization": f"Bearer {visitor.token}"},
        )
        assert r.status_code == 200, r.text
        answer = client.wait_answer(interaction_id, timeout=30)
    assert (answer.answer, answer.text) == ("custom", "Blockhook")
    delivery = receiver.next("interaction.form_submitted")
    event = verify_webhook(bot.signing_secret, delivery.headers, delivery.body)
    assert isinstance(event, FormSubmitted)
    assert (event.form_id, event.values) == (form["form_id"], {"custom": "Blockhook"})


def test_the_async_inbox_lists_and_answers(bot: Bot) -> None:
    visitor = bot.visitor()

    async def scenario() -> Answer:
        async with AsyncClient(bot.server.url, bot.api_key) as client:
            asked = await client.ask_start(visitor.conversation_id, "Pick", options=["a", "b"])
            pending = [i async for i in client.interactions.list(conversation_id=visitor.conversation_id)]
            assert [i["id"] for i in pending] == [asked]
            assert pending[0]["type"] == "choice"
            await client.interactions.respond(asked, {"type": "choice", "option_ids": ["b"]})
            return await client.wait_answer(asked, timeout=30)

    answer = asyncio.run(scenario())
    assert (answer.answer, answer.options) == ("chose", ["b"])


def test_problems_carry_code_status_detail_and_pointers(bot: Bot) -> None:
    visitor = bot.visitor()
    with Client(bot.server.url, bot.api_key) as client:
        with pytest.raises(ApiError) as missing:
            client.ask("conv_00000000000000000000000000", "Anyone?")
        assert (missing.value.status, missing.value.code) == (404, "not_found")
        assert missing.value.detail
        with pytest.raises(ApiError) as bad:
            client.ask(visitor.conversation_id, "x" * 601)
        assert (bad.value.status, bad.value.code) == (422, "validation_failed")
        assert [e["field"] for e in bad.value.errors] == ["/message"]
    with Client(bot.server.url, "sk_not_a_key") as stranger, pytest.raises(ApiError) as unauthorized:
        stranger.interactions.get("int_00000000000000000000000000")
    assert (unauthorized.value.status, unauthorized.value.code) == (401, "unauthorized")
