"""An ask outlives a crash of the server; 429s are waited out."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from blockhook import ApiError, Client
from conftest import Receiver, Server, make_bot, until


def test_an_ask_survives_a_server_restart(tmp_path: Path, receiver: Receiver) -> None:
    server = Server(tmp_path)
    server.start()
    try:
        bot = make_bot(server, receiver.url)
        visitor = bot.visitor()
        answer_requests: list[float] = []

        def record(request: httpx.Request) -> None:
            if request.url.path.endswith("/answer"):
                answer_requests.append(time.monotonic())

        http = httpx.Client(event_hooks={"request": [record]}, timeout=30)
        with Client(server.url, bot.api_key, http_client=http) as client, ThreadPoolExecutor(1) as pool:
            asked = pool.submit(client.ask, visitor.conversation_id, "Proceed?", timeout=120)
            visitor.question()
            until(lambda: answer_requests, "the client to wait for the answer")
            server.kill()
            killed_at = time.monotonic()
            # The client notices and keeps trying while the server is down.
            until(lambda: any(t > killed_at for t in answer_requests), "a request to the dead server")
            assert not asked.done()
            server.start()
            visitor.click("accept")
            answer = asked.result(timeout=60)
        http.close()
        assert answer.answer == "accepted"
    finally:
        server.stop()


def test_an_ask_survives_a_graceful_restart(tmp_path: Path, receiver: Receiver) -> None:
    server = Server(tmp_path)
    server.start()
    try:
        bot = make_bot(server, receiver.url)
        visitor = bot.visitor()
        waits: list[httpx.Request] = []
        answers: list[bytes] = []

        def asked_for(request: httpx.Request) -> None:
            if request.url.path.endswith("/answer"):
                waits.append(request)

        def record(response: httpx.Response) -> None:
            if response.request.url.path.endswith("/answer"):
                answers.append(response.read())

        http = httpx.Client(event_hooks={"request": [asked_for], "response": [record]}, timeout=30)
        with Client(server.url, bot.api_key, http_client=http) as client, ThreadPoolExecutor(1) as pool:
            asked = pool.submit(client.ask, visitor.conversation_id, "Proceed?", timeout=120)
            visitor.question()
            until(lambda: waits, "the client to wait for the answer")
            time.sleep(0.3)  # the wait is held by the server
            stopping = time.monotonic()
            # SIGTERM: the server ends the held wait with "pending" and exits 0.
            server.stop()
            assert server.proc is not None and server.proc.returncode == 0
            assert time.monotonic() - stopping < 10
            until(lambda: answers, "the held wait to end")
            assert b'"pending"' in answers[0]
            assert not asked.done()
            server.start()
            visitor.click("accept")
            answer = asked.result(timeout=60)
        http.close()
        assert answer.answer == "accepted"
    finally:
        server.stop()


def test_rate_limited_calls_wait_for_retry_after(tmp_path: Path, receiver: Receiver) -> None:
    server = Server(tmp_path, "--limit-api-key", "1/s")
    server.start()
    try:
        bot = make_bot(server, receiver.url)
        with Client(server.url, bot.api_key, max_retries=0) as impatient:
            with pytest.raises(ApiError) as limited:
                for _ in range(5):
                    list(impatient.events.list())
            assert (limited.value.status, limited.value.code) == (429, "rate_limited")
            assert limited.value.retry_after is not None and limited.value.retry_after >= 1
        with Client(server.url, bot.api_key) as patient:
            for _ in range(3):
                assert list(patient.events.list()) == []
    finally:
        server.stop()
