"""Rounds taken in slices: each round of a cell is assembled from short slices taken
in turn with every other round and client, so it samples the whole scenario's time."""

from __future__ import annotations

import os

import httpbench
import pytest
from httpbench import _noise
from httpbench._core import Histogram
from httpbench._runner import Runner, RunOptions, merge_slices
from httpbench._scenarios import SCENARIOS, Scenario
from httpbench.report import format_tables


def _mr(calls: int, lat_ns: int, cpu: int, *, gc=(1, 0, 0), allocs=5, rss=100,
        thread=None) -> httpbench.MeasureResult:
    h = Histogram()
    h.record(lat_ns, calls)
    return httpbench.MeasureResult(
        label="x", calls=calls, wall_ns=calls * lat_ns, latency=h, cpu_user_ns=cpu,
        cpu_sys_ns=cpu // 2, cpu_thread_ns=thread, alloc_counts={"obj": allocs, "raw": 1},
        alloc_bytes={"obj": 10 * allocs, "raw": 8}, gc_collections=gc, gc_pause_ns=7,
        peak_rss_bytes=rss, overhead_ns_per_call=float(lat_ns) / 100, errors=1,
        start_unix_ns=lat_ns, end_unix_ns=lat_ns + 1, metadata={"m": 1})


def test_merge_slices_sums_counts_and_merges_latencies():
    a, b = _mr(10, 1000, 500, rss=100, thread=40), _mr(30, 3000, 900, gc=(2, 1, 0), rss=300,
                                                      thread=60)
    m = merge_slices([a, b])
    assert (m.calls, m.wall_ns) == (40, 10 * 1000 + 30 * 3000)
    assert (m.cpu_user_ns, m.cpu_sys_ns, m.cpu_thread_ns) == (1400, 250 + 450, 100)
    assert m.latency.count == 40 and m.latency.min == a.latency.min and m.p50 == b.p50
    assert a.latency.count == 10  # the slices' histograms are left alone
    assert (m.alloc_counts["obj"], m.alloc_counts["raw"]) == (10, 2)
    assert (m.alloc_bytes["obj"], m.alloc_bytes["raw"]) == (100, 16)
    assert m.gc_collections == (3, 1, 0) and m.gc_pause_ns == 14
    assert m.peak_rss_bytes == 300 and m.errors == 2
    assert m.overhead_ns_per_call == pytest.approx((10 * 10 + 30 * 30) / 40)
    assert (m.start_unix_ns, m.end_unix_ns) == (a.start_unix_ns, b.end_unix_ns)
    assert m.metadata["slice_calls"] == [10, 30] and m.metadata["m"] == 1
    # a figure one slice lacks is not made up from the others
    assert merge_slices([a, _mr(5, 1000, 1)]).cpu_thread_ns is None
    assert merge_slices([a]) is a


def _snap(ticks: list[int], own_ns: int) -> dict:
    return {"cpu": 1, "ticks": ticks, "own_cpu_ns": own_ns, "wall_ns": own_ns}


def test_noise_over_slices_leaves_out_the_time_between_them():
    tick = _noise._TICK_NS
    z = [0] * 10
    # two windows, 10 ticks each, the client busy throughout; between them another
    # process ran for 50 ticks: that is other clients' time, not this round's
    w1 = (_snap(z, 0), _snap([10, 0, 0, 0, 0, 0, 0, 0, 0, 0], int(10 * tick)))
    w2 = (_snap([60, 0, 0, 0, 0, 0, 0, 0, 0, 0], int(10 * tick)),
          _snap([70, 0, 0, 0, 0, 0, 0, 0, 0, 0], int(20 * tick)))
    quiet = _noise.windows_noise([w1, w2])
    assert quiet["ticks"] == 20 and quiet["other"] == 0 and quiet["windows"] == 2
    # a hog inside the second window shows
    w3 = (w2[0], _snap([75, 0, 0, 0, 0, 0, 0, 5, 0, 0], int(15 * tick)))
    busy = _noise.windows_noise([w1, w3])
    assert busy["ticks"] == 30 and busy["steal"] == pytest.approx(5 / 30, abs=1e-3)
    assert _noise.disturbed(busy)
    assert _noise.windows_noise([w1, (None, None)]) is None
    assert _noise.windows_noise([w1]) == _noise.round_noise(*w1)


def test_slices_per_scenario():
    r = Runner(RunOptions(slices=10, native_allocs=False))
    assert r._slices(SCENARIOS["get-150b"]) == 10
    assert r._slices(SCENARIOS["get-150b-new-conn"]) == 10
    assert r._slices(SCENARIOS["get-150b-concurrent"]) == 1  # threads and 16 re-warm-ups each
    assert r._slices(SCENARIOS["download-7m"]) == 1  # one request would fill a slice
    assert r._slices(Scenario("fixed", path="/bytes/10", n=50)) == 1
    short = Runner(RunOptions(slices=10, scale=0.2, native_allocs=False))
    assert short._slices(SCENARIOS["get-150b"]) == 2  # 50 ms rounds: 25 ms slices
    assert Runner(RunOptions(slices=10, n=100, native_allocs=False))._slices(
        SCENARIOS["get-150b"]) == 1
    assert Runner(RunOptions(native_allocs=False))._slices(SCENARIOS["get-150b"]) == 1


def test_compare_rejects_no_slices():
    with pytest.raises(ValueError, match="slices"):
        httpbench.compare(clients=["http.client"], scenarios=["get-150b"], slices=0, out=None)


@pytest.mark.slow
def test_sliced_rounds_match_server_stats_and_interleave():
    clients = ["native", "http.client"]
    rs = httpbench.compare(clients=clients, scenarios=["get-150b"], repeat=3, scale=0.4,
                           slices=4, warmup=1, plots=False, out=None, reruns=0)
    assert rs.metadata["slices"] == {"get-150b": 4}
    assert "(medians of 3 repeats, each taken in 4 slices;" in format_tables(rs)
    assert [k for k in rs.keys()] == [(c, "get-150b", i) for i in range(3) for c in clients]
    for c in clients:
        reps = rs.repeats(c, "get-150b")
        for r in reps:
            md = r.metadata
            assert md["slices"] == 4 and len(md["slice_calls"]) == 4
            assert sum(md["slice_calls"]) == r.calls == r.latency.count
            # the server saw exactly the requests of the round's slices (re-warm-ups apart)
            assert md["server"]["requests"] == r.calls == md["worker_requests"]
            assert md["server"]["connections"] <= 1
            assert md["noise"] is None or md["noise"].get("windows") in (4, None)
        # round 1's last slice ran after round 3's first: the rounds are interleaved
        assert reps[0].end_unix_ns > reps[2].start_unix_ns
        # every slice of a round lies between its first start and last end
        assert all(r.wall_ns < r.end_unix_ns - r.start_unix_ns for r in reps)
    if len(os.sched_getaffinity(0)) >= 2:
        pl = rs.metadata["placement"]["get-150b"]
        assert pl["client_cpus"] == [sorted(os.sched_getaffinity(0))[-1]]


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a CPU of its own")
def test_disturbed_sliced_rounds_are_taken_again_in_slices():
    import subprocess
    import sys
    import time

    worker_cpu = sorted(os.sched_getaffinity(0))[-1]  # where the runner pins its workers
    hog = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()+60\n"
                            "while time.time()<t: pass"])
    try:
        os.sched_setaffinity(hog.pid, {worker_cpu})
        time.sleep(0.2)
        opts = RunOptions(repeat=3, scale=0.4, warmup=1, native_allocs=False, timeout=60,
                          reruns=1, slices=4)
        rs = Runner(opts).run(["http.client"], [SCENARIOS["get-150b"]])
    finally:
        hog.kill()
        hog.wait(timeout=10)
    noise = rs.metadata["noise"]["get-150b"]
    assert noise["reruns"] >= 1 and noise["disturbed"] >= 1, noise
    reps = rs.repeats("http.client", "get-150b")
    assert len(reps) == 3
    for r in reps:
        # the re-run is in slices too, and counted once per round at most
        assert r.metadata["slices"] == 4 and r.metadata["reruns"] in (0, 1)
        assert r.metadata["server"]["requests"] == r.calls
    assert sum(r.metadata["reruns"] for r in reps) == noise["reruns"]
    noisy = [n for n in rs.notes if n.kind == "noisy"]
    assert noisy and all("after 1 re-run(s)" in n.message for n in noisy)
    # one note per kept round at most: the replaced rounds' notes are gone
    assert len({n.repeat for n in noisy}) == len(noisy)
    assert "still disturbed" in format_tables(rs)


CRASHER = '''
import os, sys, time
from httpbench._adapters.http_client import HttpClientAdapter

class LateCrash(HttpClientAdapter):
    name = "late-crash"
    calls = 0
    def request(self):
        # ~5 ms a request: a 25 ms slice holds 4-7 with its re-warm-up, so the
        # 25th request falls after the first pass of slices and before the last
        LateCrash.calls += 1
        if LateCrash.calls > 24:
            sys.stderr.write("late-crash-marker\\n")
            sys.stderr.flush()
            os._exit(3)
        time.sleep(0.005)
        super().request()
'''


@pytest.mark.slow
def test_a_worker_dying_between_slices_leaves_no_partial_round(tmp_path, monkeypatch):
    (tmp_path / "hb_slice_crash.py").write_text(CRASHER)
    monkeypatch.syspath_prepend(str(tmp_path))
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + (":" + old if old else ""))
    bad = "hb_slice_crash:LateCrash"
    rs = httpbench.compare(clients=["http.client", bad], scenarios=["get-150b"], repeat=3,
                           scale=0.4, slices=4, warmup=1, plots=False, out=None, reruns=0)
    crashed = [n for n in rs.notes if n.client == bad and n.kind == "worker-crashed"]
    assert len(crashed) == 1 and "late-crash-marker" in crashed[0].message
    for r in rs.repeats(bad, "get-150b"):  # only rounds that got all their slices
        assert len(r.metadata["slice_calls"]) == 4
    assert len(rs.repeats(bad, "get-150b")) < 3
    good = rs.repeats("http.client", "get-150b")
    assert len(good) == 3 and all(len(r.metadata["slice_calls"]) == 4 for r in good)
