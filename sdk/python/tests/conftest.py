"""A real `blockhook serve` (SQLite, loopback), a real webhook receiver, and a
visitor who clicks through the widget's HTTP API."""

from __future__ import annotations

import http.server
import os
import queue
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[3]
BINARY = Path(os.environ.get("BLOCKHOOK_BIN", ROOT / "target" / "debug" / "blockhook"))
ADMIN = "adm_sdk_python_tests"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def until(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    """Polls ``check`` until it returns something truthy (a wait, not an assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Server:
    """`blockhook serve` on a fixed port and SQLite file, so it can be
    killed and started again at the same address with the same data."""

    def __init__(self, workdir: Path, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.db = workdir / "blockhook.db"
        self.workdir = workdir
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = open(self.workdir / f"server-{self.starts}.log", "wb")
        self.proc = subprocess.Popen(
            [str(BINARY), "serve", "--addr", f"127.0.0.1:{self.port}",
             "--database", f"sqlite://{self.db}", "--admin-token", ADMIN,
             "--allow-private-webhooks", "--log-format", "json", *self.extra],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()

        def healthy() -> bool:
            assert self.proc is not None and self.proc.poll() is None, "the server exited at start"
            try:
                return httpx.get(self.url + "/healthz", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        until(healthy, "the server to answer /healthz")

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed or answered."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Delivery:
    headers: dict[str, str]
    body: bytes


class Receiver:
    """A webhook receiver on loopback that keeps every request it gets."""

    def __init__(self) -> None:
        self.got: queue.Queue[Delivery] = queue.Queue()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                receiver.got.put(Delivery(dict(self.headers.items()), body))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/hook"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def next(self, event_type: str, timeout: float = 20.0) -> Delivery:
        """The next delivery of this event type (others are passed over)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {event_type} delivery arrived")
            d = self.got.get(timeout=left)
            if f'"type":"{event_type}"'.encode() in d.body:
                return d


@dataclass
class Bot:
    id: str
    api_key: str
    signing_secret: str
    server: Server

    def visitor(self) -> Visitor:
        r = httpx.post(f"{self.server.url}/widget/v1/chatbots/{self.id}/conversations", json={})
        r.raise_for_status()
        body = r.json()
        return Visitor(self.server.url, body["conversation_id"], body["visitor_token"])


@dataclass
class Visitor:
    """The person in the widget: reads the conversation and clicks."""

    url: str
    conversation_id: str
    token: str

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def question(self, timeout: float = 20.0) -> dict[str, Any]:
        """The newest message with blocks still open, once it is there."""

        def open_question() -> dict[str, Any] | None:
            r = httpx.get(f"{self.url}/widget/v1/conversations/{self.conversation_id}/messages",
                          headers=self._auth())  # fmt: skip
            r.raise_for_status()
            for m in r.json()["data"]:
                if m["blocks"] and not m["blocks"][0]["state"]["disabled"]:
                    return dict(m)
            return None

        return dict(until(open_question, "the question to appear in the widget", timeout))

    def click(self, action_id: str, comment: str | None = None) -> dict[str, Any]:
        m = self.question()
        block = next(b for b in m["blocks"] if b["type"] == "actions")
        body: dict[str, Any] = {"block_id": block["block_id"], "action_id": action_id}
        if comment is not None:
            body["comment"] = comment
        r = httpx.post(f"{self.url}/widget/v1/messages/{m['id']}/clicks", json=body, headers=self._auth())
        assert r.status_code == 200, r.text
        return dict(r.json())


def make_bot(server: Server, webhook_url: str) -> Bot:
    r = httpx.post(
        f"{server.url}/api/v1/chatbots",
        json={"name": "sdk tests", "webhook_url": webhook_url},
        headers={"Authorization": f"Bearer {ADMIN}"},
    )
    assert r.status_code == 201, r.text
    b = r.json()
    return Bot(b["id"], b["api_key"], b["signing_secret"], server)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    assert BINARY.exists(), f"{BINARY} is missing: run `cargo build` first"
    s = Server(tmp_path_factory.mktemp("server"))
    s.start()
    yield s
    s.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.http.shutdown()


@pytest.fixture
def bot(server: Server, receiver: Receiver) -> Bot:
    return make_bot(server, receiver.url)
