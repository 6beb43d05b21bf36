"""Client.stream(): bodies read piece by piece (byte-exact, chunked and
Content-Length, h1 and TLS), server-sent events parsed in C (counts and ids
against the server's stats, fields equal to httpx-sse's on the same bytes),
the connection's fate when a stream is closed early, per-read timeouts, the
line bound with bounded memory, and the protocols it refuses."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import httpbench
import pytest
from _raw import RawServer, chunked, ok, responder
from _stream import content, parse_sse, sse_data
from httpbench import Client, FeatureUnavailable, ProtocolError, RemoteClosed, RequestTimeout


@pytest.fixture(scope="module")
def srv():
    with httpbench.Server() as s:
        yield s


@pytest.fixture(scope="module")
def tsrv():
    with httpbench.Server(tls=True) as s:
        yield s


def sse_head(extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + extra


@pytest.mark.parametrize("tls", [False, True])
@pytest.mark.parametrize("target,n", [("/stream/300000?chunk=7000", 300000),
                                      ("/bytes/300000", 300000), ("/stream/1?chunk=1", 1),
                                      ("/bytes/0", 0)])
def test_iter_bytes_byte_exact(srv, tsrv, tls, target, n):
    s = tsrv if tls else srv
    with Client(ca_file=s.ca_file if tls else None) as c:
        with c.stream("GET", s.url + target) as r:
            assert r.status == 200
            chunked_body = r.headers.get("transfer-encoding") == "chunked"
            assert chunked_body == target.startswith("/stream")
            pieces = list(r.iter_bytes())
            assert r.closed and r.size == n
        assert b"".join(pieces) == content(n)
        assert all(pieces)
        with c.stream("GET", s.url + target) as r:
            sized = list(r.iter_bytes(4096))
        assert b"".join(sized) == content(n)
        assert [len(p) for p in sized[:-1]] == [4096] * (len(sized) - 1)
        # both streams read to their end: one connection, reused
        assert c.pool_stats()["connects"] == 1 and c.pool_stats()["reuses"] == 1


@pytest.mark.parametrize("tls", [False, True])
def test_events_counted_and_ids(srv, tsrv, tls):
    s = tsrv if tls else srv
    before = s.stats()["sse"]["events"]
    with Client(ca_file=s.ca_file if tls else None) as c:
        with c.stream("GET", s.url + "/sse?events=300&size=1000") as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            evs = list(r.iter_events())
            assert r.events == 300 and r.retry == 1000
    assert len(evs) == 300 == s.stats()["sse"]["events"] - before
    assert [e.id for e in evs] == [str(i) for i in range(1, 301)]
    data = sse_data(1000)
    assert all(e.event == "tick" and e.data == data and e.retry is None for e in evs)
    event, d, i, retry = evs[-1]  # a tuple too
    assert (event, d, i, retry) == ("tick", data, "300", None)


STREAM_TEXT = (
    "\ufeffretry: 2500\n\n"
    ": a comment\n"
    "data: one\n\n"
    "event: update\r\nid: 42\r\ndata: multi\r\ndata:  two spaces\r\ndata\r\n\r\n"
    "data: after id\rretry: 77\r\r"
    "id: 43\nevent: other\ndata: x\n: comment inside\nunknown: field\ndata: y\n\n"
    "event: nodata\n\n"
    "id\ndata: reset id\n\n"
    "data: é ünïcode\n\n"
    "data: unfinished"
)


@pytest.mark.parametrize("framing", ["length", "chunked", "bytewise"])
def test_events_equal_httpx_sse(framing):
    httpx_sse = pytest.importorskip("httpx_sse", reason="httpx-sse compares the parse")
    raw = STREAM_TEXT.encode()
    if framing == "length":
        resp = ok(raw, b"Content-Type: text/event-stream\r\n")
    else:
        resp = chunked(raw, size=1 if framing == "bytewise" else 7,
                       ).replace(b"HTTP/1.1 200 OK\r\n", sse_head())
    with RawServer(responder(resp)) as rs, Client(timeout=5) as c:
        with c.stream("GET", rs.url("/sse")) as r:
            got = [tuple(e) for e in r.iter_events()]
    dec = httpx_sse._decoders.SSEDecoder()
    want = []
    for line in STREAM_TEXT.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        e = dec.decode(line)
        # httpx-sse also yields blocks without data (the WHATWG rules dispatch none); every
        # block of this stream with a data field has non-empty data
        if e is not None and e.data:
            want.append((e.event, e.data, e.id, e.retry))
    assert got == want
    # the reference parser of the tests says the same (ids and types)
    ref = [(d["event"], d["data"], d["id"]) for d in parse_sse(STREAM_TEXT.lstrip("\ufeff"))]
    assert [g[:3] for g in got] == ref
    assert got[1] == ("update", "multi\n two spaces\n", "42", None)
    assert got[2] == ("message", "after id", "42", 77)


def test_early_close_closes_the_connection(srv):
    before = srv.stats()
    with Client() as c:
        with c.stream("GET", srv.url + "/sse?events=1000&size=1024") as r:
            it = r.iter_events()
            assert next(it).id == "1"
        assert r.closed
        with pytest.raises(StopIteration):
            next(it)
        assert c.pool_stats()["idle"] == 0  # never returned half-read
        resp = c.get(srv.url + "/bytes/100")
        assert resp.status == 200 and resp.body == content(100) and not resp.reused
        st = c.pool_stats()
        assert st["connects"] == 2 and st["reuses"] == 0
    deadline = time.monotonic() + 5
    while srv.stats()["connections_closed"] - before["connections_closed"] < 2:
        assert time.monotonic() < deadline, "the server never saw the closes"
        time.sleep(0.01)
    assert srv.stats()["connections_accepted"] - before["connections_accepted"] == 2


def test_garbage_collected_stream_is_not_pooled(srv):
    with Client() as c:
        r = c.stream("GET", srv.url + "/stream/1000000?chunk=1000")
        assert next(r.iter_bytes()) == content(1000)
        del r
        assert c.pool_stats() == {**c.pool_stats(), "open": 0, "idle": 0}


def test_read_timeout_per_read(srv):
    with Client(timeout=5) as c:
        # one event every 400 ms: a 0.25 s read timeout fires after the first
        with c.stream("GET", srv.url + "/sse?events=3&interval=400", timeout=0.25) as r:
            it = r.iter_events()
            t0 = time.monotonic()
            with pytest.raises(RequestTimeout, match="reading the response body"):
                list(it)
            took = time.monotonic() - t0
        assert 0.2 < took < 3.0
        assert r.closed and c.pool_stats()["idle"] == 0
        # each read has its own deadline: 3 events 150 ms apart under a 0.5 s read timeout
        with c.stream("GET", srv.url + "/sse?events=3&interval=150", timeout=0.5) as r:
            assert [e.id for e in r.iter_events()] == ["1", "2", "3"]


def test_truncated_stream_is_an_error():
    body = chunked(b"data: a\n\n" * 3)[:-5]  # no last chunk, then the close
    with RawServer(responder(body.replace(b"HTTP/1.1 200 OK\r\n", sse_head()), close=True)) as rs:
        with Client(timeout=5) as c, c.stream("GET", rs.url("/")) as r:
            it = r.iter_events()
            assert [next(it).data for _ in range(3)] == ["a"] * 3
            with pytest.raises(RemoteClosed):
                next(it)


def test_line_bound_is_typed():
    body = b"data: " + b"x" * 5000 + b"\n\n"
    with RawServer(responder(ok(body, b"Content-Type: text/event-stream\r\n"))) as rs:
        with Client(timeout=5) as c:
            with c.stream("GET", rs.url("/"), max_line=4096) as r:
                with pytest.raises(ProtocolError, match="max_line"):
                    list(r.iter_events())
            with c.stream("GET", rs.url("/"), max_line=5006) as r:
                assert [len(e.data) for e in r.iter_events()] == [5000]


MEM_SCRIPT = textwrap.dedent("""
    import resource, sys
    import httpbench
    c = httpbench.Client(timeout=30)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    err = None
    with c.stream("GET", sys.argv[1]) as r:
        try:
            for e in r.iter_events():
                pass
        except httpbench.ProtocolError as exc:
            err = str(exc)
        got = r.size
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(after - before, got, err)
""")


def test_ten_megabytes_without_newline_bounded_memory():
    piece = b"x" * 65536

    def handler(conn):
        if conn.read_request() is None:
            return
        conn.send(sse_head(b"Content-Length: 10000000\r\n\r\n"))
        try:
            for _ in range(10_000_000 // len(piece)):
                conn.send(piece)
        except OSError:
            pass

    with RawServer(handler) as rs:
        out = subprocess.run([sys.executable, "-c", MEM_SCRIPT, rs.url("/")],
                             capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    grew_kib, got, err = out.stdout.split(" ", 2)
    assert "max_line (1048576 bytes)" in err
    assert 1048576 < int(got) < 10_000_000  # failed once past the bound, before the end
    assert int(grew_kib) < 6 * 1024, f"peak RSS grew {grew_kib} KiB"


def test_multiplexed_protocols_refused():
    with Client(http2=True) as c:  # refused before any connection is made
        with pytest.raises(FeatureUnavailable, match="HTTP/2"):
            c.stream("GET", "http://127.0.0.1:9/sse")


def test_http3_refused():
    if not httpbench.features()["http3-client"]:
        pytest.skip("this build has no HTTP/3 client (ngtcp2/GnuTLS)")
    with Client(http3=True) as c:
        with pytest.raises(FeatureUnavailable, match="HTTP/3"):
            c.stream("GET", "https://127.0.0.1:9/sse")


def test_bad_arguments(srv):
    with Client() as c:
        with pytest.raises(ValueError):
            c.stream("GET", srv.url + "/bytes/1", max_line=0)
        with pytest.raises(ValueError):
            c.stream("BAD METHOD", srv.url + "/bytes/1")
        with c.stream("GET", srv.url + "/bytes/10") as r, pytest.raises(ValueError):
            r.iter_bytes(0)
    with pytest.raises(ValueError, match="closed"):
        c.stream("GET", srv.url + "/bytes/1")


def test_post_body_and_head(srv):
    with Client() as c:
        with c.stream("POST", srv.url + "/echo", body=b"hello stream") as r:
            assert b"".join(r.iter_bytes()) == b"hello stream"
        with c.stream("HEAD", srv.url + "/bytes/100") as r:
            assert r.closed and list(r.iter_bytes()) == []
        assert c.pool_stats()["connects"] == 1


def test_measure_events_per_call_budget(srv):
    c = Client()
    url = srv.url + "/sse?events=100&size=1024"
    before = srv.stats()["sse"]["events"]

    def consume():
        with c.stream("GET", url) as r:
            for _ in r.iter_events():
                pass

    m = httpbench.measure(consume, n=20, warmup=2, events_per_call=100)
    assert srv.stats()["sse"]["events"] - before == 22 * 100
    assert m.metadata["events_per_call"] == 100
    # per event: the event object, its data and id strs (the type str is reused)
    m.assert_budget(allocs_per_event=3.2)
    c.close()
