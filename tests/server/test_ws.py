"""The /ws route: WebSocket (RFC 6455) over HTTP/1.1, against the `websockets`
library (echo of text and binary messages small and large, ping/pong, the
close handshake both ways, server push) with every count exact against the
server's stats; and hostile peers on a raw socket: invalid UTF-8 (close 1007),
a frame claiming 2^63 bytes, an unmasked frame (1002), fragments forever
(1009), a client that never reads (cut at the write timeout), one that never
answers the server's close (closed after a second), and bad upgrades."""

from __future__ import annotations

import socket
import struct
import time

import httpbench
import pytest
from _stream import RawWS, content, ws_frame

websockets = pytest.importorskip("websockets")
from websockets.sync.client import connect  # noqa: E402

pytestmark = pytest.mark.own_server


@pytest.fixture(scope="module")
def srv():
    with httpbench.Server() as s:
        yield s


def ws_url(srv, query: str = "") -> str:
    return f"ws://127.0.0.1:{srv.port}/ws{query}"


def wait_for(cond, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def delta(before: dict, after: dict) -> dict:
    out = {}
    for k, v in after.items():
        if isinstance(v, dict):
            out[k] = {c: n - before[k].get(c, 0) for c, n in v.items() if n - before[k].get(c, 0)}
        else:
            out[k] = v - before[k]
    return out


def test_echo_exact(srv):
    before = srv.stats()["ws"]
    msgs: list[str | bytes] = ["hello", b"\x00\xff" * 3, "", b"", "κόσμε€" * 50,
                               content(1024), content(70000), "x" * 200000]
    with connect(ws_url(srv), max_size=None, compression=None) as ws:
        for m in msgs:
            ws.send(m)
            assert ws.recv() == m
    assert wait_for(lambda: srv.stats()["ws"]["close_received"].get(1000) ==
                    before["close_received"].get(1000, 0) + 1)
    d = delta(before, srv.stats()["ws"])
    assert d["upgrades"] == 1
    assert d["messages_in"] == len(msgs) and d["messages_out"] == len(msgs)
    assert d["payload_in"] == d["payload_out"] == sum(
        len(m.encode() if isinstance(m, str) else m) for m in msgs)
    assert d["frames_in"] == len(msgs) + 1  # one frame each (websockets does not fragment), close
    assert d["frames_out"] >= len(msgs) + 1  # large messages echo as they arrive: more frames
    assert d["close_received"] == {1000: 1} and d["close_sent"] == {1000: 1}
    assert d["errors"] == 0
    st = srv.stats()
    assert st["by_route"]["ws"] >= 1 and st["by_status"][101] >= 1


def test_ping_pong(srv):
    before = srv.stats()["ws"]
    with connect(ws_url(srv), compression=None) as ws:
        for i in range(5):
            assert ws.ping(b"p%d" % i).wait(5)
        ws.send("after")
        assert ws.recv() == "after"
    assert wait_for(lambda: delta(before, srv.stats()["ws"])["close_received"] == {1000: 1})
    d = delta(before, srv.stats()["ws"])
    assert d["pings"] == 5 and d["frames_out"] == 5 + 1 + 1  # pongs, the echo, the close


@pytest.mark.parametrize("n,size,text", [(1, 0, False), (100, 10, False), (1000, 1, True),
                                         (20, 70000, False), (3, 1 << 20, False)])
def test_push(srv, n, size, text):
    before = srv.stats()["ws"]
    want = content(size).decode() if text else content(size)
    got = []
    with connect(ws_url(srv, f"?push={n}&size={size}" + ("&text=1" if text else "")),
                 max_size=None, compression=None) as ws:
        for m in ws:  # ends with the server's close (1000)
            got.append(m)
        assert ws.close_code == 1000
    assert got == [want] * n
    assert wait_for(lambda: delta(before, srv.stats()["ws"])["close_received"] == {1000: 1})
    d = delta(before, srv.stats()["ws"])
    assert d["pushed"] == n and d["messages_out"] == n and d["payload_out"] == n * size
    assert d["close_sent"] == {1000: 1}


def test_push_paced(srv):
    t0 = time.monotonic()
    with connect(ws_url(srv, "?push=4&size=3&interval=30"), compression=None) as ws:
        got = list(ws)
    assert got == [content(3)] * 4
    assert time.monotonic() - t0 >= 3 * 0.030 * 0.9


def test_client_close_code_echoed(srv):
    before = srv.stats()["ws"]
    with connect(ws_url(srv), compression=None) as ws:
        ws.close(code=4001, reason="bye")
        assert ws.protocol.close_rcvd.code == 4001
    # codes outside 1000 .. 1014 are counted together, under 0
    assert wait_for(lambda: delta(before, srv.stats()["ws"])["close_received"] == {0: 1})
    assert delta(before, srv.stats()["ws"])["close_sent"] == {0: 1}


@pytest.mark.parametrize("frames,code", [
    (ws_frame(1, b"ok\xc0\xaf"), 1007),                      # overlong '/'
    (ws_frame(1, b"\xce", fin=False) + ws_frame(0, b"\xba\xff"), 1007),  # bad across fragments
    (bytes([0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0]) + b"abcd", 1002),   # 2^63 bytes
    (ws_frame(1, b"plain", mask=None), 1002),                # unmasked from a client
    (ws_frame(3, b""), 1002),                                # reserved opcode
    (ws_frame(0, b"x"), 1002),                               # continuation of nothing
    (ws_frame(9, b"x" * 126), 1002),                         # a control frame over 125 bytes
    (ws_frame(8, b"\x03"), 1002),                            # a one-byte close payload
    (bytes([0x82, 0xFF, 0x10, 0, 0, 0, 0, 0, 0, 0]) + b"abcd", 1009),   # 2^60: over the limit
])
def test_protocol_errors_close(srv, frames, code):
    before = srv.stats()["ws"]
    ws = RawWS(srv.port)
    try:
        ws.send(frames)
        assert ws.recv_close() == code
        ws.sock.settimeout(5)
        assert ws.sock.recv(1) == b""  # then the server closes the connection
    finally:
        ws.close()
    d = delta(before, srv.stats()["ws"])
    assert d["errors"] == 1 and d["close_sent"] == {code: 1}


def test_fragments_forever(srv):
    ws = RawWS(srv.port)
    try:
        frames = ws_frame(2, b"", fin=False) + ws_frame(0, b"", fin=False) * 5000
        ws.sock.settimeout(10)
        try:
            ws.send(frames)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert ws.recv_close() == 1009
    finally:
        ws.close()


def test_never_reading_client_is_cut():
    with httpbench.Server(request_timeout=0.5) as s:
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        c.connect(("127.0.0.1", s.port))
        ws = RawWS.__new__(RawWS)
        ws.sock, ws.buf = c, b""
        c.sendall(b"GET /ws?push=100000000&size=65536 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket"
                  b"\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                  b"Sec-WebSocket-Version: 13\r\n\r\n")
        assert wait_for(lambda: s.stats()["connections_closed"] == 1, 10)
        st = s.stats()
        c.close()
    assert st["ws"]["write_timeouts"] == 1
    assert st["ws"]["pushed"] < 300 and st["bytes_out"] < 20 << 20


def test_never_answered_close():
    with httpbench.Server() as s:
        ws = RawWS(s.port, "/ws?push=1&size=2")
        try:
            assert ws.recv_frame() == (2, True, content(2))
            assert ws.recv_close() == 1000
            t0 = time.monotonic()
            ws.sock.settimeout(10)
            assert ws.sock.recv(1) == b""  # no reply from us: the server gives up
            waited = time.monotonic() - t0
        finally:
            ws.close()
        assert wait_for(lambda: s.stats()["ws"]["close_timeouts"] == 1)
    assert 0.5 <= waited < 5


def upgrade(port: int, headers: str, method: str = "GET", version: str = "1.1") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"{method} /ws HTTP/{version}\r\nHost: x\r\n{headers}\r\n".encode())
        out = b""
        while b"\r\n\r\n" not in out:
            got = s.recv(4096)
            if not got:
                break
            out += got
        return out


GOOD = ("Upgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n")


def test_upgrade_accept(srv):
    out = upgrade(srv.port, GOOD)
    assert out.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
    assert b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n" in out
    assert b"Upgrade: websocket\r\n" in out and b"Connection: Upgrade\r\n" in out


@pytest.mark.parametrize("headers,method,status", [
    (GOOD.replace("Upgrade: websocket\r\n", ""), "GET", b"400"),
    (GOOD.replace("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", ""), "GET", b"400"),
    (GOOD.replace("dGhlIHNhbXBsZSBub25jZQ==", "short"), "GET", b"400"),
    (GOOD.replace("keep-alive, Upgrade", "keep-alive"), "GET", b"400"),
    (GOOD.replace("Version: 13", "Version: 8"), "GET", b"426"),
    (GOOD + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", "GET", b"400"),  # two keys
    (GOOD, "POST", b"405"),
])
def test_bad_upgrade(srv, headers, method, status):
    out = upgrade(srv.port, headers, method)
    assert out.startswith(b"HTTP/1.1 " + status)
    if status == b"426":
        assert b"Sec-WebSocket-Version: 13\r\n" in out


def test_bad_parameters(srv):
    out = upgrade(srv.port, GOOD).split(b"\r\n")[0]
    assert out.startswith(b"HTTP/1.1 101")
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"GET /ws?push=x HTTP/1.1\r\nHost: x\r\n" + GOOD.encode() + b"\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400")


def test_struct_frame_helper():
    # the raw helper itself: RFC 6455 5.7's masked "Hello"
    assert ws_frame(1, b"Hello") == bytes([0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D,
                                           0x51, 0x58])
    assert struct.unpack(">H", ws_frame(2, b"x" * 300, mask=None)[2:4])[0] == 300


def test_over_tls():
    import ssl

    with httpbench.Server(tls=True) as s:
        ctx = ssl.create_default_context(cafile=s.ca_file)
        with connect(f"wss://127.0.0.1:{s.port}/ws?push=2&size=3", ssl=ctx) as ws:
            assert list(ws) == [content(3)] * 2
        with connect(f"wss://127.0.0.1:{s.port}/ws", ssl=ctx, max_size=None) as ws:
            ws.send(content(100000))
            assert ws.recv() == content(100000)
        r = httpbench.bench(f"wss://127.0.0.1:{s.port}/ws", n=500, concurrency=2,
                            ca_file=s.ca_file)
        assert r.successes == 500
        assert wait_for(lambda: s.stats()["ws"]["upgrades"] == 4)
        assert s.stats()["ws"]["messages_in"] == 501


def test_http10_upgrade_refused(srv):
    assert upgrade(srv.port, GOOD, version="1.0").startswith(b"HTTP/1.1 400")
