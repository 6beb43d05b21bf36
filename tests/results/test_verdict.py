"""The verdict: clients ranked by each scenario's primary figure, computed from the
rows the table prints, with ratios to the best and one sentence per scenario."""

import random

from httpbench import _results as R
from httpbench._rows import cell_rows
from httpbench._verdict import primary_metric, verdict, verdicts
from httpbench.report import format_tables
from test_results import hist, make_measure

# client -> CPU ns per request (one request at a time: CPU/req is the primary figure)
_CPU = {"native": 9_000, "pycurl": 16_600, "requests": 440_000, "httpx": 270_000}


def compare_set(cpu=_CPU, scenario="get-150b", defs=None, repeats=3):
    """A compare-shaped run: `repeats` rounds per client, CPU/req as given (±1%)."""
    rs = R.ResultSet(metadata={"repeat": repeats, "scenario_order": [scenario],
                               "scenarios": {scenario: defs or {"concurrency": 1}}})
    for rep in range(repeats):
        for c, ns in cpu.items():
            rng = random.Random(hash((c, rep)) & 0xFFFF)
            per = int(ns * (1 + 0.01 * (rep - 1)))
            lat = hist(int(ns * 1.2 * rng.uniform(0.9, 1.1)) for _ in range(200))
            allocs = {"obj": 2 * 1000 if c == "native" else ns // 200 * 1000}
            rs = rs.with_result(c, scenario, rep, make_measure(
                c, calls=1000, latency=lat, cpu_user_ns=per * 1000, cpu_sys_ns=0,
                wall_ns=ns * 1300, alloc_counts=allocs))
    return rs


def test_ranking_and_ratios_come_from_the_table_rows():
    rs = compare_set()
    rows = cell_rows(rs, "get-150b")
    v = verdict(rows, "get-150b", "cpu_ns_per_request")
    assert v.ranking == ["native", "pycurl", "httpx", "requests"]
    by = {r["client"]: r["cpu_ns_per_request"] for r in rows}
    for s in v.standings:
        assert s.value == by[s.client]
        assert abs(s.ratio - by[s.client] / by["native"]) < 1e-9
        if s.client != "native":
            lo, hi = s.ratio_ci
            assert lo <= s.ratio <= hi
    assert v.standings[0].ratio == 1.0 and v.standings[0].ratio_ci is None
    # one row changes: the ranking follows it
    rows[3]["cpu_ns_per_request"] = 1_000.0  # httpx's row
    assert rows[3]["client"] == "httpx"
    assert verdict(rows, "get-150b", "cpu_ns_per_request").ranking[0] == "httpx"


def test_sentence_names_figures_ratios_and_allocations():
    v = verdicts(compare_set())[0]
    assert v.sentence.startswith("get-150b: CPU per request 9.00 µs with native, "
                                 "16.6 µs with pycurl (1.8×)")
    assert "requests (49×)" in v.sentence
    assert "Python allocations per request from 2 (native) to 2,200 (requests)" in v.sentence


def test_primary_figure_follows_the_scenarios_question():
    assert primary_metric({"concurrency": 1}) == "cpu_ns_per_request"
    assert primary_metric({"concurrency": 16}) == "rps"
    assert primary_metric({"download": True}) == "p50_ns"
    # a rate ranks highest first and its ratio is best / rate (>= 1)
    rs = compare_set(defs={"concurrency": 16})
    v = verdicts(rs)[0]
    assert v.metric == "rps"
    rates = [s.value for s in v.standings]
    assert rates == sorted(rates, reverse=True)
    assert all(s.ratio >= 1.0 for s in v.standings)


def test_terminal_tables_open_with_the_verdict_and_fold_the_method_below():
    text = format_tables(compare_set())
    assert text.startswith("Verdict:\n  * get-150b: CPU per request 9.00 µs with native")
    block = text[text.index("== get-150b"):]
    ranked = block.index("ranked by CPU per request")
    table = block.index("client   |")
    method = block.index("(medians of 3 repeats")
    assert ranked < table < method
    order = [ln.split()[1] for ln in block[ranked:table].splitlines()[2:] if ln.strip()]
    assert order == ["native", "pycurl", "httpx", "requests"]


def test_a_tie_is_said_when_the_ratio_interval_reaches_one():
    v = verdicts(compare_set(cpu={"native": 10_000, "pycurl": 10_050}))[0]
    assert v.standings[1].tied
    assert "pycurl not told apart from native" in v.sentence


def test_markdown_report_of_a_compare_run_opens_with_the_verdict():
    from httpbench.report import format_result

    md = format_result(compare_set(), "md")
    assert md.startswith("**Verdict**\n\n- get-150b: CPU per request 9.00 µs with native")


def test_a_replaced_package_is_named_under_the_tables():
    rs = compare_set()
    rs = R.ResultSet(results=rs.results, metadata={**rs.metadata, "client_stacks": {
        "requests": {"packages": {"requests": "2.34.2", "urllib3": "2.8.0"},
                     "replaced": {"urllib3": ["urllib3 2.8.0", "urllib3-future 2.12.9"]}},
        "httpx": {"packages": {"httpx": "0.29.0"}, "replaced": {}}}})
    assert ("Warning: urllib3/ is installed by urllib3 2.8.0 and urllib3-future 2.12.9: "
            "requests run whichever was installed last") in format_tables(rs)
