"""Placement by measurement: the wake-up calibration, the rule that picks where server
and client run per scenario, and compare recording (and obeying) what it chose."""

from __future__ import annotations

import os

import httpbench
import pytest
from httpbench import _core, _machine, _server
from httpbench.report import cell_rows, format_tables

CPUS = sorted(os.sched_getaffinity(0))
TWO = pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs")


def test_calibration_gives_two_positive_figures():
    w = _machine.wakeup_cost(refresh=True)
    assert w["same_cpu"] > 0
    assert w["cpu_ns"]["same_cpu"] > 0
    if len(CPUS) >= 2:
        assert w["cross_cpu"] > 0 and w["cpus"] == [CPUS[0], CPUS[-1]]
    else:
        assert w["cross_cpu"] is None
    assert _machine.wakeup_cost() == w  # cached: one calibration per process


def test_pingpong_counts_and_bad_arguments():
    r = _core.calibrate_wakeup(CPUS[-1], CPUS[-1], 50)
    assert r["round_trips"] == 50
    assert 0 < r["rtt_min_ns"] <= r["rtt_median_ns"]
    with pytest.raises(ValueError, match="round_trips"):
        _core.calibrate_wakeup(0, 0, 0)
    with pytest.raises(ValueError, match="cpu_a"):
        _core.calibrate_wakeup(5000, 0)
    not_ours = max(CPUS) + 1
    if not_ours < 1024:
        with pytest.raises(ValueError, match=f"CPU {not_ours}"):
            _core.calibrate_wakeup(not_ours, CPUS[0], 10)


def test_rule_same_for_sequential_when_crossing_costs_more():
    vm = {"same_cpu": 5000, "cross_cpu": 30000}
    flat = {"same_cpu": 5000, "cross_cpu": 5500}
    cs = [0, 1]
    assert _machine.choose_placement("auto", True, vm, cs) == {
        "mode": "same", "server_cpus": [1], "client_cpus": [1]}
    # no penalty for crossing (bare metal): keep the overlap of two CPUs
    assert _machine.choose_placement("auto", True, flat, cs)["mode"] == "split"
    # concurrent work needs two CPUs whatever the wake-up costs
    assert _machine.choose_placement("auto", False, vm, cs) == {
        "mode": "split", "server_cpus": [0], "client_cpus": [1]}
    assert _machine.choose_placement("split", True, vm, cs)["mode"] == "split"
    assert _machine.choose_placement("same", False, flat, cs)["mode"] == "same"
    assert _machine.choose_placement("auto", True, vm, [3])["client_cpus"] == [3]
    assert _machine.choose_placement("unpinned", True, vm, cs)["server_cpus"] == []
    four = _machine.choose_placement("split", False, vm, [0, 1, 2, 3])
    assert four["server_cpus"] == [0, 1] and four["client_cpus"] == [3]
    with pytest.raises(ValueError, match="placement"):
        _machine.choose_placement("both", True, vm, cs)


def test_wakeup_limit_follows_the_placement():
    w = {"same_cpu": 5000, "cross_cpu": 30000}
    assert _machine.wakeup_limit_ns(w, {"mode": "same"}) == 10000
    assert _machine.wakeup_limit_ns(w, {"mode": "split"}) == 60000
    assert _machine.wakeup_limit_ns(w, {"mode": "unpinned"}) == 60000
    assert _machine.wakeup_limit_ns(None, {"mode": "same"}) is None


def _affinity(pid: int) -> set[tuple[int, ...]]:
    """The CPU sets of every thread of ``pid``."""
    out = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        out.add(tuple(sorted(os.sched_getaffinity(int(tid)))))
    return out


def _run(placement: str, scenarios=("get-150b",)):
    seen: dict[str, set[tuple[int, ...]]] = {}
    servers: list = []

    def factory(tls: bool, threads: int):
        s = _server.start_process(tls=tls, threads=threads)
        servers.append(s)
        return s

    def progress(msg: str) -> None:
        # a worker is ready after the scenario was placed: read the server's threads now
        if msg.startswith("ready ") and servers:
            seen[msg.split()[1]] = _affinity(servers[-1].pid)

    rs = httpbench.compare(["native"], list(scenarios), repeat=1, scale=0.1, plots=False,
                           native_allocs=False, warmup=1, placement=placement,
                           server_factory=factory, progress=progress)
    return rs, seen


@TWO
def test_sequential_scenario_runs_where_the_calibration_says():
    rs, seen = _run("auto", ("get-150b", "get-150b-concurrent", "download-7m"))
    md = rs.metadata
    assert md["wakeup_ns"]["same_cpu"] > 0 and md["wakeup_ns"]["cross_cpu"] > 0
    assert md["placement_rule"] == "auto"
    want = _machine.choose_placement("auto", True, md["wakeup_ns"], CPUS)
    assert md["placement"]["get-150b"] == want
    r = rs.get("native", "get-150b", 0)
    assert r.metadata["worker"]["affinity"] == want["client_cpus"]
    assert seen["get-150b"] == {tuple(want["server_cpus"])}
    conc = md["placement"]["get-150b-concurrent"]
    assert conc["mode"] == "split" and seen["get-150b-concurrent"] == {(CPUS[0],)}
    # a multi-megabyte transfer overlaps server and client inside its one request
    assert md["placement"]["download-7m"]["mode"] == "split"
    text = format_tables(rs)
    assert "placement: " + _machine.placement_text(want) in text
    assert "wake-up round trip" in text and "Machine speed index:" in text
    si = md["speed_index"]  # the fixed-work controls taken between slices
    assert si["rounds"] and si["min"] <= si["median"] <= si["max"]
    assert si["by_scenario"]["get-150b"] > 0


@TWO
def test_split_placement_is_the_old_behaviour():
    rs, seen = _run("split")
    pl = rs.metadata["placement"]["get-150b"]
    assert pl == {"mode": "split", "server_cpus": [CPUS[0]], "client_cpus": [CPUS[-1]]}
    assert seen["get-150b"] == {(CPUS[0],)}
    assert rs.get("native", "get-150b", 0).metadata["worker"]["affinity"] == [CPUS[-1]]
    assert rs.metadata["placement_rule"] == "split"
    # a cell within 2x of the split placement's wake-up round trip is tagged
    row = cell_rows(rs, "get-150b")[0]
    limit = 2 * rs.metadata["wakeup_ns"]["cross_cpu"]
    near = min(row["p50_ns"], row["cpu_ns_per_request"]) <= limit
    assert ("wake-up" in row["notes"]) == near


def test_unpinned_records_no_calibration_and_bad_placement_is_refused():
    rs = httpbench.compare(["native"], ["get-150b"], repeat=1, scale=0.1, plots=False,
                           native_allocs=False, warmup=1, pin=False)
    assert rs.metadata["placement"]["get-150b"]["mode"] == "unpinned"
    assert rs.metadata["wakeup_ns"] is None
    with pytest.raises(ValueError, match="placement"):
        httpbench.compare(["native"], ["get-150b"], placement="both")


def test_machine_change_is_the_ratio_of_speed_indices():
    a = {"speed_index": {"median": 40000.0}}
    b = {"speed_index": {"median": 48000.0}}
    assert _machine.machine_change(a, b) == pytest.approx(0.20)
    assert _machine.machine_change(b, a) == pytest.approx(-1 / 6)
    assert _machine.machine_change(a, {}) is None
    assert _machine.machine_change(None, b) is None
    assert "20% slower" in _machine.machine_change_line(0.2)
    assert "5% faster" in _machine.machine_change_line(-0.05)
    assert _machine.machine_change_line(0.01) == ""


def test_speed_summary_and_fixed_work():
    assert _machine.speed_summary([]) is None
    s = _machine.speed_summary([3.0, 1.0, 2.0])
    assert (s["median"], s["min"], s["max"]) == (2.0, 1.0, 3.0)
    assert _machine.fixed_work_ns(3) > 0
    with pytest.raises(ValueError):
        _machine.fixed_work_ns(0)


def test_allocations_counted_apart_from_the_timed_calls():
    # the allocation hooks cost a Python client 12-13 % more instructions per call: timed
    # rounds run without them; a few calls before each slice are counted with them
    rs = httpbench.compare(["http.client"], ["get-150b"], repeat=1, scale=0.2, plots=False,
                           native_allocs=False, warmup=1)
    with httpbench.Server() as srv:
        a = httpbench._adapters.load_adapter("http.client")()
        a.setup(srv.url, path="/bytes/150")
        direct = httpbench.measure(a.request, n=300, placement="unpinned").allocs_per_call
        a.close()
    for r in rs.repeats("http.client", "get-150b"):
        md = r.metadata
        assert 3 <= md["alloc_sampled_calls"] <= 100
        assert md["server"]["requests"] == r.calls  # the counted calls are not the round's
        assert r.allocs_per_call == pytest.approx(direct, rel=0.1)


def _saved(tmp_path, name: str, index: float) -> str:
    h = _core.Histogram()
    h.record(10_000, 100)
    r = httpbench.MeasureResult(label="x", calls=100, wall_ns=1_000_000, latency=h,
                                cpu_user_ns=500_000, cpu_sys_ns=0)
    rs = httpbench.ResultSet(results={("native", "get-150b", 0): r},
                             metadata={"speed_index": {"median": index, "min": index,
                                                       "max": index, "rounds": [index]}})
    path = str(tmp_path / name)
    rs.save(path)
    return path


def test_diff_names_the_machines_change(tmp_path, capsys):
    from httpbench import report

    a, b = _saved(tmp_path, "a.json", 40_000.0), _saved(tmp_path, "b.json", 50_000.0)
    assert report.diff_main([a, b]) == 0
    assert "machine 25% slower than the baseline's" in capsys.readouterr().out
    assert report.diff_main([b, a]) == 0
    assert "machine 20% faster than the baseline's" in capsys.readouterr().out
    c = _saved(tmp_path, "c.json", 40_400.0)  # 1 %: within the limit, only the numbers
    assert report.diff_main([a, c]) == 0
    out = capsys.readouterr().out
    assert "speed index 40.0 -> 40.4 µs per unit of work (+1.0%" in out
    assert "than the baseline's" not in out
