"""Verifying real signed deliveries and typing their events."""

from __future__ import annotations

import pytest

from blockhook import ButtonClicked, Client, MessageReceived, WebhookTest, WebhookVerificationError, verify_webhook
from conftest import Bot, Receiver


def test_a_real_delivery_is_verified_and_a_tampered_one_refused(bot: Bot, receiver: Receiver) -> None:
    visitor = bot.visitor()
    with Client(bot.server.url, bot.api_key) as client:
        client.ask_start(visitor.conversation_id, "Approve the invoice?", accept="Approve", decline="Reject")
    visitor.click("accept")
    delivery = receiver.next("interaction.button_clicked")

    event = verify_webhook(bot.signing_secret, delivery.headers, delivery.body)
    assert isinstance(event, ButtonClicked)
    assert (event.conversation_id, event.action_id, event.label) == (visitor.conversation_id, "accept", "Approve")
    assert event.user.kind == "visitor"
    assert event.event_id == delivery.headers["webhook-id"]
    assert event.response_url.startswith(bot.server.url)

    tampered = delivery.body.replace(b'"accept"', b'"decline"', 1)
    assert tampered != delivery.body
    with pytest.raises(WebhookVerificationError):
        verify_webhook(bot.signing_secret, delivery.headers, tampered)
    other_secret = "whsec_" + "A" * 43 + "="
    with pytest.raises(WebhookVerificationError):
        verify_webhook(other_secret, delivery.headers, delivery.body)
    # Either of two secrets (a rotation) verifies.
    assert verify_webhook([other_secret, bot.signing_secret], delivery.headers, delivery.body) == event
    stale = {**delivery.headers, "webhook-timestamp": str(int(delivery.headers["webhook-timestamp"]) - 600)}
    with pytest.raises(WebhookVerificationError):
        verify_webhook(bot.signing_secret, stale, delivery.body)


def test_message_and_test_events_are_typed(bot: Bot, receiver: Receiver) -> None:
    import httpx

    visitor = bot.visitor()
    r = httpx.post(
        f"{visitor.url}/widget/v1/conversations/{visitor.conversation_id}/messages",
        json={"text": "hello there"},
        headers={"Authorization": f"Bearer {visitor.token}"},
    )
    assert r.status_code == 201, r.text
    got = receiver.next("message.received")
    message = verify_webhook(bot.signing_secret, got.headers, got.body)
    assert isinstance(message, MessageReceived) and message.text == "hello there"

    with Client(bot.server.url, bot.api_key) as client:
        event_id = client.events.test()
    got = receiver.next("webhook.test")
    test = verify_webhook(bot.signing_secret, got.headers, got.body)
    assert isinstance(test, WebhookTest) and test.event_id == event_id
    with Client(bot.server.url, bot.api_key) as client:
        logged = client.events.get(event_id)
        assert logged["type"] == "webhook.test"
        client.events.redeliver(event_id)
    again = receiver.next("webhook.test")
    assert again.headers["webhook-id"] == event_id and again.body == got.body
