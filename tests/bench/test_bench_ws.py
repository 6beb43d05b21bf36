"""The load generator's WebSocket mode: messages echoed by the embedded server,
counted exactly on both sides (ws:// URL, ws=True, the CLI, text frames, pipelined
messages, a constant message rate), and typed errors: a refused upgrade, a wrong
Sec-WebSocket-Accept, a server that never completes the upgrade (timeout), a
broken frame (protocol), the server's close with messages in flight (ws_close); and
every frame the generator sends carries its own masking key (RFC 6455 5.3)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpbench
import pytest
from _raw import RawServer
from _stream import content, scripted_ws, ws_frame

pytestmark = pytest.mark.own_server


@pytest.fixture(scope="module")
def srv():
    with httpbench.Server() as s:
        yield s


def ws_delta(srv, before):
    after = srv.stats()["ws"]
    return {k: after[k] - before[k] for k in ("upgrades", "messages_in", "messages_out",
                                                "payload_in", "errors")}


def settle(srv, key: str, want: int) -> None:
    end = time.monotonic() + 5
    while srv.stats()["ws"][key] < want and time.monotonic() < end:
        time.sleep(0.01)


@pytest.mark.parametrize("c,n,size", [(1, 100, 0), (4, 4000, 1024), (3, 500, 70000)])
def test_echo_counts_exact(srv, c, n, size):
    before = srv.stats()["ws"]
    r = httpbench.bench(f"ws://127.0.0.1:{srv.port}/ws", concurrency=c, n=n, ws_size=size)
    assert r.successes == r.responses == n and r.errors == 0
    assert r.config.protocol == "websocket"
    assert r.latency.count == n and r.ttfb.count == n
    assert r.metadata["doc_length"] == size
    settle(srv, "upgrades", before["upgrades"] + c)
    d = ws_delta(srv, before)
    assert d == {"upgrades": c, "messages_in": n, "messages_out": n, "payload_in": n * size,
                 "errors": 0}
    assert set(r.error_counts) >= {"upgrade", "ws_close"}


def test_text_pipelined_and_body(srv):
    before = srv.stats()["ws"]
    r = httpbench.bench(srv.url + "/ws", ws=True, body="κόσμε", ws_text=True, concurrency=2,
                        pipeline=8, n=1000)
    assert r.successes == 1000 and r.metadata["doc_length"] == len("κόσμε".encode())
    d = ws_delta(srv, before)
    assert d["messages_in"] == d["messages_out"] == 1000 and d["errors"] == 0


def test_constant_rate(srv):
    r = httpbench.bench(f"ws://127.0.0.1:{srv.port}/ws", rate=2000, n=400, concurrency=2)
    assert r.successes == 400 and r.latency_uncorrected is not None
    assert r.latency_uncorrected.count == 400


def test_cli_counts_messages(srv, tmp_path):
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "-m", "httpbench", f"ws://127.0.0.1:{srv.port}/ws",
                        "-c", "4", "-n", "4000", "--json", str(out)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    d = json.loads(out.read_text())["record"]
    assert d["successes"] == 4000 and d["config"]["protocol"] == "websocket"


def test_refused_upgrade_is_typed(srv):
    r = httpbench.bench(srv.url + "/bytes/10", ws=True, n=5, timeout=5)
    assert r.successes == 0 and r.error_counts["upgrade"] == 5 and r.errors == 5
    assert "status 200" in r.metadata["first_error"]


def test_wrong_accept_is_typed():
    with RawServer(scripted_ws(lambda c: time.sleep(1), good_accept=False)) as s:
        r = httpbench.bench(s.url("/ws"), ws=True, n=2, timeout=5)
    assert r.error_counts["upgrade"] == 2
    assert "Sec-WebSocket-Accept" in r.metadata["first_error"]


def test_upgrade_never_completes_times_out():
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)  # the kernel completes connects; nobody ever answers
    try:
        r = httpbench.bench(f"ws://127.0.0.1:{ls.getsockname()[1]}/ws", n=2, timeout=0.3)
    finally:
        ls.close()
    assert r.error_counts["timeout"] == 2 and r.successes == 0


def test_broken_frame_is_a_protocol_error():
    def after(c):
        c.sock.recv(65536)
        c.send(bytes([0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0]))  # 2^63 bytes
        time.sleep(1)

    with RawServer(scripted_ws(after)) as s:
        r = httpbench.bench(s.url("/ws"), ws=True, n=1, timeout=5)
    assert r.error_counts["protocol"] == 1
    assert "2^63" in r.metadata["first_error"]


@pytest.mark.parametrize("pipeline,size", [(1, 100), (3, 100), (2, 70000)])
def test_every_frame_has_its_own_mask(pipeline, size):
    # a raw server reads the generator's frames, unmasks each with its own key and
    # echoes the payload: the keys differ from frame to frame, the payloads are exact
    # (70000 bytes: a frame staged across two of the generator's send buffers)
    n = 12
    keys: list[bytes] = []
    payloads: list[bytes] = []

    def after(c):
        buf = b""

        def need(k):
            nonlocal buf
            while len(buf) < k:
                got = c.sock.recv(1 << 20)
                if not got:
                    raise EOFError
                buf += got

        for _ in range(n):
            need(2)
            ln, at = buf[1] & 0x7F, 2
            if ln == 126:
                need(4)
                ln, at = int.from_bytes(buf[2:4], "big"), 4
            elif ln == 127:
                need(10)
                ln, at = int.from_bytes(buf[2:10], "big"), 10
            assert buf[1] & 0x80  # masked
            need(at + 4 + ln)
            key = buf[at:at + 4]
            data = bytes(b ^ key[i % 4] for i, b in enumerate(buf[at + 4:at + 4 + ln]))
            buf = buf[at + 4 + ln:]
            keys.append(key)
            payloads.append(data)
            c.send(ws_frame(2, data, mask=None))
        time.sleep(0.5)

    with RawServer(scripted_ws(after)) as s:
        r = httpbench.bench(s.url("/ws"), ws=True, n=n, ws_size=size, pipeline=pipeline,
                            timeout=10)
    assert r.successes == n and r.errors == 0
    assert payloads == [content(size)] * n
    assert len(set(keys)) == n  # 12 random 32-bit keys: a repeat has odds of 1.5e-8


def test_server_close_in_flight_is_ws_close():
    def after(c):
        c.sock.recv(65536)
        c.send(ws_frame(8, b"\x03\xe9going", mask=None))  # 1001
        time.sleep(1)

    with RawServer(scripted_ws(after)) as s:
        r = httpbench.bench(s.url("/ws"), ws=True, n=1, timeout=5)
    assert r.error_counts["ws_close"] == 1
    assert "code 1001" in r.metadata["first_error"]


def test_bad_arguments(srv):
    with pytest.raises(ValueError, match="http2"):
        httpbench.bench(f"ws://127.0.0.1:{srv.port}/ws", n=1, http2=True)
    with pytest.raises(ValueError, match="keep-alive"):
        httpbench.bench(f"ws://127.0.0.1:{srv.port}/ws", n=1, keepalive=False)


def test_not_an_echo_is_a_protocol_error(srv):
    # a pushing endpoint answers with messages that are not the echo: typed, not counted
    r = httpbench.bench(f"ws://127.0.0.1:{srv.port}/ws?push=1000&size=3", n=3, ws_size=16,
                        timeout=5)
    assert r.successes == 0 and r.error_counts["protocol"] >= 1
    assert "not its echo" in r.metadata["first_error"]
