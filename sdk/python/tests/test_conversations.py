"""Conversations started by the bot (§16)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from blockhook import Client
from conftest import Bot, Visitor


def test_a_conversation_started_by_the_bot_is_listed_and_answered_in(bot: Bot) -> None:
    with Client(bot.server.url, bot.api_key) as client:
        started = client.conversations.create(display_name="Ada")
        assert started["conversation_id"].startswith("conv_")
        assert started["visitor"]["display_name"] == "Ada"
        assert started["visitor_token"] not in started["widget_url"].split("#")[0]
        visitor = Visitor(bot.server.url, started["conversation_id"], started["visitor_token"])
        with ThreadPoolExecutor(1) as pool:
            asked = pool.submit(client.ask, visitor.conversation_id, "Ready?")
            visitor.question()
            listed = {c["id"]: c for c in client.conversations.list(limit=1)}
            assert listed[visitor.conversation_id]["pending_interactions"] == 1
            visitor.click("accept")
            assert asked.result(timeout=30).answer == "accepted"

