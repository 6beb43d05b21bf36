"""Plots that never mislead: rates over each bucket's real length, one labelled rate
for a run too short for a series, n/a where a value is missing, no empty slots for a
client that did not run, and the run's date and host on every figure."""

import math

import httpbench
import pytest
from httpbench import _results as R
from httpbench import plot as PL
from test_results import make_bench, make_measure

pytest.importorskip("matplotlib")

S = 1_000_000_000


def _steady(duration_ns, per_s=65_000):
    """A steady run of duration_ns: full seconds, then the last part of a second."""
    full, rest = divmod(duration_ns, S)
    series = [per_s] * full + ([round(per_s * rest / S)] if rest else [])
    return make_bench(duration_ns=duration_ns, config=R.BenchConfig(duration_ns=duration_ns),
                      series_responses=tuple(series), series_errors=(0,) * len(series),
                      responses=sum(series), successes=sum(series), status_counts={200: sum(series)},
                      error_counts={}, latency_uncorrected=None)


def test_last_partial_second_is_a_rate_over_its_own_length():
    r = _steady(int(2.5 * S))  # 65k, 65k, then 32.5k requests in the last half second
    xs, ok, bad, note = PL.throughput_points(r)
    assert xs == [1.0, 2.0, 2.5]
    assert ok == [65_000.0, 65_000.0, 65_000.0]  # steady, not "collapsed to 32.5k"
    assert bad == [0.0, 0.0, 0.0] and note == ""
    fig = PL.plot_throughput(r)
    (line,) = fig.axes[0].get_lines()
    assert list(line.get_ydata()) == ok
    assert fig.axes[0].get_xlim()[1] == pytest.approx(2.5)  # the axis ends with the run


def test_a_sliver_of_a_last_bucket_is_dropped_and_said_so():
    r = _steady(int(3.05 * S))
    xs, ok, _bad, note = PL.throughput_points(r)
    assert xs == [1.0, 2.0, 3.0] and ok == [65_000.0] * 3
    assert note == "last 0.05 s dropped: too short for a rate"
    assert note in PL.plot_throughput(r).axes[0].get_xlabel()


def test_a_run_shorter_than_two_buckets_is_one_labelled_rate():
    r = _steady(75_000_000, per_s=20_000 * 1_000 // 75)  # n=20000 in 75 ms
    fig = PL.plot_throughput(r)
    ax = fig.axes[0]
    assert not ax.get_lines()  # no time series
    (bar,) = ax.patches
    assert bar.get_height() == pytest.approx(r.rps)
    texts = [t.get_text() for t in ax.texts]
    assert any("req/s" in t and "in 75.0 ms" in t for t in texts), texts
    assert "one rate, not a time series" in ax.get_xlabel()


def _with_missing():
    rs = R.ResultSet(metadata={"hostname": "hostA", "started_unix_ns": 1_700_000_000 * S})
    for rep in range(3):
        rs = rs.with_result("requests", "get", rep, make_measure("requests", seed=rep))
        rs = rs.with_result("curl", "get", rep, make_measure(
            "curl", seed=rep, alloc_counts=None, alloc_bytes=None))
        rs = rs.with_result("requests", "h2", rep, make_measure("requests", seed=rep))
    return rs  # curl never ran h2; curl has no Python allocations


def test_bars_say_n_a_and_leave_no_slot_for_a_client_that_did_not_run():
    fig = PL.plot_bars(_with_missing(), metrics=("cpu_ns_per_request", "allocs_per_request"))
    cpu_ax, alloc_ax = fig.axes[:2]
    # CPU: requests and curl side by side in "get", requests alone and centred in "h2"
    xs = sorted(round(p.get_x() + p.get_width() / 2, 3) for p in cpu_ax.patches)
    assert xs == [-0.2, 0.2, 1.0]
    # allocations: curl's slot in "get" holds "n/a", not a silent gap
    na = [t for t in alloc_ax.texts if t.get_text() == "n/a"]
    assert len(na) == 1 and na[0].xy[0] == pytest.approx(0.2)
    assert all(not math.isnan(p.get_height()) for p in alloc_ax.patches)


@pytest.mark.parametrize("kind", ["percentiles", "cdf", "bars"])
def test_every_figure_carries_the_runs_date_and_host(kind):
    fig = PL.plot(_with_missing(), kind)
    assert fig.get_supxlabel() == "2023-11-14 22:13 UTC · hostA"


def test_throughput_figure_carries_date_and_host():
    r = make_bench(metadata={"hostname": "load-box"})
    assert PL.plot_throughput(r).get_supxlabel() == "2023-11-14 22:13 UTC · load-box"


def test_the_plot_module_is_the_plot_function():
    r = make_measure()
    fig = httpbench.plot(r, kind="cdf")
    assert fig.axes[0].get_xlabel().startswith("latency")
    with pytest.raises(ValueError, match="unknown plot kind"):
        httpbench.plot(r, kind="nope")
