"""The load generator's stream mode over HTTP/2 (h2c and TLS, several streams per
connection) and HTTP/3: server-sent events and /stream chunks timed per event,
the event counts exact against the server's own, paced gaps never shorter than
the server's interval, and the errors typed as over HTTP/1.1 (an SSE line over
the bound is a protocol error, a stream slower than the timeout a timeout)."""

from __future__ import annotations

import subprocess
import sys

import httpbench
import pytest
from _h2raw import ACK, DATA, END_STREAM, SETTINGS, frame, headers, hpack_literal
from _raw import RawServer
from httpbench._features import h3_missing

pytestmark = [pytest.mark.own_server, pytest.mark.h2_server]


@pytest.fixture(scope="module")
def h2c():
    with httpbench.Server(http2=True) as s:
        yield s


@pytest.fixture(scope="module")
def h2tls():
    with httpbench.Server(http2=True, tls=True) as s:
        yield s


def _kw(srv, tls: bool) -> dict:
    return {"http2": True, "stream": True, **({"ca_file": srv.ca_file} if tls else {})}


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2-tls"])
@pytest.mark.parametrize("conns,streams,n", [(1, 1, 10), (2, 4, 40), (1, 32, 64)])
def test_sse_events_exact(h2c, h2tls, tls, conns, streams, n):
    srv = h2tls if tls else h2c
    before = srv.stats()
    r = httpbench.bench(srv.url + "/sse?events=50&size=100", n=n, concurrency=conns,
                        streams=streams, **_kw(srv, tls))
    after = srv.stats()
    assert (r.successes, r.errors) == (n, 0), r.metadata["first_error"]
    assert r.events == 50 * n and r.ttfe.count == n and r.gap.count == 49 * n
    assert after["sse"]["events"] - before["sse"]["events"] == 50 * n
    assert after["sse"]["streams"] - before["sse"]["streams"] == n
    assert after["by_protocol"]["h2"] - before["by_protocol"]["h2"] == n
    assert r.config.protocol == "h2"


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2-tls"])
def test_chunks_are_events(h2c, h2tls, tls):
    # a chunk is one DATA frame (up to the frame size): each frame one event
    srv = h2tls if tls else h2c
    before = srv.stats()["stream"]
    r = httpbench.bench(srv.url + "/stream/10000?chunk=100", n=10, concurrency=1, streams=5,
                        **_kw(srv, tls))
    after = srv.stats()["stream"]
    assert (r.successes, r.errors) == (10, 0)
    assert r.events == 1000 and r.ttfe.count == 10 and r.gap.count == 990
    assert after["chunks"] - before["chunks"] == 1000
    assert r.metadata["body_bytes_in"] == 100000


def test_paced_gaps_and_rate(h2c):
    before = h2c.stats()["sse"]
    r = httpbench.bench(h2c.url + "/sse?events=3&size=1&interval=20", n=8, rate=100,
                        concurrency=1, streams=4, http2=True, stream=True)
    assert (r.successes, r.events, r.gap.count) == (8, 24, 16)
    assert r.gap.min >= 15_000_000  # the server waits 20 ms between events
    assert h2c.stats()["sse"]["events"] - before["events"] == 24


def test_sse_line_over_the_bound_is_a_protocol_error():
    # an h2 server whose event stream is 10 MB without a newline: the stream ends
    # as a protocol error, the generator buffering nothing
    def handler(c):
        got = b""
        while b"\x01\x05\x00\x00\x00\x01" not in got[24:]:  # the request's HEADERS
            piece = c.sock.recv(65536)
            if not piece:
                return
            got += piece
        block = b"\x88" + hpack_literal(b"content-type", b"text/event-stream")
        c.send(frame(SETTINGS, 0, 0) + frame(SETTINGS, ACK, 0)
               + headers(1, block, end_stream=False))
        try:
            for _ in range(640):
                c.send(frame(DATA, 0, 1, b"x" * 16384))
            c.send(frame(DATA, END_STREAM, 1))
        except OSError:
            pass

    with RawServer(handler) as s:
        r = httpbench.bench(s.url("/"), n=1, http2=True, stream=True, timeout=10)
    assert r.error_counts["protocol"] == 1 and r.successes == 0, r.error_counts
    assert "line" in r.metadata["first_error"]


def test_slow_stream_times_out(h2c):
    r = httpbench.bench(h2c.url + "/sse?events=10&interval=500", n=1, http2=True, stream=True,
                        timeout=0.3)
    assert r.error_counts["timeout"] == 1 and r.successes == 0


def test_cli_stream_over_h2(h2c):
    p = subprocess.run([sys.executable, "-m", "httpbench", h2c.url + "/sse?events=7&size=3",
                        "-n", "6", "--stream", "--h2", "-m", "3"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Events:" in p.stdout and " 42 (" in p.stdout


def test_stream_mode_is_refused_for_websocket():
    with pytest.raises(ValueError, match="not with ws"):
        httpbench.bench("ws://127.0.0.1:1/ws", n=1, stream=True)


@pytest.mark.skipif(not httpbench.features()["http3-client"], reason="built without the HTTP/3 "
                    "client (ngtcp2, GnuTLS headers absent)")
@pytest.mark.skipif(h3_missing() is not None, reason=str(h3_missing()))
def test_h3_stream_mode_times_the_body():
    # over HTTP/3 the engine's events come from the same protocol-neutral code;
    # the HTTP/3 frame reader hands DATA payload over as QUIC delivers it, so each
    # delivery of a non-SSE body is an event
    from httpbench._server import start_process

    with start_process(tls=True, h3=True, request_timeout=5.0) as srv:
        r = httpbench.bench(srv.h3_url + "/stream/20000?chunk=1000", n=6, streams=3, http3=True,
                            stream=True, ca_file=srv.ca_file, timeout=10)
    assert (r.successes, r.errors) == (6, 0), r.metadata["first_error"]
    assert r.ttfe.count == 6 and r.events >= 6 and r.metadata["body_bytes_in"] == 120000
