"""permessage-deflate (RFC 7692) on the server's /ws: negotiated only when the
client offers it (parameters answered or the offer declined), compressed
messages echoed byte for byte (text and binary, with and without context
takeover, many messages, a fragmented compressed message), RSV1 on an echo's
first frame only; a decompression bomb closed with 1009 and corrupt deflate
data with 1007; every count exact against the server's stats. Against the
`websockets` package and, where a client must misbehave, a raw socket."""

from __future__ import annotations

import os
import zlib

import httpbench
import pytest
from _stream import RawWS, content, ws_frame

websockets = pytest.importorskip("websockets")
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

pytestmark = pytest.mark.own_server

TAIL = b"\x00\x00\xff\xff"


@pytest.fixture(scope="module")
def srv():
    with httpbench.Server() as s:
        yield s


def url(srv) -> str:
    return f"ws://127.0.0.1:{srv.port}/ws"


def deflate_conn(srv, query: str = "", **params):
    return connect(url(srv) + query, max_size=None, compression=None,
                   extensions=[ClientPerMessageDeflateFactory(**params)])


def compress(data: bytes) -> bytes:
    """A message's payload as a client sends it: raw deflate, sync flush, tail stripped."""
    z = zlib.compressobj(6, zlib.DEFLATED, -15)
    out = z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(TAIL)
    return out[:-4]


def wait_closed(srv, before: dict, n: int = 1) -> dict:
    import time

    end = time.monotonic() + 5
    while time.monotonic() < end:
        st = srv.stats()["ws"]
        if sum(st["close_received"].values()) >= sum(before["close_received"].values()) + n:
            return st
        time.sleep(0.01)
    return srv.stats()["ws"]


def test_no_offer_no_extension(srv):
    with connect(url(srv), compression=None) as ws:
        assert "Sec-WebSocket-Extensions" not in ws.response.headers
        ws.send(b"x")
        assert ws.recv() == b"x"


@pytest.mark.parametrize("params,answer", [
    ({}, "permessage-deflate"),
    ({"server_no_context_takeover": True, "client_no_context_takeover": True},
     "permessage-deflate; server_no_context_takeover; client_no_context_takeover"),
    ({"server_max_window_bits": 10, "client_max_window_bits": 9},
     "permessage-deflate; server_max_window_bits=10"),
])
def test_echo_exact(srv, params, answer):
    before = srv.stats()["ws"]
    msgs: list[str | bytes] = ["hello", "κόσμε€" * 300, content(70000), os.urandom(9000),
                               os.urandom(70000), b"\x00" * 300000, "", b""]
    msgs += [f"message {i} " * (i + 1) for i in range(200)]
    with deflate_conn(srv, **params) as ws:
        assert ws.response.headers["Sec-WebSocket-Extensions"] == answer
        assert len(ws.protocol.extensions) == 1
        for m in msgs:
            ws.send(m)
            assert ws.recv() == m
    after = wait_closed(srv, before)
    assert after["deflate"] - before["deflate"] == 1
    assert after["compressed"] - before["compressed"] == len(msgs)
    assert after["messages_in"] - before["messages_in"] == len(msgs)
    assert after["messages_out"] - before["messages_out"] == len(msgs)
    assert after["errors"] == before["errors"]


@pytest.mark.parametrize("offer", [
    "permessage-deflate; server_max_window_bits=8",  # zlib cannot keep an 8-bit window
    "permessage-deflate; server_max_window_bits=16",
    "permessage-deflate; server_max_window_bits",
    "permessage-deflate; client_no_context_takeover=1",
    "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
    "permessage-deflate; x-unknown",
    "x-webkit-deflate-frame",
])
def test_offers_declined(srv, offer):
    ws = RawWS(srv.port, extensions=offer)
    try:
        assert "sec-websocket-extensions" not in ws.head.lower()
        ws.send(ws_frame(2, b"abc"))
        assert ws.recv_frame() == (2, True, b"abc") and not ws.last_rsv1
    finally:
        ws.close()


def test_second_offer_accepted(srv):
    ws = RawWS(srv.port, extensions="permessage-deflate; x-unknown, "
                                    "permessage-deflate; server_max_window_bits=12")
    try:
        assert "Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=12" in ws.head
    finally:
        ws.close()


def _echo(ws: RawWS) -> tuple[list[tuple[int, bool, bool]], bytes]:
    """The echoed message's frames (opcode, fin, rsv1) and its inflated bytes."""
    frames, payload = [], b""
    while True:
        f = ws.recv_frame()
        assert f is not None
        frames.append((f[0], f[1], ws.last_rsv1))
        payload += f[2]
        if f[1]:
            return frames, zlib.decompressobj(-15).decompress(payload + TAIL)


def test_fragmented_compressed_message(srv):
    before = srv.stats()["ws"]
    text = ("fragmented κόσμε " * 2000).encode()
    z = compress(text)
    third = len(z) // 3
    ws = RawWS(srv.port, extensions="permessage-deflate; client_no_context_takeover")
    try:
        ws.send(ws_frame(1, z[:third], fin=False, rsv1=True) + ws_frame(0, z[third:2 * third], fin=False)
                + ws_frame(9, b"ping") + ws_frame(0, z[2 * third:]))
        assert ws.recv_frame() == (10, True, b"ping")  # the pong goes before the echo's end
        frames, got = _echo(ws)
    finally:
        ws.close()
    assert got == text
    assert frames[0][:1] == (1,) and frames[0][2] is True  # RSV1 on the first frame
    assert all(op == 0 and not rsv1 for op, _, rsv1 in frames[1:])
    after = srv.stats()["ws"]
    assert after["compressed"] - before["compressed"] == 1


def test_compressed_in_small_pieces(srv):
    # the frame arrives a few bytes at a time: the pump resumes on every piece
    import time

    text = ("small pieces " * 400).encode() + os.urandom(300)
    frame = ws_frame(2, compress(text), rsv1=True)
    ws = RawWS(srv.port, extensions="permessage-deflate")
    try:
        for i in range(0, len(frame), 37):
            ws.send(frame[i:i + 37])
            time.sleep(0.001)
        frames, got = _echo(ws)
    finally:
        ws.close()
    assert got == text and frames[0][2] is True


def test_large_inflation_takes_turns(srv):
    # 40 MiB of zeros from ~40 KB: inflated in turns of the worker's budget (the
    # connection goes back to the ready queue between them) and echoed whole
    before = srv.stats()["ws"]
    with deflate_conn(srv) as ws:
        ws.send(b"\0" * (40 << 20))
        assert ws.recv() == b"\0" * (40 << 20)
        ws.send("after")
        assert ws.recv() == "after"
    after = wait_closed(srv, before)
    assert after["compressed"] - before["compressed"] == 2


@pytest.mark.parametrize("n,size,text", [(5, 100, False), (3, 70000, True), (200, 16, False)])
def test_push_compressed(srv, n, size, text):
    before = srv.stats()["ws"]
    q = f"?push={n}&size={size}" + ("&text=1" if text else "")
    with deflate_conn(srv, q) as ws:
        got = [ws.recv() for _ in range(n)]
    want = content(size).decode() if text else content(size)
    assert got == [want] * n
    after = wait_closed(srv, before)
    assert after["pushed"] - before["pushed"] == n
    assert after["compressed"] - before["compressed"] == n
    assert after["close_sent"].get(1000, 0) - before["close_sent"].get(1000, 0) == 1
    # on the wire (no context takeover: each message inflates alone): RSV1 on each
    # message's first frame
    ws = RawWS(srv.port, target="/ws" + q,
               extensions="permessage-deflate; server_no_context_takeover")
    try:
        for _ in range(n):
            frames, data = _echo(ws)
            assert data == content(size) and frames[0][2] is True
        assert ws.recv_close() == 1000
    finally:
        ws.close()


def test_uncompressed_message_on_a_deflate_connection(srv):
    ws = RawWS(srv.port, extensions="permessage-deflate")
    try:
        ws.send(ws_frame(2, b"plain"))
        assert ws.recv_frame() == (2, True, b"plain") and not ws.last_rsv1
    finally:
        ws.close()


def _closed_with(srv, frames: bytes) -> int | None:
    ws = RawWS(srv.port, extensions="permessage-deflate")
    try:
        ws.send(frames)
        return ws.recv_close()
    finally:
        ws.close()


def test_bomb_is_bounded(srv):
    # 65 MiB of zeros in ~65 KB: inflated past the 64 MiB message limit -> 1009
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    bomb = z.compress(b"\0" * (65 << 20)) + z.flush(zlib.Z_SYNC_FLUSH)
    before = srv.stats()["ws"]
    assert len(bomb) < 100_000
    assert _closed_with(srv, ws_frame(2, bomb[:-4], rsv1=True)) == 1009
    after = srv.stats()["ws"]
    assert after["errors"] - before["errors"] == 1
    assert after["close_sent"].get(1009, 0) - before["close_sent"].get(1009, 0) == 1
    assert after["compressed"] == before["compressed"]


@pytest.mark.parametrize("frames,code", [
    (ws_frame(2, b"\xff\xff\xff\xff", rsv1=True), 1007),  # not deflate data
    (ws_frame(1, compress(b"\xff\xfe"), rsv1=True), 1007),  # inflates to invalid UTF-8
    (ws_frame(2, b"a", fin=False) + ws_frame(0, b"b", rsv1=True), 1002),  # RSV1 on a continuation
    (ws_frame(9, b"p", rsv1=True), 1002),  # RSV1 on a control frame
])
def test_broken_compressed_data_typed(srv, frames, code):
    assert _closed_with(srv, frames) == code


def test_rsv1_without_negotiation_is_a_protocol_error(srv):
    ws = RawWS(srv.port)
    try:
        ws.send(ws_frame(2, compress(b"abc"), rsv1=True))
        assert ws.recv_close() == 1002
    finally:
        ws.close()
