"""Anomaly rules of the compare runner, on synthetic rounds (exact inputs, exact notes)."""

from __future__ import annotations

import httpbench
from httpbench._results import MeasureResult
from httpbench._roundnotes import nagle_fraction, round_notes, spread_notes
from httpbench._scenarios import SCENARIOS, Scenario
from httpbench._stats import median_spread


def mr(latencies_ns, wall_ns=1_000_000_000, errors=0):
    h = httpbench.Histogram()
    for v in latencies_ns:
        h.record(int(v))
    return MeasureResult(label="t", calls=len(latencies_ns), wall_ns=wall_ns, latency=h,
                         errors=errors)


def kinds(notes):
    return sorted(n.kind for n in notes)


def srv(requests, connections=0, cpu_ns=1000, early=0):
    return {"requests": requests, "connections": connections, "cpu_ns": cpu_ns,
            "early_answers": early}


OK = {"ok": True, "detail": ""}
GET = SCENARIOS["get-150b"]


def test_clean_round_has_no_notes():
    r = mr([200_000] * 50)
    assert round_notes("c", GET, 0, "sync", r, srv(50), 50, OK, [], 1) == []


def test_nagle_peak_detected():
    r = mr([41_000_000] * 30 + [300_000] * 20)
    assert 0.55 < nagle_fraction(r.latency) < 0.65
    notes = round_notes("c", GET, 0, "sync", r, srv(50), 50, OK, [], 1)
    assert kinds(notes) == ["nagle-40ms"]
    assert notes[0].client == "c" and notes[0].scenario == "get-150b" and notes[0].repeat == 0


def test_slow_but_broad_latency_is_not_nagle():
    # queueing spreads over the neighbouring ranges: no peak, no note
    r = mr([20_000_000 + i * 1_000_000 for i in range(50)])
    assert nagle_fraction(r.latency) == 0.0
    assert round_notes("c", GET, 0, "sync", r, srv(50), 50, OK, [], 1) == []


def test_nagle_rule_skips_process_clients_big_bodies_and_few_samples():
    r = mr([41_000_000] * 30)
    assert round_notes("c", GET, 0, "process", r, srv(30, 30), 30, OK, [], 1) == []
    dl = SCENARIOS["download-7m"]
    assert round_notes("c", dl, 0, "sync", r, srv(30), 30, OK, [], 1) == []
    few = mr([41_000_000] * 5)
    assert round_notes("c", GET, 0, "sync", few, srv(5), 5, OK, [], 1) == []


def test_server_saturated():
    r = mr([200_000] * 50, wall_ns=10_000_000)
    notes = round_notes("c", GET, 0, "sync", r, srv(50, cpu_ns=9_500_000), 50, OK, [], 1)
    assert kinds(notes) == ["server-saturated"]
    # two server threads have twice the capacity
    assert round_notes("c", GET, 0, "sync", r, srv(50, cpu_ns=9_500_000), 50, OK, [], 2) == []


def test_new_connections_where_keep_alive_expected():
    r = mr([200_000] * 50)
    notes = round_notes("c", GET, 0, "sync", r, srv(50, connections=50), 50, OK, [], 1)
    assert kinds(notes) == ["new-connections"]
    assert "a new connection per request" in notes[0].message
    # one re-opened connection is tolerated, and keep-alive off expects one per request
    assert round_notes("c", GET, 0, "sync", r, srv(50, connections=1), 50, OK, [], 1) == []
    off = SCENARIOS["get-150b-new-conn"]
    assert round_notes("c", off, 0, "sync", r, srv(50, connections=50), 50, OK, [], 1) == []
    notes = round_notes("c", off, 0, "sync", r, srv(50, connections=1), 50, OK, [], 1)
    assert kinds(notes) == ["keep-alive-used"]


def test_errors_mismatch_and_bad_response():
    r = mr([200_000] * 50, errors=3)
    notes = round_notes("c", GET, 0, "sync", r, srv(49), 50, {"ok": False, "detail": "status 500"},
                        ["ConnectionError: boom"], 1)
    assert kinds(notes) == ["bad-response", "count-mismatch", "errors"]
    err = next(n for n in notes if n.kind == "errors")
    assert "3 of 50" in err.message and "boom" in err.message and err.severity == "error"


def test_early_answer_post():
    post = SCENARIOS["post-300k-mem"]
    r = mr([2_000_000] * 10)
    notes = round_notes("c", post, 0, "sync", r, srv(10, connections=10, early=10), 10, OK, [], 1)
    assert kinds(notes) == ["early-answer"]
    assert "10 of 10 POSTs" in notes[0].message
    # errors on a kept-alive POST connection are reported as a broken next request
    r = mr([2_000_000] * 10, errors=4)
    notes = round_notes("c", post, 0, "sync", r, srv(10, connections=5), 10, OK, [], 1)
    assert "early-answer" in kinds(notes) and "errors" in kinds(notes)


def test_spread():
    sc = Scenario("x")
    fast, slow = mr([1000] * 10, wall_ns=10_000), mr([1000] * 10, wall_ns=20_000)
    notes = spread_notes("c", sc, [fast, slow, fast])
    assert kinds(notes) == ["spread"] and notes[0].repeat is None
    assert spread_notes("c", sc, [fast, fast, fast]) == []
    assert spread_notes("c", sc, [fast]) == []
    assert median_spread([1.0, 2.0, 3.0]) == (2.0, 1.0)
