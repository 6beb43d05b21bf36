"""/sse and /stream/N over HTTP/3 (aioquic as the client): the body byte-identical to
HTTP/1.1's (without its chunked framing), paced on the server's timers or all at once
with interval=0, counted exactly in stats()["sse"] / ["stream"], and a client that
stops reading gets its stream cut after request_timeout (stats()["h3"]["streams_cut"])."""

from __future__ import annotations

import os
import ssl
import sys
import time
import urllib.request

import httpbench
import pytest
from httpbench._features import h3_missing

pytest.importorskip("aioquic", reason="aioquic (the HTTP/3 client) is not installed")
pytestmark = pytest.mark.skipif(h3_missing() is not None, reason=str(h3_missing()))

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from _h3peer import Peer  # noqa: E402
from _stream import content, parse_sse, sse_data, sse_event, sse_stream  # noqa: E402


@pytest.fixture
def srv():
    with httpbench.Server(tls=True, h3=True) as s:
        yield s


def _h3(p: Peer, path: str, method: str = "GET", seconds: float = 10.0) -> tuple[int, bytes]:
    sid = p.request(path, method=method)
    p.pump(seconds, until=lambda: sid in p.ended or sid in p.reset)
    assert sid in p.ended, (path, sid in p.reset)
    return p.status[sid], p.body.get(sid, b"")


def _h1(s, path: str) -> bytes:
    ctx = ssl.create_default_context(cafile=s.ca_file)
    with urllib.request.urlopen(s.url + path, context=ctx, timeout=10) as r:
        return r.read()


@pytest.mark.parametrize("events,size", [(0, 16), (1, 0), (5, 100), (3, 64), (4, 200), (2, 65536)])
def test_sse_byte_exact_and_counted(srv, events, size):
    p = Peer(srv.h3_port, srv.ca_file)
    try:
        assert p.handshake()
        status, body = _h3(p, f"/sse?events={events}&size={size}")
    finally:
        p.close()
    assert status == 200
    assert body.decode() == sse_stream(events, size)
    assert body == _h1(srv, f"/sse?events={events}&size={size}")  # HTTP/1.1's, de-chunked
    evs = parse_sse(body.decode())
    assert [e["id"] for e in evs] == [str(i) for i in range(1, events + 1)]
    assert all(e["event"] == "tick" and e["data"] == sse_data(size) for e in evs)
    st = srv.stats()
    ev_bytes = sum(len(sse_event(i, size)) for i in range(1, events + 1))
    assert st["sse"] == {"streams": 2, "events": 2 * events, "bytes": 2 * ev_bytes,
                         "write_timeouts": 0}
    assert st["by_protocol"]["h3"] == 1 and st["by_route"]["sse"] == 2


def test_paced_sse_and_stream_over_h3(srv):
    p = Peer(srv.h3_port, srv.ca_file)
    try:
        assert p.handshake()
        assert _h3(p, "/sse?events=4&size=10&interval=30") == (200, sse_stream(4, 10).encode())
        assert _h3(p, "/stream/5000?chunk=1000&interval=20") == (200, content(5000))
        assert _h3(p, "/stream/10000?chunk=3000") == (200, content(10000))  # a flood
        assert _h3(p, "/stream/0") == (200, b"")
        assert _h3(p, "/sse?events=3", method="HEAD") == (200, b"")
    finally:
        p.close()
    st = srv.stats()
    assert st["sse"] == {"streams": 1, "events": 4,
                         "bytes": sum(len(sse_event(i, 10)) for i in range(1, 5)),
                         "write_timeouts": 0}
    assert st["stream"] == {"streams": 3, "chunks": 5 + 4, "bytes": 15000, "write_timeouts": 0}
    assert st["by_status"][200] == 5 and st["h3"]["streams_cut"] == 0


def test_a_client_that_stops_reading_is_cut():
    """A flood of SSE events to a client that stops acknowledging: the server hands out
    at most a bounded window of events, then cuts the stream after request_timeout."""
    with httpbench.Server(tls=True, h3=True, request_timeout=0.5) as s:
        p = Peer(s.h3_port, s.ca_file)
        try:
            assert p.handshake()
            sid = p.request("/sse?events=100000000&size=1000")
            p.pump(1.0, until=lambda: len(p.body.get(sid, b"")) > 20000)
            assert p.status.get(sid) == 200
            time.sleep(2.0)  # reads nothing, acknowledges nothing
            deadline = time.monotonic() + 10
            while s.stats()["h3"]["streams_cut"] < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            p.pump(3.0, until=lambda: sid in p.reset)
            st = s.stats()
            assert sid in p.reset and sid not in p.ended
        finally:
            p.close()
    assert st["h3"]["streams_cut"] == 1 and st["sse"]["streams"] == 1
    assert 20 < st["sse"]["events"] < 100_000  # a window of events, not 10^8


def test_sse_and_stream_with_libcurl(srv):
    """A third-party HTTP/3 client (libcurl's ngtcp2 + nghttp3) gets the same bytes."""
    import io

    pycurl = pytest.importorskip("pycurl")
    if not pycurl.version_info()[4] & pycurl.VERSION_HTTP3:
        pytest.skip("pycurl's libcurl has no HTTP/3 here")
    c = pycurl.Curl()
    c.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_3ONLY)
    c.setopt(pycurl.CAINFO, srv.ca_file)
    c.setopt(pycurl.TIMEOUT_MS, 10000)
    heads: list[bytes] = []
    c.setopt(pycurl.HEADERFUNCTION, heads.append)
    try:
        for path, want in (("/sse?events=20&size=300&interval=5", sse_stream(20, 300).encode()),
                           ("/stream/100000?chunk=7000", content(100000))):
            buf = io.BytesIO()
            c.setopt(pycurl.URL, srv.h3_url + path)
            c.setopt(pycurl.WRITEDATA, buf)
            c.perform()
            assert c.getinfo(pycurl.INFO_HTTP_VERSION) == pycurl.CURL_HTTP_VERSION_3
            assert c.getinfo(pycurl.RESPONSE_CODE) == 200 and buf.getvalue() == want
    finally:
        c.close()
    assert b"content-type: text/event-stream\r\n" in heads
    assert b"cache-control: no-cache\r\n" in heads
    st = srv.stats()
    assert st["sse"]["events"] == 20 and st["stream"] == {"streams": 1, "chunks": 15,
                                                          "bytes": 100000, "write_timeouts": 0}
    assert st["by_protocol"] == {"http/1.1": 0, "h2": 0, "h3": 2}
