"""The streaming routes over HTTP/2 (h2c and TLS): /sse and /stream byte for
byte against curl (the HTTP/1.1 body without its chunk framing), each event or
chunk in DATA frames of its own (read frame by frame), paced events never
early, 100 paced streams on one connection served fairly, the counts exact
against the server's stats, and a client that stops reading bounded: it holds
at most its flow-control window, and its stream is reset and counted once the
request timeout passes without progress."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import httpbench
import pytest
from _h2raw import (
    CANCEL,
    DATA,
    END_STREAM,
    RST_STREAM,
    WINDOW_UPDATE,
    H2Conn,
    headers,
    request_block,
    settings,
    window_update,
)
from _stream import SSE_PREAMBLE, content, parse_sse, sse_data, sse_event, sse_stream

pytestmark = [pytest.mark.own_server, pytest.mark.h2_server]

CURL = shutil.which("curl")
need_curl = pytest.mark.skipif(CURL is None, reason="curl not installed")
BIG = 1 << 30  # a window the client never runs out of


@pytest.fixture(scope="module")
def h2c():
    with httpbench.Server(http2=True) as s:
        yield s


@pytest.fixture(scope="module")
def h2tls():
    with httpbench.Server(http2=True, tls=True) as s:
        yield s


def curl_h2(srv, target: str, tls: bool) -> tuple[bytes, str]:
    """(body, response head) as curl got them over HTTP/2."""
    proto = ["--http2", "--cacert", srv.ca_file] if tls else ["--http2-prior-knowledge"]
    out = subprocess.run([CURL, "-sS", "--max-time", "30", "-i", *proto, srv.url + target],
                         capture_output=True, timeout=60, check=True).stdout
    head, _, body = out.partition(b"\r\n\r\n")
    return body, head.decode()


@need_curl
@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2-tls"])
@pytest.mark.parametrize("events,size", [(1, 0), (3, 5), (10, 64), (4, 65), (7, 130), (2, 1024),
                                         (3, 65536)])
def test_sse_byte_exact_curl(h2c, h2tls, tls, events, size):
    srv = h2tls if tls else h2c
    before = srv.stats()
    body, head = curl_h2(srv, f"/sse?events={events}&size={size}", tls)
    assert head.startswith("HTTP/2 200")
    assert "content-type: text/event-stream" in head and "cache-control: no-cache" in head
    assert "content-length" not in head
    assert body.decode() == sse_stream(events, size)
    evs = parse_sse(body.decode())
    assert [e["id"] for e in evs] == [str(i) for i in range(1, events + 1)]
    assert all(e["event"] == "tick" and e["data"] == sse_data(size) for e in evs)
    after = srv.stats()
    assert after["sse"]["streams"] - before["sse"]["streams"] == 1
    assert after["sse"]["events"] - before["sse"]["events"] == events
    assert after["sse"]["bytes"] - before["sse"]["bytes"] == len(body) - len(SSE_PREAMBLE)
    assert after["by_protocol"]["h2"] - before["by_protocol"]["h2"] == 1
    assert after["by_route"]["sse"] - before["by_route"]["sse"] == 1


@need_curl
@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2-tls"])
@pytest.mark.parametrize("target,n,chunks", [("/stream/0", 0, 0), ("/stream/1", 1, 1),
                                             ("/stream/70000?chunk=1000", 70000, 70),
                                             ("/stream/100000", 100000, 25),
                                             ("/stream/50000?chunk=40000", 50000, 2),
                                             ("/stream/3000?chunk=700&interval=3", 3000, 5)])
def test_stream_byte_exact_curl(h2c, h2tls, tls, target, n, chunks):
    srv = h2tls if tls else h2c
    before = srv.stats()["stream"]
    body, head = curl_h2(srv, target, tls)
    assert head.startswith("HTTP/2 200") and "content-type: application/octet-stream" in head
    assert body == content(n)
    after = srv.stats()["stream"]
    assert after["streams"] - before["streams"] == 1
    assert after["chunks"] - before["chunks"] == chunks
    assert after["bytes"] - before["bytes"] == n


@need_curl
def test_head_sends_no_events(h2c):
    before = h2c.stats()["sse"]
    r = subprocess.run([CURL, "-sS", "-I", "--http2-prior-knowledge", h2c.url + "/sse?events=5"],
                       capture_output=True, timeout=30, check=True)
    assert r.stdout.startswith(b"HTTP/2 200") and b"text/event-stream" in r.stdout
    assert h2c.stats()["sse"] == before


def _open(srv, tls: bool, window: int = BIG) -> H2Conn:
    c = H2Conn(srv.port, tls_ca=srv.ca_file if tls else None,
               client_settings=settings(initial_window_size=min(window, (1 << 31) - 1)))
    if window > 65535:
        c.send(window_update(0, window - 65535))
    return c


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2-tls"])
def test_each_event_its_own_data_frame(h2c, h2tls, tls):
    srv = h2tls if tls else h2c
    with _open(srv, tls) as c:
        c.send(headers(1, request_block("/sse?events=20&size=100")))
        frames, body = c.stream_body(1)
        datas = [f.payload for f in frames if f.type == DATA and f.stream == 1]
        # the preamble, the 20 events, then the END_STREAM flag on the last event
        assert datas == [SSE_PREAMBLE.encode()] + [sse_event(i, 100).encode()
                                                   for i in range(1, 21)]
        assert frames[-1].type == DATA and frames[-1].flags & END_STREAM
        c.send(headers(3, request_block("/stream/1000?chunk=300")))
        frames, body = c.stream_body(3)
        datas = [f.payload for f in frames if f.type == DATA and f.stream == 3]
        assert datas == [content(300), content(300, 300), content(300, 600), content(100, 900)]


def test_paced_events_never_early(h2c):
    with _open(h2c, False) as c:
        t0 = time.monotonic()
        c.send(headers(1, request_block("/sse?events=4&size=8&interval=40")))
        frames, body = c.stream_body(1)
        took = time.monotonic() - t0
    assert body.decode() == sse_stream(4, 8)
    assert took >= 0.12  # three intervals of 40 ms: the server never sends an event early


def _event_order(c: H2Conn, ids: list[int]) -> list[int]:
    """The stream id of every complete event, in arrival order, until all end."""
    open_ = set(ids)
    order = []
    deadline = time.monotonic() + 60
    while open_:
        f = c.read_frame(deadline)
        assert f is not None, "the server closed the connection"
        if f.type == DATA and f.stream in open_:
            if f.payload.startswith(b"id: "):
                order.append(f.stream)
            if f.flags & END_STREAM:
                open_.discard(f.stream)
        assert f.type != RST_STREAM
    return order


def test_100_paced_streams_on_one_connection_fair(h2c):
    before = h2c.stats()
    ids = [1 + 2 * k for k in range(100)]
    with _open(h2c, False) as c:
        c.send(b"".join(headers(i, request_block("/sse?events=10&size=32&interval=20"))
                        for i in ids))
        order = _event_order(c, ids)
    assert len(order) == 1000 and all(order.count(i) == 10 for i in ids)
    # fair: whenever a stream gets its k-th event, every other one has had k-2 or more
    seen = dict.fromkeys(ids, 0)
    for i in order:
        seen[i] += 1
        assert min(seen.values()) >= seen[i] - 2, (i, seen[i], min(seen.values()))
    after = h2c.stats()
    assert after["sse"]["events"] - before["sse"]["events"] == 1000
    assert after["sse"]["streams"] - before["sse"]["streams"] == 100
    assert after["h2"]["streams_reset_sent"] == before["h2"]["streams_reset_sent"]


def test_flooding_streams_share_the_connection(h2c):
    ids = [1 + 2 * k for k in range(10)]
    with _open(h2c, False) as c:
        c.send(b"".join(headers(i, request_block("/sse?events=300&size=64")) for i in ids))
        order = _event_order(c, ids)
    assert len(order) == 3000
    # when the first stream has all its events, every other one has at least half of its own
    first_done = next(k for k in range(len(order)) if order[:k + 1].count(order[k]) == 300)
    head = order[:first_done + 1]
    assert min(head.count(i) for i in ids) >= 150


def _rss() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("route,key", [("/sse?events=1000000&size=1024", "sse"),
                                       ("/stream/1000000000?chunk=1000", "stream")])
def test_client_without_window_holds_one_window_and_is_cut(route, key):
    # the default 65535-byte windows, never given back: the server sends at most
    # that, then the stream stalls; after request_timeout it is reset and counted
    with httpbench.Server(http2=True, request_timeout=0.3) as s:
        with H2Conn(s.port) as c:
            c.send(headers(1, request_block(route)))
            deadline = time.monotonic() + 10
            frames = c.read_until(lambda f: f.type == RST_STREAM)
            assert time.monotonic() < deadline
            st = s.stats()
        got = sum(len(f.payload) for f in frames if f.type == DATA)
        rst = [f for f in frames if f.type == RST_STREAM]
        assert rst and rst[0].stream == 1 and rst[0].error_code == CANCEL
        assert not any(f.type == WINDOW_UPDATE for f in frames if f.stream == 1)
    assert 0 < got <= 65535
    assert st[key]["write_timeouts"] == 1
    assert st[key]["bytes"] <= 65535
    assert st["h2"]["streams_reset_sent"] == 1
    other = "stream" if key == "sse" else "sse"
    assert st[other]["write_timeouts"] == 0


def test_client_that_never_reads_the_socket_is_bounded():
    # an open window but a socket never read: the server stops at its socket and
    # output queue (no growing buffer), and the stream is cut and counted
    with httpbench.Server(http2=True, request_timeout=0.4) as s:
        rss0 = _rss()
        c = _open(s, False, window=(1 << 31) - 1)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        c.send(headers(1, request_block("/sse?events=100000000&size=4096")))
        deadline = time.monotonic() + 20
        while s.stats()["sse"]["write_timeouts"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        st = s.stats()
        grew = _rss() - rss0
        c.close()
    assert st["sse"]["write_timeouts"] == 1
    assert st["sse"]["bytes"] < 64 << 20  # of the 400 GB asked for: socket buffers and a batch
    assert grew < 64 << 20


@need_curl
def test_ws_still_501_over_h2(h2c):
    r = subprocess.run([CURL, "-sS", "--http2-prior-knowledge", "-w", "\n%{http_code}",
                        h2c.url + "/ws"], capture_output=True, timeout=30, check=True)
    body, _, code = r.stdout.rpartition(b"\n")
    assert code == b"501" and b"HTTP/1.1 only" in body
