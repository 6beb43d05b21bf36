"""bench(): exact accounting against the embedded server's own stats, every
error type counted exactly once, latency on /delay/10, HTTPS verification,
JSON round trip, argument validation."""

from __future__ import annotations

import json
import socket
import struct
import time

import httpbench
import pytest
from _raw import RawServer
from httpbench import BenchResult, bench
from httpbench._bench import Progress, format_report, parse_url

# exact deltas of the server's counters: no other module's traffic may land in them
pytestmark = pytest.mark.own_server


def _delta(before: dict, after: dict, key: str) -> int:
    return after[key] - before[key]


_KEYS = ("requests", "bytes_in", "bytes_out", "connections_accepted", "body_bytes_in")


def _settled(server, timeout: float = 2.0) -> dict:
    """Server stats once its workers have finished updating them (the counters
    of a response can land a moment after the client has read it)."""
    end = time.monotonic() + timeout
    prev = server.stats()
    while time.monotonic() < end:
        time.sleep(0.02)
        cur = server.stats()
        if all(cur[k] == prev[k] for k in _KEYS):
            return cur
        prev = cur
    return prev


def test_exact_accounting_keepalive(server):
    before = server.stats()
    r = bench(server.url + "/bytes/100", n=1003, concurrency=5, threads=2)
    after = _settled(server)
    assert isinstance(r, BenchResult)
    assert r.responses == 1003 and r.successes == 1003 and r.errors == 0
    assert r.status_counts == {200: 1003}
    assert _delta(before, after, "requests") == 1003
    assert _delta(before, after, "connections_accepted") == 5 == r.connections
    assert r.reconnects == 0 and r.in_flight_at_stop == 0 and not r.interrupted
    # bytes: what we sent is what the server read, and vice versa
    assert _delta(before, after, "bytes_in") == r.bytes_out
    assert _delta(before, after, "bytes_out") == r.bytes_in
    assert r.metadata["body_bytes_in"] == 1003 * 100
    assert r.metadata["doc_length"] == 100
    assert r.latency.count == 1003 and r.ttfb.count == 1003 and r.processing.count == 1003
    assert r.connect.count == 5
    assert sum(r.series_responses) == 1003 and sum(r.series_errors) == 0
    assert r.cpu_user_ns + r.cpu_sys_ns > 0
    assert r.end_unix_ns > r.start_unix_ns


def test_exact_accounting_no_keepalive(server):
    before = server.stats()
    r = bench(server.url + "/", n=60, concurrency=3, keepalive=False)
    after = _settled(server)
    assert r.successes == 60 and r.errors == 0
    assert _delta(before, after, "requests") == 60
    assert _delta(before, after, "connections_accepted") == 60 == r.connections
    assert r.connect.count == 60
    assert _delta(before, after, "bytes_in") == r.bytes_out


def test_connect_time_is_each_connects_own(server):
    # 64 connections opened back to back at the start: each one's connect time
    # is its own handshake, not the time to start the ones before it (which
    # made the mean ~30x a single connect on loopback). The reference is a
    # connect per request, one at a time, in the same run.
    ref = bench(server.url + "/", n=64, concurrency=1, keepalive=False)
    r = bench(server.url + "/", n=64, concurrency=64)
    assert r.connect.count == 64 and ref.connect.count == 64
    assert r.connections == 64 and r.successes == 64
    assert r.connect.percentile(50) < 10 * ref.connect.percentile(50)


def test_pipelining_and_rate_exact(server):
    before = server.stats()
    r = bench(server.url + "/", n=500, concurrency=2, pipeline=8)
    assert r.successes == 500
    r2 = bench(server.url + "/", n=77, concurrency=4, threads=2, rate=2000)
    assert r2.successes == 77 and r2.latency_uncorrected.count == 77
    after = _settled(server)
    assert _delta(before, after, "requests") == 577


def test_non_2xx_never_counts_as_success(server):
    r = bench(server.url + "/status/503", n=20, concurrency=2)
    assert r.responses == 20 and r.successes == 0 and r.non_2xx == 20
    assert r.status_counts == {503: 20}
    assert r.metadata["status_classes"]["5xx"] == 20
    assert r.rps == 0 and r.error_rps > 0
    assert "Non-2xx responses:      20" in format_report(r)


def test_chunked_and_post_body(server, tmp_path):
    r = bench(server.url + "/chunked/1000?chunk=64", n=30)
    assert r.successes == 30 and r.metadata["body_bytes_in"] == 30 * 1000
    before = server.stats()
    r = bench(server.url + "/sink", n=25, method="POST", body=b"x" * 5000, concurrency=2)
    after = _settled(server)
    assert r.successes == 25
    assert _delta(before, after, "body_bytes_in") == 25 * 5000
    f = tmp_path / "body.bin"
    f.write_bytes(bytes(range(256)) * 1000)  # 256000 bytes, streamed from the file
    before = server.stats()
    r = bench(server.url + "/sink", n=12, method="PUT", body=f, concurrency=3)
    after = _settled(server)
    assert r.successes == 12
    assert _delta(before, after, "body_bytes_in") == 12 * 256000
    assert _delta(before, after, "bytes_in") == r.bytes_out


@pytest.mark.parametrize(
    "path,kind,kw",
    [
        ("/fault/close-after-headers", "closed", {}),
        ("/fault/close-mid-body", "closed", {}),
        ("/fault/reset", "read", {}),
        ("/fault/stall/2000", "timeout", {"timeout": 0.1}),
    ],
)
def test_fault_routes_counted_once(server, path, kind, kw):
    before = server.stats()
    r = bench(server.url + path, n=6, concurrency=2, **kw)
    after = _settled(server)
    assert r.errors == 6, r.error_counts
    assert r.error_counts[kind] == 6
    assert r.responses == 0 and r.successes == 0
    assert _delta(before, after, "requests") == 6
    assert kind in r.metadata["first_error"]


def _raw_server(handler):
    """A raw TCP server running handler(sock) per connection; returns (port, close)."""
    srv = RawServer(lambda conn: handler(conn.sock))
    return srv.port, srv.close


def test_write_error():
    # The embedded server consumes a request body before its fault routes act,
    # so a reset in the middle of the upload needs a raw server: it reads a
    # little of the 16 MiB body and resets the connection.
    def reset_early(c):
        c.recv(1024)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    port, close = _raw_server(reset_early)
    try:
        r = bench(f"http://127.0.0.1:{port}/up", n=3, method="POST", body=b"y" * (16 << 20))
    finally:
        close()
    assert r.error_counts["write"] == 3, r.error_counts
    assert r.errors == 3 and r.responses == 0


def test_connect_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nobody listens there now
    r = bench(f"http://127.0.0.1:{port}/", n=7, concurrency=2)
    assert r.error_counts["connect"] == 7 and r.errors == 7 and r.responses == 0
    assert r.connections == 0


def test_protocol_error():
    # A server that answers with something that is not HTTP.
    def garbage(c):
        c.recv(65536)
        c.sendall(b"SPDY/9 banana\r\n\r\n")

    port, close = _raw_server(garbage)
    try:
        r = bench(f"http://127.0.0.1:{port}/", n=5)
    finally:
        close()
    assert r.error_counts["protocol"] == 5 and r.errors == 5


def _raw_delay_p50_ns(port: int, path: bytes, n: int) -> float:
    """Median time a plain blocking socket sees for one keep-alive request."""
    import statistics

    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        samples = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            c.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while not data.endswith(b"\r\n\r\n"):  # /delay answers with an empty body
                chunk = c.recv(4096)
                assert chunk, "server closed"
                data += chunk
            samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples)


def test_delay_p50(server):
    # Spec: p50 of /delay/10 within 10 ms +/- 2% + 50 us. Timer wake-up on a VM
    # overshoots by a machine-dependent ~0.2-0.4 ms (time.sleep shows the same), so
    # the reference is what a plain socket client measures on the same server in
    # the same test: the generator must add no more than 2% + 50 us to it, and
    # never report less than the 10 ms the server waits.
    reference = _raw_delay_p50_ns(server.port, b"/delay/10", 40)
    r = bench(server.url + "/delay/10", n=60, concurrency=4)
    assert r.successes == 60 and r.errors == 0
    assert r.p50 >= 10e6, r.p50
    assert abs(r.p50 - reference) <= 0.02 * 10e6 + 50e3, (r.p50, reference)


def test_https_verified_and_tls_error(tls_server):
    before = tls_server.stats()
    r = bench(tls_server.url + "/bytes/64", n=40, concurrency=2, ca_file=tls_server.ca_file)
    after = _settled(tls_server)
    assert r.successes == 40 and r.errors == 0
    assert r.tls is not None and r.tls.count == 2
    assert r.metadata["tls_info"].startswith("TLSv1.") and "http/1.1" in r.metadata["tls_info"]
    assert _delta(before, after, "requests") == 40
    assert _delta(before, after, "bytes_out") == r.bytes_in
    # keep-alive off: every request a new handshake, resumption on by default
    r = bench(tls_server.url + "/", n=10, keepalive=False, ca_file=tls_server.ca_file)
    assert r.successes == 10 and r.tls.count == 10 and r.connections == 10
    assert r.metadata["tls_resumed"] >= 1
    r = bench(tls_server.url + "/", n=6, keepalive=False, ca_file=tls_server.ca_file,
              session_resumption=False)
    assert r.successes == 6 and r.metadata["tls_resumed"] == 0
    r = bench(tls_server.url + "/", n=3, ca_file=tls_server.ca_file, tls_max_version="1.2")
    assert r.successes == 3 and r.metadata["tls_info"].startswith("TLSv1.2")
    # without the CA the certificate cannot be verified: one TLS error per request
    r = bench(tls_server.url + "/", n=4)
    assert r.error_counts["tls"] == 4 and r.responses == 0
    assert "certif" in r.metadata["first_error"].lower()
    # insecure works without the CA
    r = bench(tls_server.url + "/", n=4, verify=False)
    assert r.successes == 4


def test_duration_and_progress(server):
    seen: list[Progress] = []
    r = bench(server.url + "/", duration=0.6, concurrency=2, progress=seen.append)
    assert r.successes > 0 and not r.interrupted
    assert 0.55e9 <= r.duration_ns <= 1.5e9
    assert r.responses + r.errors + r.in_flight_at_stop >= r.successes
    assert seen and all(isinstance(p, Progress) for p in seen)
    assert seen[-1].completed <= r.responses + r.errors
    assert seen[-1].duration_s == 0.6


def test_warmup_not_recorded(server):
    # requests an earlier duration run left in flight are counted by the server
    # after that run returns: wait until its connections are closed
    end = time.monotonic() + 5
    while server.stats()["connections_active"] and time.monotonic() < end:
        time.sleep(0.01)
    before = _settled(server)
    r = bench(server.url + "/", n=50, warmup=0.2, concurrency=2)
    after = _settled(server)
    assert r.successes == 50 and r.latency.count == 50
    warm = r.metadata["warmup_requests"]
    assert warm > 0
    assert _delta(before, after, "requests") == 50 + warm


def test_json_round_trip(server, tmp_path):
    r = bench(server.url + "/", n=20)
    p = tmp_path / "r.json"
    r.save(p)
    back = httpbench.load(p)
    assert back.successes == 20 and back.latency.count == 20
    assert back.processing.count == 20
    assert json.loads(p.read_text())  # valid JSON


def test_report_sections(server):
    r = bench(server.url + "/bytes/150", n=30, concurrency=3)
    text = format_report(r, latency=True)
    for s in ("Server Software:", "Document Length:        150 bytes", "Concurrency Level:      3",
              "Complete requests:      30", "Failed requests:        0", "Requests per second:",
              "Connection Times (ms)", "Connect:", "Processing:", "Waiting:", "Total:",
              "Percentage of the requests", "(longest request)", "Latency distribution"):
        assert s in text, s


@pytest.mark.parametrize(
    "url,msg",
    [("ftp://x/", "scheme"), ("127.0.0.1:80/", "scheme"), ("http://:80/", "host"),
     ("http://h:99999/", "(?i)port"), ("http://h/a b", "whitespace"), ("", "URL")],
)
def test_parse_url_errors(url, msg):
    with pytest.raises(ValueError, match=msg):
        parse_url(url)


def test_parse_url():
    t = parse_url("https://user:pw@[::1]:8443/p?q=1#frag")
    assert (t.host, t.port, t.target, t.host_header, t.tls) == ("::1", 8443, "/p?q=1", "[::1]:8443", True)
    assert t.authorization == "Basic dXNlcjpwdw=="
    t = parse_url("http://example.com")
    assert (t.port, t.target, t.host_header) == (80, "/", "example.com")


@pytest.mark.parametrize(
    "kw,exc",
    [({"n": 0}, ValueError), ({"n": 5, "duration": 1}, ValueError),
     ({"concurrency": 0}, ValueError), ({"rate": -1}, ValueError),
     ({"headers": {"X\r\nY": "1"}}, ValueError), ({"headers": {"X": "a\r\nb"}}, ValueError),
     ({"method": "GE T"}, ValueError), ({"keepalive": False, "pipeline": 2}, ValueError),
     ({"headers": {"Content-Length": "3"}}, ValueError), ({"body": 12}, TypeError),
     ({"n": 1.5}, TypeError), ({"timeout": "soon"}, ValueError)],
)
def test_bad_arguments(kw, exc):
    with pytest.raises(exc):
        bench("http://127.0.0.1:9/", **kw)


def test_unresolvable_host():
    with pytest.raises(httpbench.ConnectError):
        bench("http://no-such-host.invalid/", n=1)


def test_https_file_body_and_pipelining(tls_server, tmp_path):
    # TLS file bodies go through pread + SSL_write in chunks
    f = tmp_path / "big.bin"
    f.write_bytes(b"\x01\x02\x03" * 400_000)  # 1.2 MB
    before = tls_server.stats()
    r = bench(tls_server.url + "/sink", n=5, method="POST", body=f, concurrency=2,
              ca_file=tls_server.ca_file)
    after = _settled(tls_server)
    assert r.successes == 5, r.error_counts
    assert _delta(before, after, "body_bytes_in") == 5 * 1_200_000
    r = bench(tls_server.url + "/", n=300, pipeline=4, concurrency=2, ca_file=tls_server.ca_file)
    assert r.successes == 300 and r.connections == 2


def test_large_file_body_plain(server, tmp_path):
    # 6 MB per request: sendfile hits a full socket buffer and resumes
    f = tmp_path / "big.bin"
    f.write_bytes(bytes(range(251)) * 24_000)
    size = f.stat().st_size
    before = server.stats()
    r = bench(server.url + "/sink", n=4, method="PUT", body=f, concurrency=2)
    after = _settled(server)
    assert r.successes == 4
    assert _delta(before, after, "body_bytes_in") == 4 * size
    assert r.bytes_out == _delta(before, after, "bytes_in")


def test_head_and_rate_without_keepalive(server):
    r = bench(server.url + "/bytes/100", n=10, method="HEAD")
    assert r.successes == 10 and r.metadata["body_bytes_in"] == 0
    before = server.stats()
    r = bench(server.url + "/", n=20, rate=400, keepalive=False, concurrency=2)
    after = _settled(server)
    assert r.successes == 20 and r.connections == 20
    assert _delta(before, after, "connections_accepted") == 20
    assert r.latency_uncorrected.count == 20


def test_large_responses(server):
    r = bench(server.url + "/bytes/5000000", n=5, concurrency=2)
    assert r.successes == 5 and r.metadata["body_bytes_in"] == 25_000_000
    r = bench(server.url + "/chunked/3000000?chunk=70000", n=3, pipeline=2)
    assert r.successes == 3 and r.metadata["body_bytes_in"] == 9_000_000


def test_rate_with_warmup(server):
    before = server.stats()
    r = bench(server.url + "/", n=40, rate=1000, warmup=0.05, concurrency=2)
    after = _settled(server)
    assert r.successes == 40 and r.latency.count == 40 and r.latency_uncorrected.count == 40
    # 0.05 s at 1000/s: the first 50 slots are warm-up
    assert r.metadata["warmup_requests"] == 50
    assert _delta(before, after, "requests") == 90


def test_progress_true_writes_stderr(server, capsys):
    r = bench(server.url + "/", duration=0.5, progress=True)
    assert r.successes > 0
    err = capsys.readouterr().err
    assert "requests" in err and "\r" in err
    with pytest.raises(TypeError):
        bench(server.url + "/", n=1, progress="yes")


def _scripted_server(responses):
    """Keep-alive raw server answering request k with responses[k % len]; one connection."""

    def handler(c):
        k = 0
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
            buf = buf.split(b"\r\n\r\n", 1)[1]
            c.sendall(responses[k % len(responses)])
            k += 1

    return _raw_server(handler)


def test_heads_that_differ_late_are_parsed_each_time():
    # The engine reuses the parse of a byte-identical previous head; heads of
    # the same length that differ only in the status digits, a length digit or
    # the framing must each be parsed, and an identical one must count alike.
    ok5 = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
    seq = [
        ok5,
        b"HTTP/1.1 503 OK\r\nContent-Length: 5\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nhello!!",
        ok5,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        ok5,
        b"HTTP/1.1 204 OK\r\nContent-Length: 5\r\n\r\n",  # 204: no body whatever CL says
    ]
    port, close = _scripted_server(seq)
    try:
        r = bench(f"http://127.0.0.1:{port}/", n=8 * 25)
    finally:
        close()
    assert r.errors == 0, r.error_counts
    assert r.status_counts == {200: 6 * 25, 503: 25, 204: 25}
    assert r.successes == 7 * 25
    assert r.bytes_in == 25 * sum(len(x) for x in seq)
    assert r.connections == 1


def test_malformed_head_after_a_cached_one():
    # A head that shares the remembered head's first bytes but then goes wrong
    # is a protocol error, not a copy of the previous answer.
    ok5 = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
    bad = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nno colon here\r\n\r\nhello"
    port, close = _scripted_server([ok5, ok5, bad])
    try:
        r = bench(f"http://127.0.0.1:{port}/", n=3)
    finally:
        close()
    assert r.successes == 2
    assert r.error_counts["protocol"] == 1 and r.errors == 1
