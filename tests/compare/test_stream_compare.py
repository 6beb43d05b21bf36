"""compare's streaming scenarios: sse-100x1k (each request reads a 100-event stream with
the client's own streaming API, the count checked every round; clients without a reader
skipped with the reason), sse-ttfe (events 10 ms apart, each timestamped: time to first
event and gaps beside the server's interval) and stream-10m-chunked (a chunked download,
CRC-checked)."""

from __future__ import annotations

import pytest
from httpbench._adapters import available_clients
from httpbench._adapters.sse_ import Dispatch
from httpbench._runner import Runner, RunOptions
from httpbench._scenarios import DEFAULT_SCENARIOS, SCENARIOS, STREAM_SCENARIOS, parse_scenario

SSE_CLIENTS = ("requests", "httpx", "httpx-async", "urllib3", "aiohttp", "pycurl",
               "http.client", "niquests", "native", "curl_cffi", "wreq", "pyreqwest")
NO_SSE = ("curl_cffi-async", "wreq-async", "pyreqwest-async", "primp")
# hands a paced stream over only at its end (body_reader.read_chunk): gaps of microseconds
BUFFERS_EVENTS = ("pyreqwest",)


def test_stream_scenarios_and_specs():
    assert STREAM_SCENARIOS == ("sse-100x1k", "stream-10m-chunked", "ws-echo-1k", "ws-push-100k",
                                "sse-ttfe")
    assert not set(STREAM_SCENARIOS) & set(DEFAULT_SCENARIOS)  # they run when named
    sc = SCENARIOS["sse-100x1k"]
    assert (sc.events, sc.path, sc.method) == (100, "/sse?events=100&size=1024", "GET")
    assert SCENARIOS["stream-10m-chunked"].download
    assert parse_scenario("mine:path=/sse?events=5,events=5").events == 5
    ttfe = SCENARIOS["sse-ttfe"]
    assert ttfe.event_timing and ttfe.events == 20 and "interval=10" in ttfe.path
    with pytest.raises(ValueError, match="event_timing needs events"):
        ttfe.replace(events=0)
    for bad in ("x:path=/bytes/5,events=5", "x:path=/sse,events=5,concurrency=2",
                "x:path=/sse,events=-1", "x:path=/sse,events=5,protocol=h2"):
        with pytest.raises(ValueError):
            parse_scenario(bad)


def test_dispatch_rule():
    d = Dispatch()
    for line in (b": comment", b"", b"id: 1", b"data: a", b"data", b"", b"", b"event: x", b"",
                 b"datum: y", b"", b"data:z", b""):
        d.line(line)
    assert d.events == 2  # a comment block, blank lines and a block without data: none


def _check(rs):
    bad = [n for n in rs.notes if n.kind in ("errors", "bad-response", "count-mismatch",
                                             "worker-failed")]
    assert not bad, bad
    for (c, _, _), m in rs.results.items():
        assert m.metadata["verify"]["ok"], (c, m.metadata["verify"])
        assert m.metadata["server"]["requests"] == m.metadata["worker_requests"] == m.calls


def test_sse_clients_read_every_event():
    clients = [c for c in (*SSE_CLIENTS, *NO_SSE) if c in available_clients([c])]
    r = Runner(RunOptions(repeat=1, n=6, reruns=0, warmup=1, native_allocs=False, timeout=120.0))
    rs = r.run(clients, [SCENARIOS["sse-100x1k"]])
    _check(rs)
    ran = {c for (c, _, _) in rs.results}
    assert {c for c in SSE_CLIENTS if c in clients} == ran
    for c in NO_SSE:
        if c in clients:
            assert rs.skipped[f"{c}/sse-100x1k"].startswith("no server-sent event reader")
    for m in rs.results.values():
        assert m.metadata["events_per_call"] == 100


@pytest.mark.slow
def test_chunked_stream_download():
    clients = [c for c in ("requests", "pycurl", "native") if c in available_clients([c])]
    r = Runner(RunOptions(repeat=1, n=2, reruns=0, warmup=1, native_allocs=False, timeout=120.0))
    rs = r.run(clients, [SCENARIOS["stream-10m-chunked"]])
    _check(rs)
    assert {c for (c, _, _) in rs.results} == set(clients)


def test_event_timing_figures():
    from httpbench._workerjob import event_timing

    sc = SCENARIOS["sse-ttfe"]
    ms = 1_000_000
    reads = [[0, 2 * ms, 12 * ms, 22 * ms], [100 * ms, 101 * ms, 112 * ms, 122 * ms], [5]]
    f = event_timing(sc, reads)
    assert f["reads"] == 3 and f["events"] == 6 and f["interval_ns"] == 10 * ms
    assert (f["ttfe_p50_ns"], f["ttfe_p99_ns"]) == (1 * ms, 2 * ms)
    assert (f["gap_p50_ns"], f["gap_p99_ns"]) == (10 * ms, 11 * ms)
    assert (f["added_gap_p50_ns"], f["added_gap_p99_ns"]) == (0, 1 * ms)
    assert event_timing(sc, [])["gap_p99_ns"] is None


def test_sse_ttfe_every_reader_timed():
    clients = [c for c in SSE_CLIENTS if c in available_clients([c])]
    r = Runner(RunOptions(repeat=1, n=2, reruns=0, warmup=1, native_allocs=False, timeout=120.0))
    rs = r.run(clients, [SCENARIOS["sse-ttfe"]])
    _check(rs)
    assert {c for (c, _, _) in rs.results} == set(clients)
    for (c, _, _), m in rs.results.items():
        t = m.metadata["event_timing"]
        assert (t["reads"], t["events"]) == (m.calls, 20 * m.calls), c
        if c in BUFFERS_EVENTS:  # the whole stream at once: 19 paced gaps in its first event
            assert t["ttfe_p50_ns"] >= 150_000_000 and t["gap_p50_ns"] < 9_000_000, (c, t)
        else:  # paced 10 ms apart by the server: no client sees them closer on the median
            assert t["gap_p50_ns"] >= 9_000_000 and t["ttfe_p50_ns"] > 0, (c, t)
