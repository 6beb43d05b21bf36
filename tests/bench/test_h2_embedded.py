"""The HTTP/2 load generator against the embedded server: every stream accounted
exactly against the server's own /__stats (by_protocol["h2"], h2 stream counters)."""

from __future__ import annotations

import httpbench
import pytest

pytestmark = pytest.mark.own_server


def _delta(before: dict, after: dict, *keys: str) -> int:
    a, b = after, before
    for k in keys:
        a, b = a[k], b[k]
    return a - b


@pytest.mark.h2_server
def test_n_exact_h2c_and_tls(server, tls_server) -> None:
    for srv, kw in ((server, {}), (tls_server, {"ca_file": tls_server.ca_file})):
        before = srv.stats()
        r = httpbench.bench(srv.url + "/bytes/150", http2=True, streams=6, concurrency=3,
                            n=777, **kw)
        after = srv.stats()
        assert (r.responses, r.successes, r.errors, r.in_flight_at_stop) == (777, 777, 0, 0)
        assert r.metadata["body_bytes_in"] == 777 * 150
        assert _delta(before, after, "by_protocol", "h2") == 777
        assert _delta(before, after, "by_protocol", "http/1.1") == 0
        assert _delta(before, after, "connections_by_protocol", "h2") == 3


@pytest.mark.h2_server
def test_rate_and_warmup_exact(server) -> None:
    before = server.stats()
    r = httpbench.bench(server.url + "/bytes/10", http2=True, streams=3, concurrency=2,
                        n=150, rate=1500, warmup=0.1)
    after = server.stats()
    warm = r.metadata["warmup_requests"]
    assert (r.responses, r.errors, r.sends, r.unsent) == (150, 0, 150, 0)
    assert _delta(before, after, "by_protocol", "h2") == 150 + warm


@pytest.mark.h2_server
@pytest.mark.slow
def test_duration_every_stream_once(server) -> None:
    before = server.stats()
    r = httpbench.bench(server.url + "/bytes/150", http2=True, streams=10, concurrency=2,
                        duration=1)
    after = server.stats()
    seen = _delta(before, after, "by_protocol", "h2")
    assert r.errors == 0 and r.responses > 100
    assert r.responses <= seen <= r.responses + r.in_flight_at_stop


@pytest.mark.h2_server
def test_body_sent_over_h2(server) -> None:
    before = server.stats()
    r = httpbench.bench(server.url + "/sink", http2=True, streams=4, n=20, method="POST",
                        body=b"x" * 50_000)
    after = server.stats()
    assert (r.responses, r.successes) == (20, 20)
    assert _delta(before, after, "body_bytes_in") == 20 * 50_000


@pytest.mark.h2_server
def test_rst_stream_typed_and_counted(server) -> None:
    before = server.stats()
    r = httpbench.bench(server.url + "/fault/reset", http2=True, streams=2, n=8)
    after = server.stats()
    assert r.responses == 0 and r.error_counts["rst_stream"] == 8 == r.errors
    assert _delta(before, after, "h2", "streams_reset_sent") == 8


@pytest.mark.h2_server
def test_server_limit_on_concurrent_streams_is_respected() -> None:
    with httpbench.Server(h2_max_concurrent_streams=2) as srv:
        r = httpbench.bench(srv.url + "/bytes/10", http2=True, streams=16, n=300)
        st = srv.stats()
    assert (r.responses, r.errors) == (300, 0)
    assert st["h2"]["refused_streams"] == 0 and st["by_protocol"]["h2"] == 300


def test_server_with_http2_off_is_a_typed_error() -> None:
    # bench() and the Client raise the same type with the same code.
    with httpbench.Server(http2=False) as srv:
        with pytest.raises(httpbench.HTTP2NotSupported, match="does not speak HTTP/2") as ei:
            httpbench.bench(srv.url + "/bytes/10", http2=True, n=5)
        with httpbench.Client(http2=True) as c, \
                pytest.raises(httpbench.HTTP2NotSupported) as ci:
            c.get(srv.url + "/bytes/10")
        assert srv.stats()["by_protocol"]["h2"] == 0
    assert isinstance(ei.value, httpbench.ProtocolError)
    assert ei.value.code == ci.value.code < 0


@pytest.mark.h2_server
def test_timeout_typed(server) -> None:
    r = httpbench.bench(server.url + "/delay/3000", http2=True, streams=3, n=3, timeout=0.2)
    assert r.responses == 0 and r.error_counts["timeout"] == 3 == r.errors


@pytest.mark.h2_server
def test_fault_close_mid_body_is_goaway(server) -> None:
    before = server.stats()
    r = httpbench.bench(server.url + "/fault/close-mid-body?bytes=10000", http2=True, n=4)
    after = server.stats()
    assert r.responses == 0 and r.error_counts["goaway"] == 4 == r.errors
    assert _delta(before, after, "h2", "goaway_sent") == 4


@pytest.mark.h2_server
def test_interrupt_gives_partial_result(server) -> None:
    calls = []

    def progress(p: httpbench.Progress) -> None:
        calls.append(p)
        if p.completed:
            raise KeyboardInterrupt

    before = server.stats()
    r = httpbench.bench(server.url + "/bytes/10", http2=True, streams=4, concurrency=2,
                        duration=30, progress=progress)
    after = server.stats()
    assert r.interrupted and r.responses > 0 and r.errors == 0
    seen = _delta(before, after, "by_protocol", "h2")
    assert r.responses <= seen <= r.responses + r.in_flight_at_stop


@pytest.mark.h2_server
def test_head_status_and_large_bodies(server) -> None:
    r = httpbench.bench(server.url + "/bytes/100", http2=True, n=10, method="HEAD")
    assert (r.responses, r.errors, r.metadata["body_bytes_in"]) == (10, 0, 0)
    r = httpbench.bench(server.url + "/status/404", http2=True, n=10, streams=3)
    assert (r.responses, r.successes, r.non_2xx, r.status_counts) == (10, 0, 10, {404: 10})
    # 1 MB bodies: many DATA frames per stream, every byte counted.
    r = httpbench.bench(server.url + "/bytes/1000000", http2=True, n=20, streams=4)
    assert (r.responses, r.errors, r.metadata["body_bytes_in"]) == (20, 0, 20_000_000)
