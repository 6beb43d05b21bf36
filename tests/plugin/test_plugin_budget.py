"""Budget parsing and evaluation (httpbench._budget), on real result records."""

import math

import httpbench
import pytest
from httpbench import _baseline as BL
from httpbench import _budget as B


def _measure_record(**kw):
    # A MeasureResult with a known latency spread: 1.000 ms .. 2.000 ms, one call each.
    h = httpbench.Histogram()
    for us in range(1000, 2001):
        h.record(us * 1000)
    fields = dict(label="known", calls=1001, wall_ns=2_000_000_000, latency=h,
                  cpu_user_ns=80_000 * 1001, alloc_counts={"obj": 5005},
                  alloc_bytes={"obj": 100_100}, gc_collections=(3, 1, 0))
    fields.update(kw)
    return httpbench.MeasureResult(**fields)


@pytest.mark.parametrize(
    "name,spec,op,value",
    [
        ("p99", "2ms", "<=", 2e6),
        ("p99", "2 ms", "<=", 2e6),
        ("p50", "150us", "<=", 150e3),
        ("p50", "150µs", "<=", 150e3),
        ("p50", "<150μs", "<", 150e3),
        ("max", "1.5s", "<=", 1.5e9),
        ("mean", 0, "<=", 0.0),
        ("cpu_per_request", "80us", "<=", 80e3),
        ("cpu_per_call", "80us", "<=", 80e3),
        ("allocs_per_request", 500, "<=", 500.0),
        ("allocs_per_request", "1.5k", "<=", 1500.0),
        ("alloc_bytes_per_request", "2KiB", "<=", 2048.0),
        ("peak_rss", "100MiB", "<=", 100 * 1024**2),
        ("rps", ">=5000", ">=", 5000.0),
        ("rps", "5000", ">=", 5000.0),  # rps is a lower bound by default
        ("rps", "12k/s", ">=", 12000.0),
        ("rps", "<= 100", "<=", 100.0),  # an explicit comparison wins
        ("transfer_rate", "10MiB/s", ">=", 10 * 1024**2),
        ("errors", 0, "<=", 0.0),
        ("error_rate", "1%", "<=", 0.01),
        ("requests", ">1000", ">", 1000.0),
        ("median", "1ms", "<=", 1e6),
    ],
)
def test_parse_limit(name, spec, op, value):
    lim = B.parse_limit(name, spec)
    assert lim.op == op
    assert math.isclose(lim.value, value)
    assert lim.metric.name == B.ALIASES.get(name, name)


@pytest.mark.parametrize(
    "budget,needle",
    [
        ({"p98": "1ms"}, "unknown budget metric 'p98'"),
        ({"latency": "1ms"}, "accepted: min, mean, p50"),
        ({"p99": 2}, "needs a unit"),
        ({"p99": "2"}, "missing unit"),
        ({"p99": "2 parsecs"}, "unknown unit 'parsecs'"),
        ({"allocs_per_request": "2ms"}, "allocs_per_request"),
        ({"rps": ">=fast"}, "rps='>=fast'"),
        ({"errors": None}, "errors=None"),
        ({"errors": True}, "errors=True"),
        ({"errors": [0]}, "not list"),
        ({"p99": "-1ms"}, "negative"),
        ({"p99": float("nan")}, "finite"),
        ({}, "empty budget"),
        ({"median": "1ms", "p50": "2ms"}, "twice"),
    ],
)
def test_malformed_budgets_are_value_errors(budget, needle):
    with pytest.raises(B.BudgetError) as ei:
        B.assert_budget(_measure_record(), **budget)
    assert isinstance(ei.value, ValueError)
    assert needle in str(ei.value)


def test_metrics_of_a_measure_record_in_base_units():
    m = B.result_metrics(_measure_record())
    assert m["requests"] == 1001
    assert m["min"] == 1e6 and m["max"] == 2e6
    assert 1.49e6 < m["p50"] < 1.51e6
    assert m["cpu_per_request"] == pytest.approx(80e3)
    assert m["allocs_per_request"] == 5
    assert m["alloc_bytes_per_request"] == 100
    assert m["gc_collections"] == 4
    assert m["rps"] == pytest.approx(500.5)
    assert m["errors"] == 0 and m["error_rate"] == 0


def test_untracked_metric_is_not_measured_never_a_pass():
    r = _measure_record(alloc_counts=None, alloc_bytes=None)
    assert "allocs_per_request" not in B.result_metrics(r)
    with pytest.raises(B.BudgetExceeded) as ei:
        B.assert_budget(r, allocs_per_request=10**9)
    assert "not measured" in str(ei.value)


def test_budget_that_holds_returns_rows():
    rows = httpbench.MeasureResult.assert_budget(
        _measure_record(), p50="2ms", cpu_per_request="80us", allocs_per_request=5,
        rps=">=500", errors=0)
    assert [r.limit.metric.name for r in rows] == [
        "p50", "cpu_per_request", "allocs_per_request", "rps", "errors"]
    assert all(r.ok for r in rows)


def test_budget_exceeded_is_an_assertion_with_a_table():
    with pytest.raises(httpbench.BudgetExceeded) as ei:
        _measure_record().assert_budget(p99="1.5ms", allocs_per_request=4, rps=">=5000",
                                        errors=0)
    exc = ei.value
    assert isinstance(exc, AssertionError)
    assert [r.limit.metric.name for r in exc.failed] == ["p99", "allocs_per_request", "rps"]
    lines = str(exc).splitlines()
    assert "3 of 4 limits failed" in lines[0]
    assert lines[1].split() == ["metric", "budget", "measured", "margin"]
    p99 = next(ln for ln in lines if ln.startswith("p99"))
    assert p99.split()[1:4] == ["<=", "1.50", "ms"] and p99.endswith("FAIL")
    allocs = next(ln for ln in lines if ln.startswith("allocs_per_request"))
    assert allocs.split() == ["allocs_per_request", "<=", "4", "5", "+25.0%", "FAIL"]
    rps = next(ln for ln in lines if ln.startswith("rps"))
    assert rps.split() == ["rps", ">=", "5000/s", "500/s", "-90.0%", "FAIL"]
    errors = next(ln for ln in lines if ln.startswith("errors"))
    assert errors.split() == ["errors", "<=", "0", "0", "+0", "ok"]


def test_exact_boundary_holds_despite_float_noise():
    # 80 µs * calls / calls in float is not exactly 80000.0; the limit must still hold.
    r = _measure_record(calls=3, cpu_user_ns=240_001)
    B.assert_budget(r, cpu_per_request="80.00033333us")
    with pytest.raises(B.BudgetExceeded):
        B.assert_budget(r, cpu_per_request="<80.00033333us")


def test_compare_metrics_scales_timing_and_is_tight_on_counts():
    base = {"p50": 1000.0, "cpu_per_request": 800.0, "allocs_per_request": 100.0,
            "errors": 0.0, "requests": 50.0}
    # This machine is twice as slow: doubled timings are "ok", allocations must match.
    cur = {"p50": 2100.0, "cpu_per_request": 1500.0, "allocs_per_request": 100.4,
           "errors": 0.0, "requests": 50.0}
    rows = BL.compare_metrics(base, cur, kind="measure", scale=2.0, tolerance=0.10, bounded=True)
    assert {r.metric.name: r.verdict for r in rows} == {
        "p50": "ok", "cpu_per_request": "ok", "allocs_per_request": "ok", "errors": "ok",
        "requests": "ok"}
    cur2 = dict(cur, p50=2300.0, allocs_per_request=103.0, errors=1.0)
    rows = BL.compare_metrics(base, cur2, kind="measure", scale=2.0, tolerance=0.10)
    verdicts = {r.metric.name: r.verdict for r in rows}
    assert verdicts == {"p50": "slower", "cpu_per_request": "ok",
                        "allocs_per_request": "slower", "errors": "slower"}
    cur3 = dict(cur, p50=1000.0, allocs_per_request=90.0)
    verdicts = {r.metric.name: r.verdict for r in BL.compare_metrics(
        base, cur3, kind="measure", scale=2.0, tolerance=0.10)}
    assert verdicts["p50"] == "faster" and verdicts["allocs_per_request"] == "faster"
    # rps is a lower bound: fewer requests per second is the regression.
    rows = BL.compare_metrics({"rps": 1000.0}, {"rps": 400.0}, kind="bench", scale=2.0,
                             tolerance=0.1)
    assert [(r.metric.name, r.verdict, r.expected) for r in rows] == [("rps", "slower", 500.0)]


def test_cpu_per_request_is_the_client_cpu_everywhere():
    # The budget name means what the DataFrame's cpu_ns_per_request and MeasureResult's
    # cpu_ns_per_call mean; the calling thread's CPU has its own name.
    r = _measure_record(cpu_user_ns=70_000 * 1001, cpu_sys_ns=10_000 * 1001,
                        cpu_thread_ns=50_000 * 1001)
    m = B.result_metrics(r)
    assert m["cpu_per_request"] == pytest.approx(r.cpu_ns_per_call) == pytest.approx(80_000)
    assert m["thread_cpu_per_request"] == pytest.approx(50_000)
    B.assert_budget(r, cpu_per_request="<=80us", thread_cpu_per_request="<=50us")
    with pytest.raises(B.BudgetExceeded):
        B.assert_budget(r, cpu_per_request="<60us")
