"""Endpoints (§13): managed through ``client.endpoints``, and the deliveries
log read and redelivered per endpoint."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import pytest

from blockhook import ApiError, AsyncClient, ButtonClicked, Client, WebhookTest, verify_webhook
from conftest import Bot, Receiver, until


@pytest.fixture
def other() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.http.shutdown()


def test_endpoints_are_created_listed_changed_tested_rotated_and_deleted(
    bot: Bot, receiver: Receiver, other: Receiver
) -> None:
    with Client(bot.server.url, bot.api_key) as client:
        buys = client.endpoints.create(
            other.url, description="buys", event_types=["interaction.button_clicked"], filter={"action_id": ["buy"]}
        )
        assert buys["id"].startswith("ep_") and buys["signing_secret"].startswith("whsec_")
        assert (buys["default"], buys["replies"], buys["enabled"]) == (False, False, True)
        assert buys["filter"] == {"action_id": ["buy"]}
        paused = client.endpoints.create(other.url + "/paused", enabled=False)
        assert (paused["enabled"], paused["disabled_reason"]) == (False, "paused")

        # Pages of one, the default endpoint (the chatbot's webhook_url) first.
        listed = list(client.endpoints.list(limit=1))
        assert [e["id"] for e in listed[1:]] == [buys["id"], paused["id"]]
        assert (listed[0]["default"], listed[0]["url"]) == (True, receiver.url)
        assert all("signing_secret" not in e for e in listed)

        changed = client.endpoints.update(buys["id"], rate_limit="5/s", headers={"X-Team": "sales"})
        assert (changed["rate_limit"], changed["headers"], changed["description"]) == ("5/s", {"X-Team": "sales"}, "buys")
        assert client.endpoints.get(buys["id"]) == changed
        assert client.endpoints.update(buys["id"], rate_limit=None)["rate_limit"] is None

        # A test goes to that endpoint only, signed with its own secret.
        event_id = client.endpoints.test(buys["id"])
        delivery = other.next("webhook.test")
        event = verify_webhook(buys["signing_secret"], delivery.headers, delivery.body)
        assert isinstance(event, WebhookTest) and event.event_id == event_id
        assert delivery.headers.get("x-team") == "sales"
        record = until(
            lambda: (r := client.events.get(event_id))["status"] == "succeeded" and r, "the test to be delivered"
        )
        assert [(d["endpoint_id"], d["status"], d["attempts"]) for d in record["deliveries"]] == [
            (buys["id"], "succeeded", 1)
        ]
        assert [a["endpoint_id"] for a in record["attempts"]] == [buys["id"]]
        assert [e["event_id"] for e in client.events.list(endpoint_id=buys["id"])] == [event_id]
        assert list(client.events.list(endpoint_id=paused["id"])) == []

        # Redelivered to that endpoint: the same webhook-id again.
        client.events.redeliver(event_id, endpoint_id=buys["id"])
        assert other.next("webhook.test").headers["webhook-id"] == event_id
        with pytest.raises(ApiError) as nowhere:
            client.events.redeliver(event_id, endpoint_id=paused["id"])
        assert (nowhere.value.status, nowhere.value.code) == (404, "not_found")

        # A new secret signs what follows.
        secret = client.endpoints.rotate_secret(buys["id"])
        assert secret.startswith("whsec_") and secret != buys["signing_secret"]
        client.endpoints.test(buys["id"])
        delivery = other.next("webhook.test")
        assert isinstance(verify_webhook(secret, delivery.headers, delivery.body), WebhookTest)

        client.endpoints.delete(buys["id"])
        with pytest.raises(ApiError) as gone:
            client.endpoints.get(buys["id"])
        assert (gone.value.status, gone.value.code) == (404, "not_found")
        with pytest.raises(ApiError) as kept:
            client.endpoints.delete(listed[0]["id"])
        assert (kept.value.status, kept.value.code) == (409, "default_endpoint")
        assert [e["id"] for e in client.endpoints.list()] == [listed[0]["id"], paused["id"]]


def test_an_endpoint_gets_only_the_clicks_its_filter_matches(bot: Bot, receiver: Receiver, other: Receiver) -> None:
    visitor = bot.visitor()
    with Client(bot.server.url, bot.api_key) as client:
        buys = client.endpoints.create(other.url, filter={"action_id": ["buy"]})
        for choice in ("skip", "buy"):
            with ThreadPoolExecutor(1) as pool:
                asked = pool.submit(client.ask, visitor.conversation_id, "Buy it?", options=["buy", "skip"])
                visitor.click(choice)
                assert asked.result(timeout=30).options == [choice]
        delivery = other.next("interaction.button_clicked")
        event = verify_webhook(buys["signing_secret"], delivery.headers, delivery.body)
        assert isinstance(event, ButtonClicked) and event.action_id == "buy"
        # The default endpoint got both clicks, this one the "buy" only.
        clicks = [receiver.next("interaction.button_clicked") for _ in range(2)]
        defaults = [verify_webhook(bot.signing_secret, d.headers, d.body) for d in clicks]
        assert sorted(e.action_id for e in defaults if isinstance(e, ButtonClicked)) == ["buy", "skip"]
        routed = [e["payload"]["action_id"] for e in client.events.list(endpoint_id=buys["id"])]
        assert routed == ["buy"]


def test_bad_endpoints_are_refused_with_pointers(bot: Bot) -> None:
    async def scenario() -> ApiError:
        async with AsyncClient(bot.server.url, bot.api_key) as client:
            with pytest.raises(ApiError) as bad:
                await client.endpoints.create(
                    "http://127.0.0.1:9/hook",
                    event_types=["interaction.button_clicked", "order.paid"],
                    filter={"action_id": []},
                    headers={"Host": "example.com"},
                )
            assert [e async for e in client.endpoints.list()][0]["default"] is True
            return bad.value

    bad = asyncio.run(scenario())
    assert (bad.status, bad.code) == (422, "validation_failed")
    assert sorted((e["field"], e["code"]) for e in bad.errors) == [
        ("/event_types/1", "unknown_event_type"),
        ("/filter/action_id", "invalid_filter"),
        ("/headers/Host", "forbidden_header"),
    ]
