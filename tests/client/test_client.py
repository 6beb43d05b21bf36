"""httpbench.Client end to end against a raw-socket test server that sends
scripted bytes: every framing rule, every malformed case, pooling, retries,
deadlines, request bodies."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time

import httpbench
import pytest
from _raw import Conn, RawServer, chunked, echo_handler, idle_closer, ok, responder
from httpbench import (
    Client,
    ConnectError,
    HttpbenchError,
    ProtocolError,
    RemoteClosed,
    RequestTimeout,
)


@pytest.fixture
def client():
    with Client(timeout=5.0) as c:
        yield c


def serve(*responses: bytes, **kw) -> RawServer:
    return RawServer(responder(*responses, **kw))


BIN = bytes(range(256)) * 16 + b"\r\n\r\n0\r\n\x00"  # binary incl. framing-like bytes

# --------------------------------------------------------------------------- framing


def test_content_length_body_and_keepalive_reuse(client):
    with serve(ok(b"hello")) as srv:
        for _ in range(5):
            r = client.get(srv.url("/x?q=1"))
            assert (r.status, r.reason, r.http_version, r.body) == (200, "OK", "HTTP/1.1", b"hello")
        assert srv.connections == 1
        assert len(srv.requests) == 5
        head = srv.requests[0][0]
        assert head.startswith(b"GET /x?q=1 HTTP/1.1\r\n")
        assert b"\r\nHost: 127.0.0.1:%d\r\n" % srv.port in head
        st = client.pool_stats()
        assert st["connects"] == 1 and st["reuses"] == 4 and st["idle"] == 1
    assert isinstance(r, httpbench.Response)


def test_chunked_with_extensions_and_trailers_then_reuse(client):
    body = b"hello world, chunked!"
    resp = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n"
        b"7;a;b=\"q\"\r\n world,\r\n"
        b"9\r\n chunked!\r\n"
        b"0;last\r\nX-Trailer: t\r\nX-Other: u\r\n\r\n"
    )
    with serve(resp) as srv:
        for _ in range(3):
            r = client.get(srv.url())
            assert r.body == body
            assert r.size == len(body)
        assert srv.connections == 1


def test_chunked_large_binary(client):
    data = os.urandom(4 * 1024 * 1024)
    with serve(chunked(data, size=100_000)) as srv:
        r = client.get(srv.url())
        assert r.body == data
        r = client.get(srv.url())
        assert r.body == data and r.reused
        assert srv.connections == 1


def test_chunked_many_small_chunks(client):
    data = BIN * 10
    with serve(chunked(data, size=7)) as srv:
        assert client.get(srv.url()).body == data


def test_interim_1xx_responses_skipped(client):
    resp = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
        b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\nX-Final: yes\r\n\r\nok"
    )
    with serve(resp) as srv:
        for _ in range(2):
            r = client.get(srv.url())
            assert (r.status, r.reason, r.body) == (201, "Created", b"ok")
            assert r.headers.get("x-final") == "yes" and "Link" not in r.headers
        assert srv.connections == 1


@pytest.mark.parametrize(
    "status_line", [b"HTTP/1.1 204 No Content", b"HTTP/1.1 304 Not Modified"]
)
def test_no_body_statuses_then_reuse(client, status_line):
    # A Content-Length on 304 describes the resource, not this message.
    resp = status_line + b"\r\nContent-Length: 10\r\n\r\n"
    with serve(resp, ok(b"after")) as srv:
        r = client.get(srv.url())
        assert r.body == b"" and r.status in (204, 304)
        r = client.get(srv.url())
        assert r.body == b"after" and r.reused
        assert srv.connections == 1


def test_head_has_no_body_then_reuse(client):
    with serve(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", ok(b"next")) as srv:
        r = client.head(srv.url())
        assert r.status == 200 and r.body == b"" and r.headers["content-length"] == "1000"
        assert srv.requests[0][0].startswith(b"HEAD / HTTP/1.1")
        r = client.get(srv.url())
        assert r.body == b"next" and r.reused
        assert srv.connections == 1


def test_close_delimited_body(client):
    data = BIN * 50
    with serve(b"HTTP/1.1 200 OK\r\n\r\n" + data, close=True) as srv:
        r = client.get(srv.url())
        assert r.body == data
        r = client.get(srv.url())
        assert r.body == data and not r.reused
        assert srv.connections == 2


def test_connection_close_honoured(client):
    with serve(ok(b"bye", b"Connection: close\r\n")) as srv:
        # The server keeps the socket open: the client must not reuse it anyway.
        assert client.get(srv.url()).body == b"bye"
        assert client.get(srv.url()).body == b"bye"
        assert srv.connections == 2
        assert client.pool_stats()["idle"] == 0


def test_http10_without_keepalive_not_reused(client):
    with serve(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nv0") as srv:
        r = client.get(srv.url())
        assert (r.http_version, r.body) == ("HTTP/1.0", b"v0")
        client.get(srv.url())
        assert srv.connections == 2


def test_http10_keepalive_reused(client):
    with serve(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nv0") as srv:
        client.get(srv.url())
        client.get(srv.url())
        assert srv.connections == 1


@pytest.mark.parametrize("kind", ["length", "chunked", "close"])
def test_byte_at_a_time(client, kind):
    body = b"byte-by-byte \x00\xff body" * 3
    resp = {
        "length": ok(body, b"X-A: 1\r\nX-B: 2\r\n"),
        "chunked": chunked(body, size=5, ext=b";e=1", trailers=b"T: 1\r\n"),
        "close": b"HTTP/1.1 200 OK\r\nX-A: 1\r\n\r\n" + body,
    }[kind]
    with serve(resp, bytewise=True, close=(kind == "close")) as srv:
        for _ in range(2):
            r = client.get(srv.url())
            assert r.body == body and r.status == 200
        assert srv.connections == (2 if kind == "close" else 1)


def test_chunked_overrides_content_length_and_closes(client):
    resp = (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n0\r\n\r\n")
    with serve(resp) as srv:
        assert client.get(srv.url()).body == b"hello"
        assert client.get(srv.url()).body == b"hello"
        assert srv.connections == 2  # TE + CL: never trusted for reuse


def test_non_chunked_transfer_coding_reads_until_close(client):
    with serve(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nraw-gzip-bytes",
               close=True) as srv:
        r = client.get(srv.url())
        assert r.body == b"raw-gzip-bytes" and r.headers["transfer-encoding"] == "gzip"


def test_too_many_headers_is_protocol_error(client):
    extra = b"".join(b"X-%d: v\r\n" % i for i in range(200))
    with serve(ok(b"x", extra)) as srv, pytest.raises(ProtocolError):
        client.get(srv.url())


def test_large_headers_and_duplicates(client):
    extra = b"".join(b"X-Big-%d: %s\r\n" % (i, b"v" * 400) for i in range(100))
    extra += b"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
    with serve(ok(b"big", extra)) as srv:
        r = client.get(srv.url())
        h = r.headers
        assert r.body == b"big"
        assert len(h) == 103
        assert h["x-big-99"] == "v" * 400
        assert h.get_all("SET-COOKIE") == ["a=1", "b=2"]
        assert h["set-cookie"] == "a=1"
        assert h.keys()[0] == "Content-Length" and h.items()[-1] == ("Set-Cookie", "b=2")
        assert h.get("missing") is None and "missing" not in h
        with pytest.raises(KeyError):
            h["missing"]
        assert r.headers is h  # built once


def test_4mb_binary_body_content_length(client):
    data = os.urandom(4 * 1024 * 1024)
    with serve(ok(data)) as srv:
        for _ in range(2):
            r = client.get(srv.url())
            assert r.body == data and r.size == len(data)
        assert srv.connections == 1


def test_empty_reason_and_zero_length(client):
    with serve(b"HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n") as srv:
        r = client.get(srv.url())
        assert (r.status, r.reason, r.body) == (200, "", b"")
        assert repr(r) == "<Response [200 ]>"


def test_redirect_not_followed(client):
    with serve(b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n") as srv:
        r = client.get(srv.url())
        assert r.status == 302 and r.headers["location"] == "/elsewhere"
        assert len(srv.requests) == 1


def test_timings(client):
    with serve(ok(b"t")) as srv:
        r1 = client.get(srv.url())
        r2 = client.get(srv.url())
    assert not r1.reused and r2.reused
    assert 0 < r1.connect_time <= r1.ttfb <= r1.elapsed < 5
    assert r2.connect_time == 0.0 and r2.tls_time == 0.0
    assert 0 < r2.ttfb <= r2.elapsed


# --------------------------------------------------------------------------- malformed


MALFORMED = {
    "bad_status": b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
    "bad_version": b"HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
    "not_http": b"SSH-2.0-OpenSSH_9.0\r\n\r\n",
    "bad_content_length": b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n",
    "negative_content_length": b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    "dup_content_length": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "bad_chunk_size": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    "bad_chunk_end": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
    "no_colon": b"HTTP/1.1 200 OK\r\nNoColonHere\r\nContent-Length: 0\r\n\r\n",
    "control_char": b"HTTP/1.1 200 OK\r\nX-Bad: a\x01b\r\nContent-Length: 0\r\n\r\n",
    "head_too_large": b"HTTP/1.1 200 OK\r\n" + b"X-Huge: " + b"h" * 70000 + b"\r\n\r\n",
    "space_before_colon": b"HTTP/1.1 200 OK\r\nX-Sp : v\r\nContent-Length: 0\r\n\r\n",
    "obs_fold": b"HTTP/1.1 200 OK\r\nX-A: a\r\n  folded\r\nContent-Length: 0\r\n\r\n",
    "bare_cr": b"HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n",
    "nul_in_header": b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n",
    "chunk_size_overflow": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"ffffffffffffffffffff\r\nx\r\n0\r\n\r\n",
}


# The parser's distinct reason for each case (ProtocolError.code).
MALFORMED_CODE = {
    "bad_status": "PE_BAD_STATUS",
    "bad_version": "PE_BAD_VERSION",
    "not_http": "PE_BAD_VERSION",
    "bad_content_length": "PE_BAD_CONTENT_LENGTH",
    "negative_content_length": "PE_BAD_CONTENT_LENGTH",
    "dup_content_length": "PE_DUP_CONTENT_LENGTH",
    "bad_chunk_size": "PE_BAD_CHUNK_SIZE",
    "bad_chunk_end": "PE_BAD_CHUNK",
    "no_colon": "PE_NO_COLON",
    "control_char": "PE_BAD_HEADER_CHAR",
    "head_too_large": "PE_HEAD_TOO_LARGE",
    "space_before_colon": "PE_SPACE_BEFORE_COLON",
    "obs_fold": "PE_OBS_FOLD",
    "bare_cr": "PE_BAD_LINE_ENDING",
    "nul_in_header": "PE_BAD_HEADER_CHAR",
    "chunk_size_overflow": "PE_CHUNK_SIZE_OVERFLOW",
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_raises_protocol_error(client, name):
    from httpbench import _core

    with serve(MALFORMED[name]) as srv:
        with pytest.raises(ProtocolError) as ei:
            client.get(srv.url())
        assert isinstance(ei.value, HttpbenchError)
        assert ei.value.code == getattr(_core, MALFORMED_CODE[name])
        assert str(ei.value).startswith("malformed")
        # The broken connection is never pooled; the client stays usable.
        assert client.pool_stats()["idle"] == 0


def test_truncated_length_body_raises_remote_closed(client):
    with serve(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 50, close=True) as srv:
        with pytest.raises(RemoteClosed, match="50 of 100"):
            client.get(srv.url())


def test_truncated_chunked_body_raises_remote_closed(client):
    resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n10\r\nshort"
    with serve(resp, close=True) as srv:
        with pytest.raises(RemoteClosed, match="truncated"):
            client.get(srv.url())


def test_close_before_response_raises_remote_closed(client):
    def handler(c: Conn) -> None:
        c.read_request()

    with RawServer(handler) as srv:
        with pytest.raises(RemoteClosed):
            client.get(srv.url())
        assert srv.connections == 1  # a fresh connection is never retried


def test_close_in_head_raises_remote_closed(client):
    with serve(b"HTTP/1.1 200 OK\r\nContent-Len", close=True) as srv:
        with pytest.raises(RemoteClosed, match="head"):
            client.get(srv.url())


def test_reset_before_response_raises_remote_closed(client):
    def handler(c: Conn) -> None:
        c.read_request()
        c.rst()

    with RawServer(handler) as srv:
        with pytest.raises(RemoteClosed):
            client.get(srv.url())


def test_connect_refused_raises_connect_error(client):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(ConnectError) as ei:
        client.get(f"http://127.0.0.1:{port}/")
    assert isinstance(ei.value, ConnectionError)
    assert "127.0.0.1" in str(ei.value)


# --------------------------------------------------------------------------- deadlines


def test_silent_server_times_out_at_deadline():
    def handler(c: Conn) -> None:
        c.read_request()
        time.sleep(3)

    with RawServer(handler) as srv, Client(timeout=0.3) as c:
        t0 = time.monotonic()
        with pytest.raises(RequestTimeout) as ei:
            c.get(srv.url())
        took = time.monotonic() - t0
    assert isinstance(ei.value, TimeoutError)
    assert 0.3 <= took < 2.5


def test_trickling_server_times_out_at_deadline():
    stop = threading.Event()

    def handler(c: Conn) -> None:
        c.read_request()
        c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
        while not stop.is_set():  # a byte every 20 ms: never idle long enough to stall
            c.send(b"x")
            time.sleep(0.02)

    with RawServer(handler) as srv, Client(timeout=0.5) as c:
        t0 = time.monotonic()
        with pytest.raises(RequestTimeout, match="timed out"):
            c.get(srv.url())
        took = time.monotonic() - t0
        stop.set()
    assert 0.5 <= took < 3.0


def test_trickling_head_times_out():
    stop = threading.Event()

    def handler(c: Conn) -> None:
        c.read_request()
        c.send(b"HTTP/1.1 200 OK\r\n")
        while not stop.is_set():
            c.send(b"X-Slow: 1\r\n")
            time.sleep(0.02)

    with RawServer(handler) as srv, Client(timeout=0.4) as c:
        t0 = time.monotonic()
        with pytest.raises(RequestTimeout):
            c.get(srv.url())
        assert 0.4 <= time.monotonic() - t0 < 3.0
        stop.set()


def test_sigint_interrupts_a_waiting_request():
    import signal

    def handler(c: Conn) -> None:
        c.read_request()
        time.sleep(3)

    main = threading.get_ident()
    with RawServer(handler) as srv, Client(timeout=10) as c:
        timer = threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGINT))
        t0 = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            c.get(srv.url())
        timer.join()
        assert time.monotonic() - t0 < 2.5  # not the 10 s deadline
        with serve(ok(b"after")) as srv2:  # the client is still usable
            assert c.get(srv2.url()).body == b"after"


def test_connect_timeout_on_full_backlog():
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(0)  # never accepted: once the queue is full, SYNs are dropped
    port = ls.getsockname()[1]
    fillers = []
    try:
        for _ in range(3):
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            fillers.append(s)
        time.sleep(0.1)
        with Client(timeout=5, connect_timeout=0.3) as c:
            t0 = time.monotonic()
            with pytest.raises(RequestTimeout, match="connect"):
                c.get(f"http://127.0.0.1:{port}/")
            assert 0.3 <= time.monotonic() - t0 < 3.0  # the connect bound, not the 5 s
    finally:
        for s in fillers:
            s.close()
        ls.close()


def test_timeout_validation():
    with pytest.raises(ValueError):
        Client(timeout=0)
    with pytest.raises(ValueError):
        Client(timeout=-1)
    with pytest.raises(ValueError):
        Client(max_connections_per_host=0)
    with pytest.raises(TypeError):
        Client(5.0)  # keyword-only
    assert Client(timeout=None).timeout is None


# --------------------------------------------------------------------------- pool


@pytest.mark.parametrize("rst", [False, True])
def test_stale_connection_retried_without_stale_check(rst):
    with RawServer(idle_closer(rst=rst)) as srv, Client(timeout=5, stale_check=False) as c:
        assert c.get(srv.url()).body == b"ok"
        time.sleep(0.3)  # the server has closed the pooled connection by now
        r = c.get(srv.url())
        assert r.body == b"ok" and not r.reused
        assert srv.connections == 2
        st = c.pool_stats()
        assert st["connects"] == 2 and st["reuses"] == 1 and st["stale_dropped"] == 0


def test_stale_check_drops_closed_idle_connection():
    with RawServer(idle_closer()) as srv, Client(timeout=5) as c:
        assert c.stale_check is True
        c.get(srv.url())
        time.sleep(0.3)
        r = c.get(srv.url())
        assert r.body == b"ok" and not r.reused
        st = c.pool_stats()
        assert st["stale_dropped"] == 1 and st["reuses"] == 0 and st["connects"] == 2


def test_stale_check_drops_connection_with_unexpected_bytes():
    def handler(c: Conn) -> None:
        c.read_request()
        c.send(ok(b"ok") + b"HTTP/1.1 200 OK\r\n")  # garbage after the response
        time.sleep(2)

    with RawServer(handler) as srv, Client(timeout=5) as c:
        c.get(srv.url())
        time.sleep(0.1)
        c.get(srv.url())
        # Extra bytes either kept it out of the pool or the stale check dropped it.
        assert srv.connections == 2


def test_post_not_retried_on_stale_connection():
    with RawServer(idle_closer()) as srv, Client(timeout=5, stale_check=False) as c:
        c.get(srv.url())
        time.sleep(0.3)
        with pytest.raises(RemoteClosed):
            c.request("POST", srv.url(), body=b"data")
        assert srv.connections == 1
        # The next idempotent request gets a fresh connection.
        assert c.get(srv.url()).body == b"ok"


def test_stale_check_toggle():
    with RawServer(idle_closer()) as srv, Client(timeout=5) as c:
        c.stale_check = False
        assert c.stale_check is False
        c.get(srv.url())
        time.sleep(0.3)
        c.get(srv.url())  # retried instead of stale-dropped
        assert c.pool_stats()["stale_dropped"] == 0 and srv.connections == 2


def test_idle_timeout_expires_connections():
    with serve(ok(b"x")) as srv, Client(timeout=5, idle_timeout=0.05) as c:
        c.get(srv.url())
        time.sleep(0.2)
        r = c.get(srv.url())
        assert not r.reused
        assert c.pool_stats()["expired"] == 1 and srv.connections == 2


def test_pool_keyed_by_host_and_port(client):
    with serve(ok(b"a")) as s1, serve(ok(b"b")) as s2:
        for _ in range(3):
            assert client.get(s1.url()).body == b"a"
            assert client.get(s2.url()).body == b"b"
            assert client.get(f"http://localhost:{s1.port}/").body == b"a"
        assert s1.connections == 2 and s2.connections == 1  # 127.0.0.1 and localhost
        assert client.pool_stats()["idle"] == 3


def test_max_connections_per_host_waits():
    def handler(c: Conn) -> None:
        while c.read_request() is not None:
            time.sleep(0.1)
            c.send(ok(b"slow"))

    with RawServer(handler) as srv, Client(timeout=5, max_connections_per_host=1) as c:
        results = []
        ts = [threading.Thread(target=lambda: results.append(c.get(srv.url()).body))
              for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(10)
        assert results == [b"slow"] * 3
        assert srv.connections == 1


def test_waiting_for_a_connection_slot_times_out():
    def handler(c: Conn) -> None:
        c.read_request()
        time.sleep(1.5)
        c.send(ok(b"late"))

    with RawServer(handler) as srv, Client(timeout=0.5, max_connections_per_host=1) as c:
        errors = []

        def run() -> None:
            try:
                c.get(srv.url())
            except RequestTimeout as e:
                errors.append(e)

        ts = [threading.Thread(target=run) for _ in range(2)]
        for t in ts:
            t.start()
        time.sleep(0.25)
        during = srv.connections  # the second request is waiting for the slot
        for t in ts:
            t.join(10)
        assert len(errors) == 2
        assert during == 1


def test_threads_share_one_client():
    with serve(ok(b"shared")) as srv, Client(timeout=5) as c:
        bodies = []
        lock = threading.Lock()

        def run() -> None:
            for _ in range(50):
                b = c.get(srv.url()).body
                with lock:
                    bodies.append(b)

        ts = [threading.Thread(target=run) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        assert bodies == [b"shared"] * 200
        assert len(srv.requests) == 200
        assert 1 <= srv.connections <= 4


def test_close_and_context_manager():
    with serve(ok(b"x")) as srv:
        c = Client()
        c.get(srv.url())
        c.close()
        assert c.closed
        with pytest.raises(ValueError, match="closed"):
            c.get(srv.url())
        c.close()  # idempotent
        with Client() as c2:
            c2.get(srv.url())
        assert c2.closed


# --------------------------------------------------------------------------- requests


def test_post_bytes_body(client):
    with RawServer(echo_handler) as srv:
        data = os.urandom(300_000)
        r = client.request("POST", srv.url("/up"), body=data)
        assert r.body == hashlib.sha256(data).hexdigest().encode() + b" 300000"
        head = srv.requests[0][0]
        assert head.startswith(b"POST /up HTTP/1.1\r\n")
        assert b"\r\nContent-Length: 300000\r\n" in head
        r = client.request("PUT", srv.url(), body=bytearray(b"abc"))
        assert r.body.endswith(b" 3")
        r = client.request("POST", srv.url(), body=memoryview(b"xyz"))
        assert r.body.endswith(b" 3")


def test_post_without_body_sends_zero_length(client):
    with RawServer(echo_handler) as srv:
        client.request("POST", srv.url())
        assert b"\r\nContent-Length: 0\r\n" in srv.requests[0][0]
        client.request("DELETE", srv.url())
        assert b"Content-Length" not in srv.requests[1][0]


def test_body_from_path_and_file_object(client, tmp_path):
    data = os.urandom(1_000_000)
    p = tmp_path / "up.bin"
    p.write_bytes(data)
    want = hashlib.sha256(data).hexdigest().encode() + b" 1000000"
    with RawServer(echo_handler) as srv:
        assert client.request("PUT", srv.url(), body=str(p)).body == want
        assert client.request("PUT", srv.url(), body=p).body == want
        with open(p, "rb") as f:
            f.read(10)  # streams from the current position
            r = client.request("POST", srv.url(), body=f)
            assert r.body == hashlib.sha256(data[10:]).hexdigest().encode() + b" 999990"
            assert f.tell() == len(data)
        for head, _ in srv.requests:
            assert b"Content-Length:" in head and b"Transfer-Encoding" not in head


def test_body_from_pipe_is_chunked(client):
    data = os.urandom(200_000)
    r_fd, w_fd = os.pipe()

    def writer() -> None:
        with os.fdopen(w_fd, "wb") as w:
            for i in range(0, len(data), 10_000):
                w.write(data[i : i + 10_000])
                w.flush()

    t = threading.Thread(target=writer)
    t.start()
    with RawServer(echo_handler) as srv, os.fdopen(r_fd, "rb", buffering=0) as rf:
        r = client.request("POST", srv.url(), body=rf)
        t.join(10)
        assert r.body == hashlib.sha256(data).hexdigest().encode() + b" 200000"
        assert b"\r\nTransfer-Encoding: chunked\r\n" in srv.requests[0][0]


def test_body_from_bytesio(client):
    import io

    with RawServer(echo_handler) as srv:
        r = client.request("POST", srv.url(), body=io.BytesIO(b"in memory"))
        assert r.body.endswith(b" 9")


def test_stale_retry_replays_file_body(tmp_path):
    data = os.urandom(50_000)
    p = tmp_path / "b.bin"
    p.write_bytes(data)

    def handler(c: Conn) -> None:
        req = c.read_request()
        if req is None:
            return
        c.send(ok(hashlib.sha256(req[1]).hexdigest().encode()))
        time.sleep(0.05)

    with RawServer(handler) as srv, Client(timeout=5, stale_check=False) as c:
        c.get(srv.url())
        time.sleep(0.3)
        r = c.request("PUT", srv.url(), body=p)  # PUT is idempotent: retried
        assert r.body == hashlib.sha256(data).hexdigest().encode()
        assert srv.connections == 2


def test_request_headers(client):
    with RawServer(echo_handler) as srv:
        client.get(srv.url(), headers={"X-One": "1", "Accept": "*/*"})
        client.get(srv.url(), headers=[("X-Dup", "a"), ("X-Dup", "b")])
        client.get(srv.url(), headers={"Host": "example.test"})
        client.request("GET", srv.url(), headers=httpbench.Headers([("X-H", "v")]))
        h0, h1, h2, h3 = (h for h, _ in srv.requests)
        assert b"\r\nX-One: 1\r\nAccept: */*\r\n" in h0
        assert b"\r\nX-Dup: a\r\nX-Dup: b\r\n" in h1
        assert b"\r\nHost: example.test\r\n" in h2 and h2.count(b"Host:") == 1
        assert b"\r\nX-H: v\r\n" in h3


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Bad": "a\r\nInjected: 1"},
        {"X-Bad": "a\nb"},
        {"Bad Name": "v"},
        {"": "v"},
        {"Content-Length": "5"},
        {"Transfer-Encoding": "chunked"},
    ],
)
def test_bad_request_headers_rejected(client, headers):
    with serve(ok(b"")) as srv:
        with pytest.raises(ValueError):
            client.get(srv.url(), headers=headers)
        assert srv.requests == []


@pytest.mark.parametrize(
    "url",
    ["ftp://x/", "127.0.0.1:80/", "http://", "http://:80/", "http://h:99999/", "http://h:x/",
     "http://u:p@/", "http://h/a b", "http://h/\u00e9"],
)
def test_bad_urls_rejected(client, url):
    with pytest.raises(ValueError):
        client.get(url)


def test_bad_arguments(client):
    with pytest.raises(TypeError):
        client.get(b"http://127.0.0.1/")
    with pytest.raises(TypeError):
        client.get()
    with pytest.raises(TypeError):
        client.get("http://127.0.0.1/", bogus=1)
    with pytest.raises(ValueError):
        client.request("BAD METHOD", "http://127.0.0.1/")
    with pytest.raises(TypeError):
        client.request("POST", "http://127.0.0.1/", body=12)


def test_url_forms(client):
    with RawServer(echo_handler) as srv:
        client.get(f"http://127.0.0.1:{srv.port}")
        client.get(f"http://127.0.0.1:{srv.port}?a=1")
        client.get(f"HTTP://127.0.0.1:{srv.port}/p#frag")
        client.get(f"http://[::ffff:127.0.0.1]:{srv.port}/v6") if socket.has_ipv6 else None
        lines = [h.split(b"\r\n")[0] for h, _ in srv.requests]
        assert lines[:3] == [b"GET / HTTP/1.1", b"GET /?a=1 HTTP/1.1", b"GET /p HTTP/1.1"]


def test_userinfo_becomes_basic_auth(client):
    # curl's rule, shared with bench(): user:password@ is sent as Basic
    # credentials (percent-decoded) unless the caller passes Authorization.
    with RawServer(echo_handler) as srv:
        client.get(f"http://user:p%40ss@127.0.0.1:{srv.port}/a")
        client.get(f"http://user:pw@127.0.0.1:{srv.port}/b", headers={"Authorization": "Bearer t"})
        h1, h2 = (h for h, _ in srv.requests[:2])
    assert b"\r\nAuthorization: Basic dXNlcjpwQHNz\r\n" in h1  # "user:p@ss"
    assert b"\r\nHost: 127.0.0.1:%d\r\n" % srv.port in h1 and b"user" not in h1.split(b"\r\n")[0]
    assert b"\r\nAuthorization: Bearer t\r\n" in h2 and b"Basic" not in h2


# --------------------------------------------------------------------------- downloads


def test_download_to_file_byte_exact(client, tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 7)
    with serve(ok(data), chunked(data, 65536)) as srv:
        p = tmp_path / "d.bin"
        r = client.download(srv.url(), p)
        assert r.status == 200 and r.body == b"" and r.size == len(data)
        assert p.read_bytes() == data
        r = client.download(srv.url(), str(p))  # chunked, overwrites
        assert r.size == len(data) and p.read_bytes() == data and r.reused


def test_download_truncated_removes_file(client, tmp_path):
    p = tmp_path / "t.bin"
    with serve(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10, close=True) as srv:
        with pytest.raises(RemoteClosed):
            client.download(srv.url(), p)
    assert not p.exists()


def test_download_30mb_raw_server(client, tmp_path):
    block = hashlib.sha256(b"seed").digest() * 2048  # 64 KiB deterministic
    n = 30 * 1024 * 1024

    def handler(c: Conn) -> None:
        c.read_request()
        c.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
        for _ in range(n // len(block)):
            c.send(block)

    with RawServer(handler) as srv:
        p = tmp_path / "30mb.bin"
        r = client.download(srv.url(), p)
        assert r.size == n and os.path.getsize(p) == n
        h = hashlib.sha256()
        with open(p, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        assert h.digest() == hashlib.sha256(block * (n // len(block))).digest()


def test_download_large_truncated_raises_and_removes_file(client, tmp_path):
    # Truncated well past the first read of the body.
    p = tmp_path / "big.bin"
    resp = b"HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\n\r\n" + b"y" * 700_000
    with serve(resp, close=True) as srv:
        with pytest.raises(RemoteClosed, match="700000 of 2000000"):
            client.download(srv.url(), p)
    assert not p.exists()


def test_download_trickling_times_out(tmp_path):
    stop = threading.Event()

    def handler(c: Conn) -> None:
        c.read_request()
        c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 50000000\r\n\r\n" + b"z" * 300_000)
        while not stop.is_set():
            c.send(b"z" * 100)
            time.sleep(0.02)

    p = tmp_path / "slow.bin"
    with RawServer(handler) as srv, Client(timeout=0.5) as c:
        t0 = time.monotonic()
        with pytest.raises(RequestTimeout):
            c.download(srv.url(), p)
        took = time.monotonic() - t0
        stop.set()
    assert 0.5 <= took < 3.0
    assert not p.exists()


def test_download_then_reuse_connection(client, tmp_path):
    data = os.urandom(1_500_000)
    with serve(ok(data), ok(b"small")) as srv:
        r = client.download(srv.url(), tmp_path / "a.bin")
        assert r.size == len(data) and (tmp_path / "a.bin").read_bytes() == data
        r = client.get(srv.url())  # the connection ended exactly at the body's end
        assert r.body == b"small" and r.reused
        assert srv.connections == 1


def test_download_close_delimited(client, tmp_path):
    data = os.urandom(1_200_000)
    with serve(b"HTTP/1.1 200 OK\r\n\r\n" + data, close=True) as srv:
        r = client.download(srv.url(), tmp_path / "cd.bin")
        assert r.size == len(data) and (tmp_path / "cd.bin").read_bytes() == data
        r = client.download(srv.url(), tmp_path / "cd2.bin")
        assert not r.reused and (tmp_path / "cd2.bin").read_bytes() == data


def test_stalled_pipe_body_times_out():
    r_fd, w_fd = os.pipe()
    os.write(w_fd, b"some bytes, then nothing")
    with RawServer(echo_handler) as srv, Client(timeout=0.4) as c, \
            os.fdopen(r_fd, "rb", buffering=0) as rf:
        t0 = time.monotonic()
        with pytest.raises(RequestTimeout, match="request body"):
            c.request("POST", srv.url(), body=rf)
        assert 0.4 <= time.monotonic() - t0 < 3.0
    os.close(w_fd)
