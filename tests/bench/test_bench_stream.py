"""The load generator's stream mode: server-sent events and chunked streams
timed per event (time to first event, gaps, events) with the event counts
exact against the server's, at a constant rate of new streams too; a stream
slower than the timeout fails on time as a timeout, and an SSE line with no
end in sight is a protocol error, not a growing buffer."""

from __future__ import annotations

import time

import httpbench
import pytest
from _raw import RawServer

pytestmark = pytest.mark.own_server


@pytest.fixture(scope="module")
def srv():
    with httpbench.Server() as s:
        yield s


def test_sse_events_exact(srv):
    before = srv.stats()["sse"]
    r = httpbench.bench(srv.url + "/sse?events=50&size=100", n=20, concurrency=2, stream=True)
    assert r.successes == 20 and r.errors == 0
    assert r.events == 1000 and r.ttfe.count == 20 and r.gap.count == 20 * 49
    after = srv.stats()["sse"]
    assert after["events"] - before["events"] == 1000
    assert after["streams"] - before["streams"] == 20


def test_chunks_are_events(srv):
    r = httpbench.bench(srv.url + "/stream/10000?chunk=100", n=10, stream=True)
    assert r.events == 1000 and r.ttfe.count == 10 and r.gap.count == 10 * 99
    st = srv.stats()["stream"]
    assert st["chunks"] >= 1000


def test_paced_gaps_and_rate(srv):
    r = httpbench.bench(srv.url + "/sse?events=3&size=1&interval=20", n=4, rate=50,
                        concurrency=2, stream=True)
    assert r.events == 12 and r.gap.count == 8
    assert r.gap.min >= 15_000_000  # the server waits 20 ms between events


def test_without_stream_mode_no_event_fields(srv):
    r = httpbench.bench(srv.url + "/sse?events=2", n=2)
    assert r.ttfe is None and r.events is None
    assert "ttfe" not in r.to_dict()


def test_slow_stream_times_out():
    # one byte per 500 ms: the request timeout fires on time
    t0 = time.monotonic()
    with httpbench.Server() as s:
        r = httpbench.bench(s.url + "/drip/100?interval_ms=500&chunk=1", n=1, timeout=0.3,
                            stream=True)
    assert r.error_counts["timeout"] == 1
    assert time.monotonic() - t0 < 5


def test_sse_line_without_end_is_bounded():
    def handler(c):
        if c.read_request() is None:
            return
        c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")
        block = b"x" * 65536
        try:
            for _ in range(160):  # 10 MB without a newline
                c.send(b"%x\r\n%s\r\n" % (len(block), block))
        except OSError:
            pass

    with RawServer(handler) as s:
        r = httpbench.bench(s.url("/"), n=1, stream=True, timeout=10)
    assert r.error_counts["protocol"] == 1
    assert "line" in r.metadata["first_error"]


def test_stream_budgets(srv):
    r = httpbench.bench(srv.url + "/sse?events=20&size=10", n=5, stream=True)
    from httpbench._budget import result_metrics

    m = result_metrics(r)
    assert m["ttfe_p99"] >= m["ttfe_p50"] > 0
    assert m["cpu_per_event"] == (r.cpu_user_ns + r.cpu_sys_ns) / 100
    assert m["events_per_sec"] > 0
    r.assert_budget(ttfe_p99="10s", cpu_per_event="1s")
    with pytest.raises(AssertionError):
        r.assert_budget(cpu_per_event="1ns")


def test_measure_budgets_per_event(srv):
    # a client consuming a 100-event stream per call: its cost per event
    import requests

    s = requests.Session()
    url = srv.url + "/sse?events=100&size=20"

    def consume():
        with s.get(url, stream=True) as r:
            n = sum(1 for line in r.iter_lines() if line.startswith(b"data:"))
        assert n == 100

    m = httpbench.measure(consume, n=20, events_per_call=100)
    from httpbench._budget import result_metrics

    got = result_metrics(m)
    assert m.metadata["events_per_call"] == 100
    assert got["cpu_per_event"] == m.cpu_ns_per_call / 100
    assert got["allocs_per_event"] == m.allocs_per_call / 100
    m.assert_budget(allocs_per_event=str(int(m.allocs_per_call / 100) + 1))
    with pytest.raises(ValueError):
        httpbench.measure(consume, n=1, events_per_call=0)
