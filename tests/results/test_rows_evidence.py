"""DataFrame rows carry their evidence (machine noise, thin cells), and
``httpbench report`` shows the median's confidence interval as ``compare`` does."""

import math

from httpbench import _compare
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
        assert _compare.summarize(rs, "get-150b")[0]["thin"] is thin
    assert math.isnan(P.result_rows(make_bench())[0]["thin"])
    assert is_thin([]) and not is_thin([10, 10, 10])


def test_report_shows_the_ci_of_the_median_for_p50_and_cpu():
    cpu = [10, 11, 12, 13, 14, 15, 16, 17, 100]  # the outlier is outside the 9-repeat CI
    rs = _set([1000] * 9, cpu_us=cpu)
    text = P.format_resultset(rs)
    assert "96% order-statistic confidence interval of the median" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("requests "))
    assert "14.0 ±21%" in row and "±321%" not in row
    cell = _compare.summarize(rs, "get-150b")[0]
    assert _compare._fmt_cell("cpu_us_per_req", cell) == "14 ±21%"
