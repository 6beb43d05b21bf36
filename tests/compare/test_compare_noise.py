"""Machine noise per round: ~0 when quiet, flagged (and re-run) under a CPU hog."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from httpbench import _noise
from httpbench._runner import Runner, RunOptions
from httpbench._scenarios import SCENARIOS
from httpbench._stats import median_ci
from httpbench.report import cell_rows, format_tables


def _snap(ticks: list[int], own_ns: int, cpu: int | None = 1) -> dict:
    return {"cpu": cpu, "ticks": ticks, "own_cpu_ns": own_ns, "wall_ns": 0}


def test_round_noise_quiet_and_busy_from_counters():
    tick = _noise._TICK_NS
    # 100 ticks: the client used 60 of them, the rest idle: no noise
    a = _snap([0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0)
    b = _snap([50, 0, 10, 40, 0, 0, 0, 0, 0, 0], int(60 * tick))
    quiet = _noise.round_noise(a, b)
    assert quiet["other"] == 0 and quiet["steal"] == 0 and not _noise.disturbed(quiet)
    # another process took 40 ticks and the hypervisor 10
    c = _snap([80, 0, 10, 0, 0, 0, 0, 10, 0, 0], int(50 * tick))
    busy = _noise.round_noise(a, c)
    assert busy["other"] == pytest.approx(0.4) and busy["steal"] == pytest.approx(0.1)
    assert _noise.disturbed(busy)
    # the harness's own server CPU on shared CPUs is not noise
    assert _noise.round_noise(a, c, exclude_ns=int(40 * tick))["other"] == 0
    # too few ticks to say anything
    d = _snap([1, 0, 0, 1, 0, 0, 0, 0, 0, 0], 0)
    assert _noise.round_noise(a, d)["other"] is None and not _noise.disturbed(
        _noise.round_noise(a, d))
    s = _noise.summary([quiet, busy, None], reruns=2)
    assert s["rounds"] == 2 and s["disturbed"] == 1 and s["reruns"] == 2
    line = _noise.summary_line(s)
    assert "machine noise" in line and "re-run" in line and "still disturbed" in line


def test_median_ci_order_statistics():
    assert median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0, 0.75)
    lo, hi, cov = median_ci([float(i) for i in range(20)])
    assert (lo, hi) == (5.0, 14.0) and cov >= 0.95


def _run(min_requests: int = 10, reruns: int = 2):
    opts = RunOptions(repeat=3, scale=0.4, warmup=1, native_allocs=False, timeout=60,
                      min_requests=min_requests, reruns=reruns)
    return Runner(opts).run(["http.client"], [SCENARIOS["get-150b"]])


@pytest.mark.slow
def test_rounds_carry_noise_and_enough_requests():
    rs = _run(min_requests=200)
    for rep in range(3):
        r = rs.get("http.client", "get-150b", rep)
        assert r.calls >= 200 or any(n.kind == "few-requests" for n in rs.notes)
        noise = r.metadata["noise"]
        assert noise is not None and 0.0 <= (noise["other"] or 0.0) <= 1.0
        assert "reruns" in r.metadata
    assert rs.metadata["noise"]["get-150b"]["rounds"] == 3
    row = cell_rows(rs, "get-150b")[0]
    assert row["repeats"] == 3 and row["min_round_requests"] >= 1
    lo, hi = row["p50_ns_ci"]
    assert lo <= row["p50_ns"] <= hi
    text = format_tables(rs)
    assert "machine noise:" in text and "order-statistic" in text


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a CPU of its own")
def test_cpu_hog_on_the_measured_core_is_flagged():
    worker_cpu = sorted(os.sched_getaffinity(0))[-1]  # where the runner pins its workers
    hog = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()+60\n"
                            "while time.time()<t: pass"])
    try:
        os.sched_setaffinity(hog.pid, {worker_cpu})
        time.sleep(0.2)
        rs = _run(reruns=1)
    finally:
        hog.kill()
        hog.wait(timeout=10)
    noise = rs.metadata["noise"]["get-150b"]
    assert noise["other_median"] > 0.2, noise
    assert noise["reruns"] >= 1 and noise["disturbed"] >= 1
    assert any(n.kind == "noisy" for n in rs.notes)
    assert "still disturbed" in format_tables(rs)


@pytest.mark.slow
def test_quiet_machine_reads_about_zero():
    # only meaningful when nothing else runs; a shared machine skips it
    if os.getloadavg()[0] > 0.3:
        pytest.skip("machine busy (load average > 0.3)")
    rs = _run(reruns=0)
    noise = rs.metadata["noise"]["get-150b"]
    assert noise["rounds"] == 3
    assert noise["other_median"] < 0.1 and noise["steal_median"] < 0.02, noise
