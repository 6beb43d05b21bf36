"""The embedded server against hostile or departing peers: request-smuggling
framings answered 400/501 and closed (the request behind them never answered),
clients that leave while their request waits counted as client_gone, the
largest /__stats document intact behind pipelined responses, and connection
memory returned after a burst of connections."""

from __future__ import annotations

import json
import socket
import time

import httpbench
import pytest
from _raw import open_files, read_until_close

SECOND = b"GET /bytes/7 HTTP/1.1\r\nHost: x\r\n\r\n"  # the would-be smuggled request


@pytest.fixture(scope="module")
def srv():
    with httpbench.Server(threads=1) as s:
        yield s


def wait_for(cond, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def consistent(st: dict) -> bool:
    return st["requests"] == sum(st["by_route"].values()) == sum(st["by_status"].values())


def chunked_post(body: bytes, te: bytes = b"chunked") -> bytes:
    return b"POST /sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + te + b"\r\n\r\n" + body


VECTORS = [
    # chunked bodies the strict decoder refuses
    ("bare-lf-after-chunk-data", chunked_post(b"3\r\nabc\n0\r\n\r\n"), 400),
    ("lf-in-chunk-extension", chunked_post(b"3;a\nb\r\nabc\r\n0\r\n\r\n"), 400),
    ("space-after-chunk-size", chunked_post(b"3 \r\nabc\r\n0\r\n\r\n"), 400),
    ("empty-chunk-extension", chunked_post(b"2;\r\nab\r\n0\r\n\r\n"), 400),
    ("unbalanced-quote-extension", chunked_post(b'2;a="b\r\nab\r\n0\r\n\r\n'), 400),
    ("two-word-extension", chunked_post(b"2;a b\r\nab\r\n0\r\n\r\n"), 400),
    # Transfer-Encoding values: malformed or not ending in chunked -> 400 (RFC 9112 6.3)
    ("te-chunked-x", chunked_post(b"3\r\nabc\r\n0\r\n\r\n", b"chunked x"), 400),
    ("te-chunked-param", chunked_post(b"3\r\nabc\r\n0\r\n\r\n", b"chunked;q=1"), 400),
    ("te-gzip-only", chunked_post(b"3\r\nabc\r\n0\r\n\r\n", b"gzip"), 400),
    ("te-chunked-then-gzip", chunked_post(b"3\r\nabc\r\n0\r\n\r\n", b"chunked, gzip"), 400),
    ("te-and-content-length",
     b"POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"3\r\nabc\r\n0\r\n\r\n", 400),
    ("te-in-http-1.0",
     b"POST /sink HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 400),
    # a bare LF ending a header line would hide the Content-Length behind it
    ("bare-lf-hides-content-length",
     b"POST /sink HTTP/1.1\r\nHost: x\nContent-Length: 3\r\n\r\nabc", 400),
    # sound framing, a coding the server does not decode -> 501 (RFC 9112 6.1)
    ("te-gzip-chunked", chunked_post(b"3\r\nabc\r\n0\r\n\r\n", b"gzip, chunked"), 501),
    ("te-two-codings-chunked", chunked_post(b"3\r\nabc\r\n0\r\n\r\n", b"br;q=1, gzip, chunked"), 501),
]


@pytest.mark.parametrize("name,req,status", VECTORS, ids=[v[0] for v in VECTORS])
def test_smuggling_vector_answered_once_and_closed(srv, name, req, status):
    before = srv.stats()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(req + SECOND)
        got = read_until_close(s)  # returns: the server closed the connection
    assert got.startswith(b"HTTP/1.1 %d " % status), got[:80]
    assert got.count(b"HTTP/1.1 ") == 1, got  # the request behind it is never answered
    assert b"Connection: close\r\n" in got
    assert wait_for(lambda: consistent(srv.stats()))
    after = srv.stats()
    assert after["by_status"][status] - before["by_status"].get(status, 0) == 1
    assert after["by_route"]["bytes"] == before["by_route"]["bytes"]


@pytest.mark.parametrize("path", [b"/delay/5000", b"/delay/5000?bytes=100"])
def test_client_leaving_a_delay_is_client_gone(srv, path):
    before = srv.stats()
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert wait_for(lambda: srv.stats()["by_route"]["delay"] > before["by_route"]["delay"])
    # closed and counted at once, not when the 5 s timer would have fired
    assert wait_for(lambda: srv.stats()["client_gone"] == before["client_gone"] + 1, 2.0)
    assert wait_for(lambda: srv.stats()["connections_active"] == 0, 2.0)
    assert time.monotonic() - t0 < 3.0
    after = srv.stats()
    assert consistent(after)
    assert after["by_status"].get(0, 0) - before["by_status"].get(0, 0) == 1
    assert after["by_status"].get(200, 0) == before["by_status"].get(200, 0)  # no response
    # requests == sum(by_status); client_gone is the part of by_status[0] the clients left
    assert after["client_gone"] <= after["by_status"].get(0, 0)


@pytest.mark.parametrize("path", [b"/drip/100?interval_ms=1000", b"/fault/stall/5000?bytes=10"])
def test_client_leaving_a_started_response_frees_its_connection(srv, path):
    before = srv.stats()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 200 ")
    # the wait's timer is dropped with the connection right away
    assert wait_for(lambda: srv.stats()["connections_active"] == 0, 0.8)
    after = srv.stats()
    assert consistent(after)
    # the head (200) was out: a cut response, not a client that left before it
    assert after["client_gone"] == before["client_gone"]
    assert after["by_status"][200] - before["by_status"].get(200, 0) == 1


def test_half_closed_client_still_gets_a_pipelined_delay(srv):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"GET /delay/100?bytes=3 HTTP/1.1\r\nHost: x\r\n\r\n" + SECOND)
        s.shutdown(socket.SHUT_WR)
        got = read_until_close(s)
    assert got.count(b"HTTP/1.1 200 ") == 2 and got.endswith(b"0123456")


def test_largest_stats_document_behind_pipelined_responses():
    codes = list(range(200, 600))
    with httpbench.Server(threads=4) as s:
        with socket.create_connection(("127.0.0.1", s.port), timeout=30) as c:
            c.sendall(b"".join(b"GET /status/%d HTTP/1.1\r\nHost: x\r\n\r\n" % k for k in codes))
            c.sendall(b"GET /fault/reset HTTP/1.1\r\nHost: x\r\n\r\n")  # status 0
            read_until_close(c)
        assert wait_for(lambda: consistent(s.stats()) and s.stats()["requests"] == 401)
        # every status code counted: the largest by_status the routes can produce;
        # the document goes out behind a full pipeline of other responses, twice
        pipeline = b"GET /bytes/900 HTTP/1.1\r\nHost: x\r\n\r\n" * 12
        pipeline += b"GET /__stats HTTP/1.1\r\nHost: x\r\n\r\n" * 2
        pipeline += b"GET /status/204 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        with socket.create_connection(("127.0.0.1", s.port), timeout=30) as c:
            c.sendall(pipeline)
            got = read_until_close(c)
        docs = []
        rest = got
        while rest:
            head, _, rest = rest.partition(b"\r\n\r\n")
            n = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    n = int(line.split(b":")[1])
            body, rest = rest[:n], rest[n:]
            if b"application/json" in head:
                docs.append(json.loads(body))
        assert len(docs) == 2
        for d in docs:
            assert d["requests"] >= 401 + 12
            assert {int(k) for k in d["by_status"]} == set(codes) | {0}
            assert d["client_gone"] == 0 and len(d["thread_cpu_ns"]) == 4
        want = {str(k): v for k, v in s.stats()["by_status"].items()}
        want["204"] -= 1  # the request behind the documents
        assert docs[1]["by_status"] == want


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.slow
def test_rss_returns_after_a_burst_of_idle_connections():
    n = 2500
    with open_files(n + 200):
        with httpbench.start_process(threads=1) as p:
            base = _rss_kib(p.pid)
            socks = []
            try:
                for _ in range(n):
                    c = socket.create_connection(("127.0.0.1", p.port), timeout=10)
                    c.sendall(b"GET /bytes/2000 HTTP/1.1\r\nHost: x\r\n\r\n")  # touch its buffers
                    socks.append(c)
                for c in socks:
                    got = b""
                    while not got.endswith(b"\r\n\r\n") and b"\r\n\r\n" not in got:
                        got += c.recv(4096)
                assert wait_for(lambda: p.stats()["connections_active"] == n, 20)
                peak = _rss_kib(p.pid)
            finally:
                for c in socks:
                    c.close()
            assert wait_for(lambda: p.stats()["connections_active"] == 0, 20)
            time.sleep(0.1)
            after = _rss_kib(p.pid)
            print(f"server RSS KiB: baseline {base}, {n} idle connections {peak}, after {after}")
            assert peak - base > 20_000  # the burst was visible
            assert after - base < (peak - base) / 5, (base, peak, after)


@pytest.mark.parametrize("req,why", [
    (b"GET /bytes/5 HTTP/1.1\r\n\r\n", b"no Host header"),
    (b"GET /bytes/5 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", b"more than one Host header"),
    (b"GET /bytes/5 HTTP/1.1\r\nhost: a\r\nHOST: a\r\n\r\n", b"more than one Host header"),
])
def test_http11_host_header_missing_or_repeated_is_400(srv, req, why):
    """RFC 9112 3.2: a 400, and the connection closes (nothing behind it is answered)."""
    before = srv.stats()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
        s.sendall(req + SECOND)
        got = read_until_close(s)
    assert got.startswith(b"HTTP/1.1 400 ") and got.endswith(b"bad request: " + why + b"\n")
    assert got.count(b"HTTP/1.1 ") == 1
    assert wait_for(lambda: srv.stats()["by_status"].get(400, 0) == before["by_status"].get(400, 0) + 1)


def test_http10_needs_no_host(srv):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
        s.sendall(b"GET /bytes/5 HTTP/1.0\r\n\r\n")
        got = read_until_close(s)
    assert got.startswith(b"HTTP/1.1 200 ") and got.endswith(httpbench.expected_bytes(5))
