"""The load generator over HTTP/3 (bench(http3=True), ``httpbench URL --h3``) against the
embedded server's HTTP/3 listener: exact accounting against the listener's own counts,
streams per connection, duration and constant-rate modes, typed errors in bounded time
for a closed or silent UDP port and an untrusted certificate, and the clear refusals
of bad combinations. A build without ngtcp2/GnuTLS refuses http3=True."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time

import httpbench
import pytest
from _raw import settled_h3
from httpbench import expected_bytes
from httpbench._features import h3_missing

H3_CLIENT = httpbench.features()["http3-client"]
needs_client = pytest.mark.skipif(not H3_CLIENT, reason="built without the HTTP/3 client "
                                  "(ngtcp2, GnuTLS headers absent)")
needs_server = pytest.mark.skipif(h3_missing() is not None, reason=str(h3_missing()))


@pytest.fixture(scope="module")
def h3srv():
    from httpbench._server import start_process

    with start_process(tls=True, h3=True, request_timeout=5.0) as srv:
        yield srv


def _h3(srv) -> int:
    return srv.stats()["by_protocol"]["h3"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "httpbench", *args], capture_output=True,
                          text=True, timeout=120)


@needs_client
@needs_server
@pytest.mark.parametrize("conns,streams,n", [(1, 1, 200), (4, 10, 1000), (3, 2, 301)])
def test_exactly_n_requests_counted_by_the_server(h3srv, conns, streams, n):
    before = h3srv.stats()
    r = httpbench.bench(h3srv.h3_url + "/bytes/150", n=n, concurrency=conns, streams=streams,
                        http3=True, ca_file=h3srv.ca_file, timeout=10)
    after = h3srv.stats()
    assert (r.responses, r.successes, r.errors) == (n, n, 0), r.metadata["first_error"]
    assert after["by_protocol"]["h3"] - before["by_protocol"]["h3"] == n
    assert after["by_route"]["bytes"] - before["by_route"].get("bytes", 0) == n
    for p in ("http/1.1", "h2"):  # nothing went over TCP
        assert after["by_protocol"][p] == before["by_protocol"][p]
    assert r.connections == conns and r.reconnects == 0
    assert r.config.protocol == "h3" and r.config.streams == streams
    assert r.config.h2_shape == f"h3 -c{conns} -m{streams}"
    assert r.metadata["body_bytes_in"] == 150 * n
    assert r.metadata["doc_length"] == 150
    assert r.metadata["server"]
    assert re.fullmatch(r"QUIC v1,TLSv1\.3,TLS_\w+,h3", r.metadata["tls_info"])
    # every response crossed UDP: each needs a datagram each way at least, and the
    # payloads hold the bodies plus QUIC's headers and authentication tags
    assert r.quic_datagrams_received >= n // streams and r.quic_datagrams_sent >= n // streams
    assert r.bytes_in > 150 * n and r.bytes_out > 0
    assert r.tls is not None and r.tls.count == conns  # one QUIC handshake per connection


@needs_client
@needs_server
def test_uploads_arrive_byte_exact(h3srv):
    body = expected_bytes(5000, 3)
    before = h3srv.stats()
    r = httpbench.bench(h3srv.h3_url + "/sink", n=40, method="POST", body=body,
                        concurrency=2, streams=3, http3=True, ca_file=h3srv.ca_file)
    after = h3srv.stats()
    assert (r.successes, r.errors) == (40, 0), r.metadata["first_error"]
    assert after["body_bytes_in"] - before["body_bytes_in"] == 40 * len(body)
    assert after["by_route"]["sink"] - before["by_route"].get("sink", 0) == 40
    # bodies of many datagrams go out in GSO batches (one sendmsg, the kernel cuts them)
    big = expected_bytes(300_000, 5)
    before = h3srv.stats()
    r = httpbench.bench(h3srv.h3_url + "/sink", n=12, method="POST", body=big, concurrency=2,
                        streams=2, http3=True, ca_file=h3srv.ca_file, timeout=10)
    after = h3srv.stats()
    assert (r.successes, r.errors) == (12, 0), r.metadata["first_error"]
    assert after["body_bytes_in"] - before["body_bytes_in"] == 12 * len(big)
    assert r.quic_datagrams_sent >= 12 * len(big) // 1500


@needs_client
@needs_server
def test_statuses_are_counted_not_failed(h3srv):
    r = httpbench.bench(h3srv.h3_url + "/status/503", n=30, http3=True, ca_file=h3srv.ca_file)
    assert (r.responses, r.successes, r.errors, r.status_counts) == (30, 0, 0, {503: 30})


@needs_client
@needs_server
def test_new_connection_per_request(h3srv):
    before = h3srv.stats()
    r = httpbench.bench(h3srv.h3_url + "/bytes/10", n=15, keepalive=False, http3=True,
                        ca_file=h3srv.ca_file)
    after = h3srv.stats()
    assert (r.successes, r.errors) == (15, 0), r.metadata["first_error"]
    assert r.connections == 15 and r.tls.count == 15
    assert (after["connections_by_protocol"]["h3"] - before["connections_by_protocol"]["h3"]
            == 15)


@needs_client
@needs_server
def test_new_connection_answers_without_waiting_for_a_timer(h3srv):
    # Pacing the handshake with ngtcp2's 333 ms initial-RTT guess held each new
    # connection's Finished and first answer ~22 ms, long enough for about three
    # probe timeouts to fire per connection; on loopback none is due.
    n = 50
    before = h3srv.stats()
    r = httpbench.bench(h3srv.h3_url + "/bytes/150", n=n, keepalive=False, http3=True,
                        ca_file=h3srv.ca_file, timeout=10)
    h2 = httpbench.bench(h3srv.url + "/bytes/150", n=n, keepalive=False, http2=True,
                         ca_file=h3srv.ca_file, timeout=10)
    after = h3srv.stats()
    assert (r.successes, r.errors, r.connections) == (n, 0, n), r.metadata["first_error"]
    assert h2.successes == n
    assert after["connections_by_protocol"]["h3"] - before["connections_by_protocol"]["h3"] == n
    assert r.quic_pto < n, f"{r.quic_pto} probe timeouts over {n} connections"
    # a ratio within one run, not a time limit: a QUIC connect costs about what TLS over TCP does
    assert r.p50 < 10 * h2.p50, (r.p50, h2.p50)


@needs_client
@needs_server
def test_duration_mode_ends_on_time_and_accounts_every_request(h3srv):
    before = _h3(h3srv)
    t0 = time.monotonic()
    r = httpbench.bench(h3srv.h3_url + "/bytes/150", duration=0.8, concurrency=2, streams=4,
                        http3=True, ca_file=h3srv.ca_file)
    took = time.monotonic() - t0
    served = _h3(h3srv) - before
    assert took < 0.8 + 3.0
    assert 0.7e9 < r.duration_ns < 1.5e9
    assert r.errors == 0 and r.successes > 0
    # the server answered every accounted request; those in flight at the stop may or
    # may not have reached it
    assert r.responses <= served <= r.responses + r.in_flight_at_stop
    assert r.in_flight_at_stop <= 2 * 4


@needs_client
@needs_server
def test_constant_rate(h3srv):
    before = _h3(h3srv)
    r = httpbench.bench(h3srv.h3_url + "/bytes/150", n=100, rate=250, concurrency=2,
                        http3=True, ca_file=h3srv.ca_file)
    assert (r.successes, r.errors) == (100, 0)
    assert _h3(h3srv) - before == 100
    assert r.sends == 100 and r.unsent == 0
    assert r.latency_uncorrected is not None and r.latency_uncorrected.count == 100



@needs_client
@needs_server
@pytest.mark.parametrize("conns", [1, 4])
def test_untrusted_certificate_stops_the_run_and_closes_on_the_server(h3srv, conns):
    before = settled_h3(h3srv)
    with pytest.raises(httpbench.TLSError, match="certificate verification failed") as ei:
        httpbench.bench(h3srv.h3_url + "/bytes/150", n=2000, concurrency=conns,
                        http3=True)  # system trust only: the test CA is unknown
    assert ei.value.code == httpbench._core.E_TLS_VERIFY
    after = settled_h3(h3srv)
    assert after["half_open"] == 0
    # one handshake per connection, no reconnect: each ended by the client's
    # CONNECTION_CLOSE (a peer close), none by the server's handshake timeout
    assert after["accepted"] - before["accepted"] == conns
    assert after["connections_closed"] - before["connections_closed"] == conns
    assert after["errors"] == before["errors"]
    assert after["idle_timeouts"] == before["idle_timeouts"]
    assert after["refused"] == before["refused"]
    assert after["handshakes"] == before["handshakes"]
    # and a run that skips verification right after gets every answer, nothing refused
    ok = httpbench.bench(h3srv.h3_url + "/bytes/150", n=40, concurrency=conns, http3=True,
                         verify=False)
    assert (ok.successes, ok.errors, ok.connections) == (40, 0, conns)
    assert ok.connect_attempts == conns and ok.connect_failures == 0
    assert h3srv.stats()["h3"]["refused"] == before["refused"]


@needs_client
@needs_server
def test_a_handshake_its_client_closed_stops_counting_as_half_open_at_once(h3srv):
    before = settled_h3(h3srv)
    with pytest.raises(httpbench.TLSError):
        httpbench.bench(h3srv.h3_url + "/bytes/150", n=10, concurrency=4, http3=True)
    # the four connections drain (3 PTOs, about 3 s before an RTT sample) but hold no
    # half-open slot meanwhile: the Retry threshold and the cap see them gone
    end = time.monotonic() + 2.0
    while True:
        s = h3srv.stats()
        closed = s["h3"]["connections_closed"] - before["connections_closed"]
        if s["h3"]["half_open"] == 0 or time.monotonic() > end:
            break
        time.sleep(0.02)
    assert s["h3"]["half_open"] == 0, s["h3"]
    assert closed < 4, "the connections were already freed: nothing drained to observe"
    after = settled_h3(h3srv)
    assert after["half_open"] == 0
    assert after["connections_closed"] - before["connections_closed"] == 4
    assert after["errors"] == before["errors"]


@needs_client
@needs_server
def test_cli_untrusted_certificate_says_how_to_trust_as_over_tcp(h3srv):
    before = settled_h3(h3srv)
    p = _cli(h3srv.h3_url + "/bytes/150", "--h3", "-c1", "-n", "2000")
    tcp = _cli(h3srv.url + "/bytes/150", "-c1", "-n", "2000")
    assert p.returncode == tcp.returncode == 1
    assert p.stdout == tcp.stdout == ""  # no run, no report
    port = h3srv.h3_url.rsplit(":", 1)[1]
    for out in (p.stderr, tcp.stderr):
        assert out.startswith(f"httpbench: TLS verification of 127.0.0.1:{port} failed ("), out
        assert out.endswith("); nothing was sent. Trust the server with --ca-file PATH (its CA "
                            "certificate in PEM; `httpbench serve` prints the path of its own) "
                            "or skip verification with --insecure\n"), out
    assert "issuer is unknown" in p.stderr
    after = settled_h3(h3srv)
    assert after["accepted"] - before["accepted"] == 1  # one attempt
    assert after["connections_closed"] - before["connections_closed"] == 1
    assert after["errors"] == before["errors"]
    ok = _cli(h3srv.h3_url + "/bytes/150", "--h3", "-c1", "-n", "20", "--insecure")
    assert ok.returncode == 0 and "Complete requests:      20" in ok.stdout, ok.stderr


@needs_client
@needs_server
def test_warmup_requests_are_sent_but_not_counted(h3srv):
    before = _h3(h3srv)
    r = httpbench.bench(h3srv.h3_url + "/bytes/150", n=100, warmup=0.2, concurrency=2,
                        streams=2, http3=True, ca_file=h3srv.ca_file)
    assert (r.successes, r.errors) == (100, 0)
    warm = r.metadata["warmup_requests"]
    assert warm > 0
    assert _h3(h3srv) - before == 100 + warm


@needs_client
def test_unreadable_ca_file_is_a_tls_error_before_the_run():
    with pytest.raises(httpbench.TLSError, match="nonexistent"):
        httpbench.bench("https://127.0.0.1:1/", n=1, http3=True, ca_file="/nonexistent/ca.pem")


def _udp_port(keep: bool):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    if not keep:
        s.close()
        return port, None
    return port, s


@needs_client
def test_closed_udp_port_fails_fast_as_connect_errors():
    port, _ = _udp_port(keep=False)
    t0 = time.monotonic()
    r = httpbench.bench(f"https://127.0.0.1:{port}/", n=5, http3=True, verify=False,
                        timeout=1)
    assert time.monotonic() - t0 < 10
    assert r.successes == 0 and r.connections == 0
    # ICMP port unreachable reaches the connected socket as ECONNREFUSED
    assert r.error_counts["connect"] > 0 and r.errors == r.error_counts["connect"]
    assert "Connection refused" in r.metadata["first_error"]
    assert r.connect_failures == r.error_counts["connect"]


@needs_client
def test_silent_udp_port_ends_at_the_handshake_timeout():
    port, sock = _udp_port(keep=True)  # bound, never answers: QUIC has no RST
    try:
        t0 = time.monotonic()
        r = httpbench.bench(f"https://127.0.0.1:{port}/", n=2, http3=True, verify=False,
                            timeout=0.3)
        took = time.monotonic() - t0
    finally:
        sock.close()
    assert took < 10
    assert r.successes == 0 and r.errors == r.error_counts["connect"] > 0
    assert "handshake timeout" in r.metadata["first_error"]
    # Initials went out, no request completed: no per-request datagram figure
    assert r.quic_datagrams_sent > 0
    line = next(ln for ln in r.summary().splitlines() if "QUIC datagrams" in ln)
    assert line.endswith("received (– per request)"), line


class _VersionRefuser:
    """A UDP port that answers every QUIC long-header packet at once with a Version
    Negotiation listing only a version nobody speaks: each handshake fails in
    microseconds, without TLS, so only the generator's back-off bounds the attempts."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.initials = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                d, peer = self.sock.recvfrom(2048)
            except (TimeoutError, OSError):
                continue
            if len(d) < 7 or not d[0] & 0x80:
                continue
            dl = d[5]
            dcid = d[6:6 + dl]
            sl = d[6 + dl]
            scid = d[7 + dl:7 + dl + sl]
            self.initials += 1
            vn = (bytes([0x80 | 0x2a]) + b"\0\0\0\0" + bytes([len(scid)]) + scid
                  + bytes([len(dcid)]) + dcid + bytes.fromhex("1a2a3a4a"))
            self.sock.sendto(vn, peer)

    def close(self) -> None:
        self._stop.set()
        self._t.join()
        self.sock.close()


def _backoff_bound(duration_ns: int) -> int:
    """Attempts one connection may make in duration_ns when each failure waits 1, 2, 4
    ... 128 ms before the next (the TCP connect back-off), failures taking no time."""
    n, t, wait = 1, 0.0, 1e6
    while t + wait <= duration_ns:
        t += wait
        n += 1
        wait = min(wait * 2, 128e6)
    return n


@needs_client
def test_failing_handshakes_reconnect_at_a_bounded_rate():
    srv = _VersionRefuser()
    try:
        r = httpbench.bench(f"https://127.0.0.1:{srv.port}/", duration=1.0, concurrency=2,
                            http3=True, verify=False)
    finally:
        srv.close()
    assert r.successes == 0 and r.connections == 0
    assert "does not speak QUIC v1" in r.metadata["first_error"]
    # every attempt failed and was counted as such
    assert r.connect_failures == r.connect_attempts
    # 2 connections backing off 1 ms .. 128 ms: ~14 attempts each in a second, where an
    # immediate reconnect made hundreds; the bound follows the run's own duration
    bound = 2 * _backoff_bound(r.duration_ns + 50_000_000)
    assert 4 <= r.connect_attempts <= bound, (r.connect_attempts, bound, r.duration_ns)
    assert srv.initials >= r.connect_attempts - 2  # (the last ones may be cut at the stop)


@needs_client
@needs_server
def test_result_json_round_trip_and_report(h3srv):
    r = httpbench.bench(h3srv.h3_url + "/bytes/150", n=20, http3=True, ca_file=h3srv.ca_file)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["config"]["protocol"] == "h3"
    assert d["quic_datagrams_sent"] == r.quic_datagrams_sent > 0
    back = type(r).from_dict(d)
    assert (back.quic_datagrams_sent, back.quic_datagrams_received, back.quic_pto) == (
        r.quic_datagrams_sent, r.quic_datagrams_received, r.quic_pto)
    assert back.datagrams_per_request == r.datagrams_per_request > 0
    text = r.summary()
    assert "HTTP/3" in text and "QUIC datagrams" in text
    pd = pytest.importorskip("pandas")
    df = httpbench.report.to_dataframe([r, httpbench.bench(h3srv.url + "/bytes/150", n=5,
                                                           ca_file=h3srv.ca_file)])
    assert list(df["protocol"]) == ["h3", "http/1.1"]
    assert df["quic_datagrams_per_request"][0] == pytest.approx(r.datagrams_per_request)
    assert pd.isna(df["quic_datagrams_per_request"][1])


def test_http1_and_h2_results_have_no_quic_figures():
    with httpbench.Server() as srv:
        r = httpbench.bench(srv.url + "/bytes/10", n=5)
    assert r.quic_datagrams_sent is None and r.datagrams_per_request is None
    assert "quic_datagrams_sent" not in r.to_dict()


@pytest.mark.parametrize("kw,msg", [
    (dict(http2=True), "exclusive"),
    (dict(pipeline=2), "pipelining"),
    (dict(cluster="local:1"), "not supported with cluster"),
    (dict(tls_max_version="1.2"), "TLS 1.3 only"),
])
def test_bad_combinations_are_value_errors(kw, msg):
    with pytest.raises(ValueError, match=msg):
        httpbench.bench("https://127.0.0.1:1/", n=1, http3=True, **kw)


def test_http3_needs_an_https_url():
    with pytest.raises(ValueError, match=r"needs an https:// URL"):
        httpbench.bench("http://127.0.0.1:1/", n=1, http3=True)


@pytest.mark.parametrize("args,msg", [
    (["--h3", "--h2"], "--h2 and --h3 are exclusive"),
    (["--h3", "--pipeline", "2"], "with --h3 use -m STREAMS"),
    (["-m", "4"], "need --h2 or --h3"),
])
def test_cli_refuses_bad_combinations(args, msg):
    p = _cli("https://127.0.0.1:1/", "-n", "1", *args)
    assert p.returncode == 2 and msg in p.stderr, p.stderr


def test_cli_http3_needs_https():
    p = _cli("http://127.0.0.1:1/", "-n", "1", "--h3")
    assert p.returncode == 2 and "needs an https:// URL" in p.stderr, p.stderr


@needs_client
@needs_server
def test_cli_runs_over_http3(h3srv):
    before = _h3(h3srv)
    p = _cli(h3srv.h3_url + "/bytes/150", "--h3", "-c", "2", "-m", "3", "-n", "60",
             "--ca-file", h3srv.ca_file)
    assert p.returncode == 0, p.stderr
    assert _h3(h3srv) - before == 60
    assert "HTTP/3" in p.stdout and "Complete requests:      60" in p.stdout


@pytest.mark.skipif(H3_CLIENT, reason="this build has the HTTP/3 client")
def test_build_without_h3_refuses_clearly():
    with pytest.raises(httpbench.FeatureUnavailable, match="no HTTP/3 client"):
        httpbench.bench("https://127.0.0.1:1/", n=1, http3=True)


@needs_client
@needs_server
@pytest.mark.slow
def test_long_run_many_streams_and_downloads(h3srv):
    before = h3srv.stats()
    r = httpbench.bench(h3srv.h3_url + "/bytes/12000", n=6000, concurrency=8, streams=16,
                        threads=2, http3=True, ca_file=h3srv.ca_file, timeout=20)
    after = h3srv.stats()
    assert (r.successes, r.errors) == (6000, 0), r.metadata["first_error"]
    assert after["by_protocol"]["h3"] - before["by_protocol"]["h3"] == 6000
    assert r.metadata["body_bytes_in"] == 12000 * 6000
    big = httpbench.bench(h3srv.h3_url + "/bytes/1000000", n=20, concurrency=2, http3=True,
                          ca_file=h3srv.ca_file, timeout=20)
    assert (big.successes, big.errors) == (20, 0)
    assert big.metadata["body_bytes_in"] == 20 * 1_000_000


_ALLOC_WORKER = """
import json, sys
import httpbench
from httpbench import native_allocs
url, n, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
httpbench.bench(url, n=300, concurrency=2, streams=5, http3=True, ca_file=ca)  # warm-up
a0 = native_allocs()
r = httpbench.bench(url, n=n, concurrency=2, streams=5, http3=True, ca_file=ca)
a1 = native_allocs()
print(json.dumps({"ok": r.successes, "allocs": a1["count"] - a0["count"]}))
"""


@needs_client
@needs_server
@pytest.mark.slow
def test_no_heap_allocation_per_request_in_steady_state(h3srv):
    # the QUIC and HTTP/3 libraries allocate from the client's pool: what a longer run
    # adds is a few blocks at most, not one per request (11 per request without it)
    import os

    env = dict(os.environ, LD_PRELOAD=httpbench.native_alloc_preload_path())
    out = []
    for n in (500, 2500):
        p = subprocess.run([sys.executable, "-c", _ALLOC_WORKER, h3srv.h3_url + "/bytes/150",
                            str(n), h3srv.ca_file], env=env, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        out.append(json.loads(p.stdout.strip().splitlines()[-1]))
    assert out[0]["ok"] == 500 and out[1]["ok"] == 2500
    assert out[1]["allocs"] - out[0]["allocs"] < 2000 * 0.02
