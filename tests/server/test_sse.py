"""The streaming routes over HTTP/1.1, byte for byte against curl: /sse (the
event-stream framing with multi-line data, a comment and retry) and
/stream/{n} (a chunked body in chunks of ?chunk= bytes), chunk framing
included (curl --raw), HTTP/1.0 (delimited by the close), HEAD, bad
parameters, pacing (each paced event in its own read), and the counts exact
against the server's stats; a client that never reads is cut at the write
timeout with at most a socket buffer's worth sent."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import httpbench
import pytest
from _raw import stats_answers
from _stream import chunk_framed, content, parse_sse, sse_data, sse_event, sse_stream

pytestmark = pytest.mark.own_server

CURL = shutil.which("curl")
need_curl = pytest.mark.skipif(CURL is None, reason="curl not installed")


def curl(url: str, *args: str) -> tuple[bytes, str]:
    """(body, response head) as curl got them."""
    out = subprocess.run([CURL, "-sS", "--max-time", "30", "-i", *args, url], capture_output=True,
                         timeout=60, check=True).stdout
    head, _, body = out.partition(b"\r\n\r\n")
    return body, head.decode()


@pytest.fixture(scope="module")
def srv():
    with httpbench.Server() as s:
        yield s


@need_curl
@pytest.mark.parametrize("events,size", [(1, 0), (3, 5), (10, 64), (4, 65), (7, 130), (2, 1024),
                                         (3, 65536)])
def test_sse_byte_exact(srv, events, size):
    before = srv.stats()["sse"]
    body, head = curl(f"{srv.url}/sse?events={events}&size={size}")
    assert head.startswith("HTTP/1.1 200 ")
    assert "Content-Type: text/event-stream" in head and "Transfer-Encoding: chunked" in head
    assert "Cache-Control: no-cache" in head
    assert body.decode() == sse_stream(events, size)
    evs = parse_sse(body.decode())
    assert [e["id"] for e in evs] == [str(i) for i in range(1, events + 1)]
    assert all(e["event"] == "tick" and e["data"] == sse_data(size) for e in evs)
    # the framing: the preamble, then one chunk per event
    raw, _ = curl(f"{srv.url}/sse?events={events}&size={size}", "--raw")
    pieces = [b": httpbench\nretry: 1000\n\n"] + [sse_event(i, size).encode()
                                                  for i in range(1, events + 1)]
    assert raw == chunk_framed(pieces)
    after = srv.stats()["sse"]
    assert after["streams"] - before["streams"] == 2
    assert after["events"] - before["events"] == 2 * events
    assert after["bytes"] - before["bytes"] == 2 * sum(len(p) for p in pieces[1:])


@need_curl
def test_sse_http10_and_head(srv):
    body, head = curl(f"{srv.url}/sse?events=3&size=70", "--http1.0")
    assert head.startswith("HTTP/1.1 200 ") and "Transfer-Encoding" not in head
    assert "Connection: close" in head
    assert body.decode() == sse_stream(3, 70)
    before = srv.stats()["sse"]["events"]
    body, head = curl(f"{srv.url}/sse?events=3", "-I")
    assert head.startswith("HTTP/1.1 200 ") and "text/event-stream" in head and body == b""
    assert srv.stats()["sse"]["events"] == before


@need_curl
@pytest.mark.parametrize("target", ["/sse?events=x", "/sse?size=65537", "/sse?interval=60001",
                                    "/stream/10?chunk=0", "/stream/10?interval=99999999",
                                    "/stream/10?chunk=1048577",
                                    "/stream/x"])
def test_bad_parameters(srv, target):
    out = subprocess.run([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", srv.url + target],
                         capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout == "400"


@need_curl
@pytest.mark.parametrize("n,chunk", [(0, 10), (1, 1), (100, 7), (4096, 4096), (100000, 16384),
                                     (1 << 20, 65536), (70000, 70000), (3 << 20, 1 << 20)])
def test_stream_byte_exact(srv, n, chunk):
    before = srv.stats()["stream"]
    body, head = curl(f"{srv.url}/stream/{n}?chunk={chunk}")
    assert head.startswith("HTTP/1.1 200 ") and "Transfer-Encoding: chunked" in head
    assert body == content(n)
    raw, _ = curl(f"{srv.url}/stream/{n}?chunk={chunk}", "--raw")
    pieces = [content(min(chunk, n - off), off) for off in range(0, n, chunk)]
    assert raw == chunk_framed(pieces)
    after = srv.stats()["stream"]
    assert after["streams"] - before["streams"] == 2
    assert after["chunks"] - before["chunks"] == 2 * len(pieces)
    assert after["bytes"] - before["bytes"] == 2 * n
    body, head = curl(f"{srv.url}/stream/{n}?chunk={chunk}", "--http1.0")
    assert body == content(n) and "Transfer-Encoding" not in head


def read_until(s: socket.socket, end: bytes, limit: float = 10.0) -> list[bytes]:
    """Each recv() until the data ends with `end`."""
    s.settimeout(limit)
    reads: list[bytes] = []
    while not b"".join(reads).endswith(end):
        got = s.recv(65536)
        assert got, b"".join(reads)
        reads.append(got)
    return reads


def test_paced_events_arrive_one_per_read(srv):
    # 40 ms apart: each event is its own write, so (on loopback) its own read
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        t0 = time.monotonic()
        s.sendall(b"GET /sse?events=4&size=3&interval=40 HTTP/1.1\r\nHost: x\r\n\r\n")
        reads = read_until(s, b"0\r\n\r\n")
        elapsed = time.monotonic() - t0
    events = [r for r in reads if b"event: tick" in r]
    assert len(events) == 4
    events[-1] = events[-1].removesuffix(b"0\r\n\r\n")  # the end may follow at once
    for i, r in enumerate(events, 1):
        assert r.endswith(b"%x\r\n%s\r\n" % (len(sse_event(i, 3)), sse_event(i, 3).encode()))
    assert elapsed >= 3 * 0.040 * 0.9  # three intervals between four events


def test_paced_stream_chunks(srv):
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.sendall(b"GET /stream/30?chunk=10&interval=30 HTTP/1.1\r\nHost: x\r\n\r\n")
        reads = read_until(s, b"0\r\n\r\n")
    data = b"".join(reads)
    assert data.split(b"\r\n\r\n", 1)[1] == chunk_framed([content(10), content(10, 10),
                                                          content(10, 20)])


def test_keepalive_after_stream(srv):
    # the connection serves the next request once the stream is done
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.sendall(b"GET /sse?events=2&size=1 HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /bytes/5 HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b"".join(read_until(s, b"\r\n\r\n" + content(5)))
    assert data.count(b"HTTP/1.1 200 ") == 2
    assert sse_event(2, 1).encode() in data


def test_never_reading_client_is_cut():
    # a flood to a client that never reads: the server holds one event at a time and
    # closes at the write timeout; the client got at most what the socket buffers held
    with httpbench.Server(request_timeout=0.5) as s:
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        c.connect(("127.0.0.1", s.port))
        c.sendall(b"GET /sse?events=100000000&size=65536 HTTP/1.1\r\nHost: x\r\n\r\n")
        deadline = time.monotonic() + 10
        while s.stats()["connections_closed"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        st = s.stats()
        c.close()
    assert st["connections_closed"] == 1
    assert st["sse"]["streams"] == 1
    assert st["sse"]["events"] < 200  # a few MB of socket buffers, not 10^8 events
    assert st["bytes_out"] < 16 << 20
    assert st["sse"]["write_timeouts"] == 1 and st["stream"]["write_timeouts"] == 0


def test_flood_leaves_the_worker_to_others():
    # one worker thread, a flood read by the (fast, C) load generator: another client's
    # requests on the same worker are answered while the flood runs, each within a
    # bounded number of flood bytes. Each GET /__stats answer carries the SSE bytes
    # written when it was served; a turn of the flood writes at most its budget (64 KiB,
    # hb_server_int.h) and one event more, and between two answers the flood gets the
    # turn in progress and those while the client reads and asks again (as a rule none):
    # the median gap stays within three turns. Counts, not rates. A server without the
    # budget (-DHB_SERVER_UNFAIR) answers only after the flood.
    import threading

    turn = 64 * 1024 + 200
    with httpbench.Server(threads=1) as s:
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("r", httpbench.bench(
            s.url + "/sse?events=100000000&size=100", duration=2, stream=True, timeout=30)))
        t.start()
        time.sleep(0.3)
        try:
            answers = stats_answers(s.port, 40, timeout=5)
        finally:
            t.join(60)
    written = [a["sse"]["bytes"] for a in answers]
    gaps = sorted(b - a for a, b in zip(written[:-1], written[1:], strict=True))
    # the flood ran while the client was answered (a server without the budget answers
    # only once the flood is over: then nothing moves between the answers)
    assert written[-1] - written[0] > 10 * turn, written
    assert gaps[len(gaps) // 2] <= 3 * turn, gaps


@need_curl
@pytest.mark.h2_server
def test_over_h2_the_same_bodies_and_ws_501():
    # HTTP/2 (h2c): /stream and /sse send the same content (tests/server/test_h2_sse.py
    # has the rest); /ws answers 501 (no extended CONNECT)
    with httpbench.Server(http2=True) as s:
        def h2(target):
            r = subprocess.run([CURL, "-sS", "--http2-prior-knowledge", "-w",
                                "\n%{http_code} %{http_version}", s.url + target],
                               capture_output=True, timeout=30, check=True)
            body, _, meta = r.stdout.rpartition(b"\n")
            return meta.decode(), body

        assert h2("/stream/70000?chunk=1000") == ("200 2", content(70000))
        assert h2("/stream/10?interval=5") == ("200 2", content(10))
        assert h2("/sse?events=3&size=70") == ("200 2", sse_stream(3, 70).encode())
        meta, body = h2("/ws")
        assert meta == "501 2" and b"HTTP/1.1 only" in body


@need_curl
def test_over_tls():
    with httpbench.Server(tls=True) as s:
        body, head = curl(f"{s.url}/sse?events=5&size=70", "--cacert", s.ca_file, "--http1.1")
        assert body.decode() == sse_stream(5, 70)
        r = httpbench.bench(s.url + "/sse?events=5&size=70", n=4, stream=True, ca_file=s.ca_file)
        assert r.events == 20 and s.stats()["sse"]["events"] == 25


def test_result_json_round_trip(srv):
    r = httpbench.bench(srv.url + "/sse?events=3", n=2, stream=True)
    back = httpbench.BenchResult.from_dict(r.to_dict())
    assert back.events == 6 and back.ttfe.count == 2 and back.gap.count == 4


def test_cli_stream_report(srv):
    import sys

    p = subprocess.run([sys.executable, "-m", "httpbench", srv.url + "/sse?events=7&size=3",
                        "-n", "3", "--stream"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Events:" in p.stdout and " 21 (" in p.stdout
    assert "1st event:" in p.stdout and "Event gap:" in p.stdout
