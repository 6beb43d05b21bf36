"""DataFrame rows carry their evidence (machine noise, thin cells), and
``httpbench report`` shows the median's confidence interval as ``compare`` does."""

import math

from httpbench import _results as R
from httpbench import report as P
from httpbench._rows import is_thin
from test_results import make_bench, make_measure


def _set(calls, min_requests=None, cpu_us=None):
    md = {} if min_requests is None else {"min_requests": min_requests}
    rs = R.ResultSet(metadata=md)
    for rep, n in enumerate(calls):
        kw = {"calls": n}
        if cpu_us is not None:
            kw.update(cpu_user_ns=int(cpu_us[rep] * 1000 * n), cpu_sys_ns=0)
        rs = rs.with_result("requests", "get-150b", rep, make_measure(seed=rep, **kw))
    return rs


def test_noise_columns_in_percent():
    noisy = make_measure(metadata={"noise": {"other": 0.125, "steal": 0.01, "ticks": 40}})
    unmeasured = make_measure(metadata={"noise": {"other": None, "steal": None}})
    rows = P.result_rows([noisy, unmeasured, make_measure(), make_bench()])
    assert rows[0]["noise_other_pct"] == 12.5 and rows[0]["noise_steal_pct"] == 1.0
    for r in rows[1:]:
        assert math.isnan(r["noise_other_pct"]) and math.isnan(r["noise_steal_pct"])
    assert "noise_other_pct" in P.DATAFRAME_COLUMNS and "thin" in P.DATAFRAME_COLUMNS


def test_thin_per_row_matches_the_compare_cell():
    cases = [([1000, 1000, 1000], None, False), ([1000, 1000], None, True),
             ([1000, 5, 1000], None, True), ([1000, 1000, 1000], 2000, True),
             ([1000, 1000, 1000], 1000, False)]
    for calls, least, thin in cases:
        rs = _set(calls, least)
        rows = P.result_rows(rs)
        assert {r["thin"] for r in rows} == {thin}, (calls, least)
        assert P.cell_rows(rs, "get-150b")[0]["thin"] is thin
    assert math.isnan(P.result_rows(make_bench())[0]["thin"])
    assert is_thin([]) and not is_thin([10, 10, 10])


def test_report_shows_the_ci_of_the_median_for_p50_and_cpu():
    cpu = [10, 11, 12, 13, 14, 15, 16, 17, 100]  # the outlier is outside the 9-repeat CI
    rs = _set([1000] * 9, cpu_us=cpu)
    text = P.format_resultset(rs)
    assert "96% order-statistic confidence interval of the median" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("requests "))
    assert "14 ±21%" in row and "±321%" not in row
    cell = P.cell_rows(rs, "get-150b")[0]
    assert cell["cpu_ns_per_request"] == 14_000
    assert cell["cpu_ns_per_request_ci"] == (11_000, 17_000)
    assert "14 ±21%" in P.format_tables(rs)  # compare's table, the same interval


def test_cell_rows_are_the_medians_under_the_dataframe_names():
    rs = R.ResultSet()
    for rep, (calls, cpu_us, rss, errs) in enumerate([(100, 30, 50, 0), (200, 10, 70, 1),
                                                      (400, 20, 60, 2)]):
        rs = rs.with_result("c", "get-150b", rep, make_measure(
            seed=rep, calls=calls, cpu_user_ns=cpu_us * 1000 * calls, cpu_sys_ns=0,
            alloc_counts={"raw": 0, "mem": 0, "obj": 3 * calls},
            alloc_bytes={"raw": 0, "mem": 0, "obj": 512 * calls},
            peak_rss_bytes=rss * 1024**2, errors=errs))
    rs = R.ResultSet(results=rs.results, notes=(
        R.Note("spread", "x", client="c", scenario="get-150b"),
        R.Note("noisy", "y", client="c", scenario="get-150b", repeat=0),
        R.Note("noisy", "y", client="c", scenario="get-150b", repeat=2),
        R.Note("noisy", "elsewhere", client="c", scenario="download-30m")))
    (row,) = P.cell_rows(rs, "get-150b")
    assert set(row) == set(P.CELL_COLUMNS)
    assert (row["client"], row["repeats"], row["requests"], row["min_round_requests"]) == (
        "c", 3, 700, 100)
    assert row["cpu_ns_per_request"] == 20_000 and row["cpu_ns_per_request_ci"] == (10_000, 30_000)
    assert row["allocs_per_request"] == 3 and row["alloc_bytes_per_request"] == 512
    assert row["peak_rss_bytes"] == 70 * 1024**2 and row["errors"] == 3
    assert row["notes"] == {"spread": 1, "noisy": 2} and row["thin"] is False
    assert row["instructions_per_request"] is None and row["syscalls_per_request"] is None
    # the per-round DataFrame rows carry the same quantity under the same name
    per_round = sorted(r["cpu_ns_per_request"] for r in P.result_rows(rs))
    assert per_round[1] == row["cpu_ns_per_request"]
    assert P.cell_rows(rs, "no-such-scenario") == []
