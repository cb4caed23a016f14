#!/usr/bin/env python3
"""Flood run of docs/notes/FLOODS.md: an anonymous conversation flood (10 s)
and a 2,000-stream SSE flood of one visitor token, against the release
binary on loopback, with the §10 limits on (defaults) and off.

Bounded: loopback only, DURATION seconds of conversations, STREAMS streams.
Usage: scripts/flood.py [target/release/blockhook]
"""

import http.client
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/blockhook"
DURATION = 10.0
WORKERS = 8
STREAMS = 2000
ADMIN = "adm_flood"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def db_bytes(path):
    return sum(os.path.getsize(p) for p in (path, path + "-wal", path + "-shm") if os.path.exists(p))


def request(port, method, path, body=None, token=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data) if data else None


def start(limits_on, tmp):
    port = free_port()
    db = os.path.join(tmp, f"flood-{'on' if limits_on else 'off'}.db")
    args = [BIN, "serve", "--addr", f"127.0.0.1:{port}", "--database", f"sqlite://{db}", "--admin-token", ADMIN]
    if not limits_on:
        args += ["--limit-conversations", "off", "--limit-visitor", "off", "--limit-api-key", "off",
                 "--max-streams-per-visitor", "off"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, port, db


def conversation_flood(port, bot_id):
    counts = {}
    sent = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + DURATION
    body = b"{}"

    def worker():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        local = {}
        n = 0
        while time.monotonic() < deadline:
            try:
                c.request("POST", f"/widget/v1/chatbots/{bot_id}/conversations", body=body,
                          headers={"Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
                local[r.status] = local.get(r.status, 0) + 1
            except (OSError, http.client.HTTPException):
                local["error"] = local.get("error", 0) + 1
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            n += 1
        with lock:
            sent[0] += n
            for k, v in local.items():
                counts[k] = counts.get(k, 0) + v

    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sent[0], counts


def stream_flood(port, conv_id, token):
    req = (f"GET /widget/v1/conversations/{conv_id}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n").encode()
    socks, counts = [], {}
    for _ in range(STREAMS):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(req)
            head = b""
            while b"\r\n" not in head:
                chunk = s.recv(256)
                if not chunk:
                    break
                head += chunk
            status = int(head.split(b" ")[1]) if head else "closed"
        except (OSError, ValueError, IndexError):
            status = "error"
            s = None
        counts[status] = counts.get(status, 0) + 1
        if status == 200:
            socks.append(s)
        elif s:
            s.close()
    return socks, counts


def new_bot(port):
    _, bot = request(port, "POST", "/api/v1/chatbots",
                     {"name": "flood", "webhook_url": "https://93.184.215.14/hook"}, ADMIN)
    return bot


def run_conversations(limits_on, tmp):
    proc, port, db = start(limits_on, tmp)
    try:
        bot = new_bot(port)
        time.sleep(0.5)
        rss0, db0 = rss_kib(proc.pid), db_bytes(db)
        t0 = time.monotonic()
        sent, counts = conversation_flood(port, bot["id"])
        return {"sent": sent, "secs": round(time.monotonic() - t0, 1), "counts": counts,
                "rss_mib": round((rss_kib(proc.pid) - rss0) / 1024, 1),
                "db_mib": round((db_bytes(db) - db0) / 1048576, 2)}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run_streams(limits_on, tmp):
    # A fresh server: the conversation flood used this address's allowance.
    proc, port, _ = start(limits_on, tmp)
    try:
        bot = new_bot(port)
        _, conv = request(port, "POST", f"/widget/v1/chatbots/{bot['id']}/conversations", {})
        time.sleep(0.5)
        rss1, fd1 = rss_kib(proc.pid), fds(proc.pid)
        t0 = time.monotonic()
        socks, counts = stream_flood(port, conv["conversation_id"], conv["visitor_token"])
        time.sleep(1.0)
        out = {"opened": STREAMS, "secs": round(time.monotonic() - t0, 1), "counts": counts,
               "rss_mib": round((rss_kib(proc.pid) - rss1) / 1024, 1), "fds": fds(proc.pid) - fd1}
        for s in socks:
            s.close()
        # How long until the server has let go of the closed streams.
        t0 = time.monotonic()
        while fds(proc.pid) - fd1 > 4 and time.monotonic() - t0 < 60:
            time.sleep(0.25)
        out["freed_secs"] = round(time.monotonic() - t0, 1)
        out["fds_after"] = fds(proc.pid) - fd1
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    with tempfile.TemporaryDirectory() as tmp:
        for on in (True, False):
            limits = "on (defaults)" if on else "off"
            print(json.dumps({"limits": limits, "conversations": run_conversations(on, tmp)}), flush=True)
            print(json.dumps({"limits": limits, "streams": run_streams(on, tmp)}), flush=True)


if __name__ == "__main__":
    main()
