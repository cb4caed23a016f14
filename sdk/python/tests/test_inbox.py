"""The inbox: answering twice with one key, paging, retries that keep the key."""

from __future__ import annotations

import socket
import threading
from typing import Any

import httpx
import pytest

from blockhook import ApiError, Client
from conftest import Bot, Receiver, Server


def test_the_inbox_answered_twice_with_one_key_takes_effect_once(bot: Bot, receiver: Receiver) -> None:
    visitor = bot.visitor()
    with Client(bot.server.url, bot.api_key) as client:
        interaction_id = client.ask_start(visitor.conversation_id, "Refund order 991?")
        body = {"type": "confirmation", "confirmed": True}
        first = client.interactions.respond(interaction_id, body, idempotency_key="refund-991")
        again = client.interactions.respond(interaction_id, body, idempotency_key="refund-991")
        assert first == again
        assert first["status"] == "answered"
        assert first["response"] is not None and first["response"]["confirmed"] is True
        # Another key is another answer, which the interaction no longer takes.
        with pytest.raises(ApiError) as closed:
            client.interactions.respond(interaction_id, body)
        assert (closed.value.status, closed.value.code) == (409, "interaction_not_pending")
        assert client.wait_answer(interaction_id, timeout=30).answer == "accepted"
        # One effect: one event, answered by a member.
        delivered = receiver.next("interaction.button_clicked")
        assert b'"kind":"member"' in delivered.body
        clicks = [e for e in client.events.list(type="interaction.button_clicked")
                  if e["payload"]["conversation_id"] == visitor.conversation_id]  # fmt: skip
        assert len(clicks) == 1


def test_interactions_list_iterates_every_page(bot: Bot) -> None:
    with Client(bot.server.url, bot.api_key) as client:
        asked = {client.ask_start(bot.visitor().conversation_id, f"Question {i}") for i in range(3)}
        listed = [i["id"] for i in client.interactions.list(status="pending", limit=1)]
        assert sorted(listed) == sorted(asked)
        one = bot.visitor().conversation_id
        mine = client.ask_start(one, "Only this one")
        assert [i["id"] for i in client.interactions.list(conversation_id=one)] == [mine]


class LoseFirstAnswer:
    """A TCP proxy that forwards the first request but closes the connection
    before the server's answer gets back: the call took effect, the client
    never heard."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn, self.connections == 1), daemon=True).start()

    def _handle(self, conn: socket.socket, lose: bool) -> None:
        up = socket.create_connection(self.upstream)

        def pipe(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        if lose:
            # Forward the whole request, wait for the server's answer, drop it.
            threading.Thread(target=pipe, args=(conn, up), daemon=True).start()
            up.settimeout(10)
            up.recv(65536)
            for s in (conn, up):
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            return
        threading.Thread(target=pipe, args=(up, conn), daemon=True).start()
        pipe(conn, up)

    def close(self) -> None:
        self.listener.close()


def test_a_retried_answer_reuses_its_idempotency_key(bot: Bot, server: Server) -> None:
    visitor = bot.visitor()
    proxy = LoseFirstAnswer(server.port)
    sent: list[dict[str, Any]] = []

    def record(request: httpx.Request) -> None:
        sent.append({"path": request.url.path, "key": request.headers.get("idempotency-key")})

    try:
        with Client(bot.server.url, bot.api_key) as direct:
            interaction_id = direct.ask_start(visitor.conversation_id, "Ship it?")
        http = httpx.Client(event_hooks={"request": [record]}, timeout=10)
        with Client(proxy.url, bot.api_key, http_client=http) as client:
            answered = client.interactions.respond(interaction_id, {"type": "confirmation", "confirmed": False})
        http.close()
    finally:
        proxy.close()
    # The first answer was lost on the way back; the retry carried the same
    # key and got the first answer again (a new key would get a 409).
    posts = [s for s in sent if s["path"].endswith("/responses")]
    assert len(posts) == 2
    assert posts[0]["key"] and posts[0]["key"] == posts[1]["key"]
    assert answered["status"] == "answered"
    assert answered["response"] is not None and answered["response"]["confirmed"] is False


class HangFirst:
    """A TCP proxy whose first connection takes the request and never
    answers (a hung server); later connections are passed through."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if not self.held:
                self.held.append(conn)
                continue
            up = socket.create_connection(self.upstream)
            for src, dst in ((conn, up), (up, conn)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        for c in self.held:
            c.close()
        self.listener.close()


def test_a_read_that_times_out_on_a_hung_server_is_sent_again(bot: Bot, server: Server) -> None:
    visitor = bot.visitor()
    with Client(bot.server.url, bot.api_key) as direct:
        interaction_id = direct.ask_start(visitor.conversation_id, "Still there?")
    proxy = HangFirst(server.port)
    try:
        with Client(proxy.url, bot.api_key, timeout=0.5) as client:
            assert client.interactions.get(interaction_id)["status"] == "pending"
    finally:
        proxy.close()
    # A call that may not be repeated is not: the timeout reaches the caller.
    once = HangFirst(server.port)
    try:
        with Client(once.url, bot.api_key, timeout=0.5) as client, pytest.raises(httpx.ReadTimeout):
            client.ask_start(bot.visitor().conversation_id, "Twice?")
    finally:
        once.close()
