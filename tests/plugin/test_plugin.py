"""The pytest plugin end to end: pytester runs of small test files.

Most runs are in-process (fast; pytester isolates their config and modules);
the entry-point load in a fresh interpreter and pytest-xdist are checked with
subprocess runs. Workloads are switched with environment variables so one
test file can be saved as a baseline and re-run changed.
"""

import json
import re
from pathlib import Path

import httpbench
import pytest

pytest_plugins = ["pytester"]

# An in-process pytester run forgets the modules first imported inside it, and httpbench
# loads its public names on first use: resolve them all here, or a class loaded inside a run
# would exist twice (isinstance against httpbench.ResultSet would then fail).
for _name in httpbench.__all__:
    getattr(httpbench, _name)

WORKLOAD = '''
import os
import time

import pytest

DELAY = float(os.environ.get("HB_DELAY", "0"))
OBJECTS = int(os.environ.get("HB_OBJECTS", "20"))


def work():
    # OBJECTS allocations per call (plus the list), and optionally a sleep that costs wall
    # time but no CPU and no allocations.
    if DELAY:
        time.sleep(DELAY)
    return [object() for _ in range(OBJECTS)]


@pytest.mark.httpbench(budget={"allocs_per_request": OBJECTS + 40, "p50": "1s", "errors": 0})
def test_work(httpbench):
    r = httpbench.measure(work, n=200, warmup=20)
    assert r.calls == 200


def test_plain(httpbench):
    r = httpbench.measure(lambda: None, n=200, name="noop")
    r.assert_budget(rps=">=1", p99="5s")
'''


def run(pytester, *args):
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


def run_subprocess(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=120)


def summary_lines(result):
    """The measurement lines of the httpbench terminal-summary section."""
    out = result.stdout.lines
    start = next(i for i, ln in enumerate(out) if re.match(r"^=+ httpbench =+$", ln))
    lines = []
    for ln in out[start + 1:]:
        if ln.startswith("=="):
            break
        if not ln.startswith("httpbench: "):  # the saved/written notes after the lines
            lines.append(ln)
    return lines


@pytest.mark.slow
def test_budget_that_holds_passes_and_summary_prints(pytester):
    pytester.makepyfile(test_w=WORKLOAD)
    res = run_subprocess(pytester)  # the plugin loads through its entry point
    res.assert_outcomes(passed=2)
    lines = summary_lines(res)
    work = next(ln for ln in lines if ln.startswith("test_w.py::test_work "))
    noop = next(ln for ln in lines if ln.startswith("test_w.py::test_plain[noop] "))
    for ln in (work, noop):
        assert ln.rstrip().endswith("PASS"), ln
        assert re.search(r"p50 [\d.]+ (ns|µs|ms)", ln) and "p99 " in ln and "cpu/req " in ln
    assert re.search(r"allocs/req \d+", work)


def test_budget_that_fails_shows_the_table(pytester, tmp_path):
    pytester.makepyfile(test_w=WORKLOAD + '''

@pytest.mark.httpbench(budget={"allocs_per_request": 2, "p50": "1s"})
def test_too_many_allocs(httpbench):
    httpbench.measure(work, n=100)


def test_direct_call_fails(httpbench):
    httpbench.measure(work, n=100).assert_budget(p50="1ns", allocs_per_request="<=100k")
''')
    base = tmp_path / "base.json"
    res = run(pytester, f"--httpbench-save={base}")
    res.assert_outcomes(passed=2, failed=2)
    out = res.stdout.str()
    assert "BudgetExceeded: performance budget exceeded for test_w.py::test_too_many_allocs:" \
        " 1 of 2 limits failed" in out
    res.stdout.re_match_lines([
        r"E\s+metric\s+budget\s+measured\s+margin",
        r"E\s+allocs_per_request\s+<= 2\s+\d+\s+\+\d+\.\d%\s+FAIL",
        r"E\s+p50\s+<= 1\.00 s\s+[\d.]+ (ns|µs|ms)\s+-\d+\.\d%\s+ok",
    ])
    res.stdout.re_match_lines([r"E\s+p50\s+<= 1 ns\s+[\d.]+ (ns|µs|ms)\s+\+\d+\.\d%\s+FAIL"])
    lines = summary_lines(res)
    bad = next(ln for ln in lines if ln.startswith("test_w.py::test_too_many_allocs "))
    assert bad.rstrip().endswith("FAIL (budget exceeded: allocs_per_request)")
    direct = next(ln for ln in lines if ln.startswith("test_w.py::test_direct_call_fails "))
    assert direct.rstrip().endswith("FAIL (budget exceeded: p50)")
    # A failed test's numbers never become a baseline.
    res.stdout.fnmatch_lines([f"httpbench: saved 2 measurement(s) to {base} "
                              "(2 of failed or skipped tests not saved)"])
    assert sorted(httpbench.load(base).keys()) == [("test_w.py::test_plain", "noop", 0),
                                                   ("test_w.py::test_work", "-", 0)]


def test_malformed_budgets_are_usage_errors(pytester):
    pytester.makepyfile(test_bad='''
import pytest


@pytest.mark.httpbench(budget={"p98": "1ms"})
def test_unknown_metric(httpbench):
    httpbench.measure(lambda: None, n=10)


@pytest.mark.httpbench(budget={"p99": 2})
def test_unitless_latency(httpbench):
    httpbench.measure(lambda: None, n=10)


@pytest.mark.httpbench(budgets={"p99": "2ms"})
def test_misspelled_keyword(httpbench):
    httpbench.measure(lambda: None, n=10)


@pytest.mark.httpbench(budget={"p99": "2ms"})
def test_budget_but_nothing_measured(httpbench):
    pass


def test_duplicate_measurement_name(httpbench):
    httpbench.measure(lambda: None, n=10, name="a")
    with pytest.raises(ValueError, match="measurement name 'a' is used twice in this test"):
        httpbench.measure(lambda: None, n=10, name="a")


def test_direct_unknown_metric(httpbench):
    r = httpbench.measure(lambda: None, n=10)
    with pytest.raises(ValueError, match="unknown budget metric 'latency'; accepted: min, mean"):
        r.assert_budget(latency="1ms")
''')
    res = run(pytester)
    res.assert_outcomes(passed=2, failed=1, errors=3)
    out = res.stdout.str()
    assert "test_unknown_metric: @pytest.mark.httpbench(budget=...): unknown budget metric" \
        " 'p98'; accepted: min, mean, p50" in out
    assert "budget p99=2: a duration needs a unit" in out
    assert "unknown argument(s) budgets; accepted: budget, tolerance, repeats" in out
    assert "budget=...) is set but the test measured nothing through the httpbench fixture" in out


def test_save_then_compare_passes(pytester, tmp_path):
    pytester.makepyfile(test_w=WORKLOAD)
    base = tmp_path / "base.json"
    run(pytester, f"--httpbench-save={base}").assert_outcomes(passed=2)
    saved = httpbench.load(base)
    assert isinstance(saved, httpbench.ResultSet)
    assert set(saved.keys()) == {("test_w.py::test_work", "-", 0),
                                 ("test_w.py::test_plain", "noop", 0)}
    assert saved.get("test_w.py::test_work", "-").calls == 200
    meta = saved.metadata["pytest_baseline"]
    assert meta["calibration"] > 0
    assert set(meta["entries"]) == {"test_w.py::test_work", "test_w.py::test_plain[noop]"}
    # The same workload again: deterministic metrics match, timings within a wide tolerance
    # (this only checks the mechanism; the machine is shared and noisy).
    res = run(pytester, f"--httpbench-compare={base}", "--httpbench-tolerance=1000%")
    res.assert_outcomes(passed=2)
    res.stdout.fnmatch_lines([f"httpbench: comparing with {base} (tolerance 1000%, repeats 3)"])
    for ln in summary_lines(res):
        # the verdict with its evidence: each timing change, its band, the calibration factor
        assert re.search(r"  PASS \[p50 [+-][0-9.]+% \(band ±1,000%\).*; calibration ×[0-9.]+\]$",
                         ln.rstrip()), ln


@pytest.mark.slow
def test_compare_fails_on_slower_and_on_more_allocations(pytester, tmp_path, monkeypatch):
    pytester.makepyfile(test_w=WORKLOAD)
    base = tmp_path / "base.json"
    run(pytester, f"--httpbench-save={base}").assert_outcomes(passed=2)

    # Slower: a 2 ms sleep per call against a baseline of ~µs calls; allocations unchanged
    # within their band (the hooks count every thread's, and the 0.4 s of sleeping lets
    # another thread of the process allocate a few blocks: 27.4 per call, seen once).
    monkeypatch.setenv("HB_DELAY", "0.002")
    summary = tmp_path / "s.json"
    res = run(pytester, f"--httpbench-compare={base}", "--httpbench-tolerance=100%",
              "--httpbench-repeats=2", "-k", "test_work", f"--httpbench-json={summary}")
    res.assert_outcomes(failed=1, deselected=1)
    (row,) = json.loads(summary.read_text())["measurements"]
    assert row["runs"] == 2  # re-measured once before the regression counted
    out = res.stdout.str()
    assert "BaselineRegression: test_w.py::test_work vs baseline: regressed: p50" in out
    res.stdout.re_match_lines([r"E\s+p50\s+[\d.]+ (ns|µs)\s+[\d.]+ (ns|µs)\s+[\d.]+ ms\s+\+\d+"
                               r"\.\d%\s+±100%\s+REGRESSED",
                               r"E\s+allocs_per_request\s+\d+\s+\d+\s+[\d.]+\s+[+-]\d+\.\d%\s+±.*ok"])
    (line,) = summary_lines(res)
    assert "FAIL (regressed: p50" in line

    # More allocations, timing tolerance so wide that only the tight allocation check can fail.
    monkeypatch.setenv("HB_DELAY", "0")
    monkeypatch.setenv("HB_OBJECTS", "30")
    res = run(pytester, f"--httpbench-compare={base}", "--httpbench-tolerance=100000%",
              "-k", "test_work")
    res.assert_outcomes(failed=1, deselected=1)
    res.stdout.re_match_lines([r"E\s+allocs_per_request\s+\d+\s+\d+\s+\d+\s+\+\d+\.\d%\s+±"
                               r".*REGRESSED"])
    assert "regressed: allocs_per_request" in res.stdout.str()


@pytest.mark.slow
def test_fail_faster_flags_a_stale_baseline(pytester, tmp_path, monkeypatch):
    pytester.makepyfile(test_w=WORKLOAD)
    base = tmp_path / "base.json"
    monkeypatch.setenv("HB_DELAY", "0.002")
    run(pytester, f"--httpbench-save={base}", "-k", "test_work").assert_outcomes(
        passed=1, deselected=1)
    monkeypatch.setenv("HB_DELAY", "0")
    # Much faster than the baseline: fine by default (reported), a failure with fail-faster.
    res = run(pytester, f"--httpbench-compare={base}", "-k", "test_work")
    res.assert_outcomes(passed=1, deselected=1)
    (line,) = summary_lines(res)
    assert "PASS (improved: p50" in line
    res = run(pytester, f"--httpbench-compare={base}", "--httpbench-fail-faster",
              "-k", "test_work")
    res.assert_outcomes(failed=1, deselected=1)
    assert "improved beyond tolerance (stale baseline? re-save it): p50" in res.stdout.str()
    (line,) = summary_lines(res)
    assert "FAIL (improved (stale baseline): p50" in line


def test_json_summary_and_option_errors(pytester, tmp_path):
    pytester.makepyfile(test_w=WORKLOAD)
    out = tmp_path / "summary.json"
    res = run(pytester, f"--httpbench-json={out}")
    res.assert_outcomes(passed=2)
    doc = json.loads(out.read_text())
    assert doc["format"] == "httpbench-pytest-summary"
    rows = {m["key"]: m for m in doc["measurements"]}
    assert set(rows) == {"test_w.py::test_work", "test_w.py::test_plain[noop]"}
    work = rows["test_w.py::test_work"]
    assert work["kind"] == "measure" and work["verdict"] == "PASS" and work["outcome"] == "passed"
    assert work["metrics"]["requests"] == 200 and work["metrics"]["allocs_per_request"] >= 20

    res = run(pytester, "--httpbench-tolerance=lots")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--httpbench-tolerance='lots': expected a percentage" in res.stderr.str()
    res = run(pytester, f"--httpbench-compare={tmp_path / 'missing.json'}")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "no such file" in res.stderr.str()
    res = run(pytester, "--httpbench-fail-faster")
    assert res.ret == pytest.ExitCode.USAGE_ERROR


@pytest.mark.slow
def test_xdist_one_session_per_worker_results_merged(pytester, tmp_path):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_w=WORKLOAD)
    base, summary = tmp_path / "base.json", tmp_path / "summary.json"
    res = run_subprocess(pytester, "-p", "xdist", "-n", "2", f"--httpbench-save={base}",
                         f"--httpbench-json={summary}")
    res.assert_outcomes(passed=2)
    res.stdout.fnmatch_lines(["*2 workers*"])
    lines = summary_lines(res)
    assert sorted(ln.split()[0] for ln in lines[:2]) == [
        "test_w.py::test_plain[noop]", "test_w.py::test_work"]
    # The controller merged both workers' records into one baseline and one summary.
    saved = httpbench.load(base)
    assert sorted(saved.keys()) == [("test_w.py::test_plain", "noop", 0),
                                    ("test_w.py::test_work", "-", 0)]
    assert len(json.loads(summary.read_text())["measurements"]) == 2


@pytest.mark.slow
def test_bench_and_clients_against_the_session_server(pytester, tmp_path):
    pytester.makepyfile(test_srv='''
import pytest


@pytest.mark.httpbench(budget={"errors": 0, "requests": ">=200", "p99": "5s"})
def test_bench_http(httpbench, httpbench_server):
    before = httpbench_server.stats()["requests"]
    r = httpbench.bench("/bytes/150", n=200, concurrency=2)
    assert r.responses == r.successes == 200
    assert httpbench_server.stats()["requests"] - before == 200
    assert httpbench.url("/bytes/150") == httpbench_server.url + "/bytes/150"


def test_bench_https_verified_with_the_session_ca(httpbench, httpbench_server):
    r = httpbench.bench("/", n=20, tls=True)
    assert r.url.startswith(httpbench_server.https_url)
    r.assert_budget(errors=0, requests=20)


def test_bench_budget_counts_non_2xx_as_errors(httpbench):
    r = httpbench.bench("/status/503", n=10)
    assert r.non_2xx == 10
    with pytest.raises(AssertionError, match="errors +<= 0 +10 "):
        r.assert_budget(errors=0)


@pytest.mark.parametrize("tls", [False, True])
def test_client_adapter(httpbench, tls):
    c = httpbench.client("http.client", "/bytes/150", tls=tls)
    r = httpbench.measure(c.request, n=50)
    assert r.calls == 50 and c.last_status == 200 and len(c.last_body) == 150


def test_async_client_adapter(httpbench, httpbench_server):
    c = httpbench.client("httpx-async", "/bytes/150", tls=True)  # skips if httpx is missing
    before = httpbench_server.stats(tls=True)["requests"]
    r = httpbench.measure_async(c.request, n=40, concurrency=4, warmup=0)
    assert r.calls == 40 and c.last_status == 200 and len(c.last_body) == 150
    assert httpbench_server.stats(tls=True)["requests"] - before == 40
''')
    res = run(pytester, f"--httpbench-save={tmp_path / 'b.json'}")
    res.assert_outcomes(passed=6)
    lines = summary_lines(res)
    http = next(ln for ln in lines if ln.startswith("test_srv.py::test_bench_http "))
    assert re.search(r"req/s [\d.]+k? .*errors 0 .*PASS$", http.rstrip()), http
    assert sum(ln.startswith("test_srv.py::test_client_adapter[") for ln in lines) == 2
    saved = httpbench.load(tmp_path / "b.json")
    bench = saved.get("test_srv.py::test_bench_http", "-")
    assert isinstance(bench, httpbench.BenchResult) and bench.successes == 200


def test_readme_example_runs(pytester):
    # the complete example file of the plugin's docs (the README links to it)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "pytest.md").read_text(encoding="utf-8")
    example = doc[doc.index("```python\n") + 10:doc.index("\n```\n")]
    assert example.startswith("# test_perf.py")
    pytester.makepyfile(test_perf=example)
    res = run(pytester)
    res.assert_outcomes(passed=3)
    assert len(summary_lines(res)) == 3


def test_marker_tolerance_and_repeats(pytester, tmp_path, monkeypatch):
    pytester.makepyfile(test_m='''
import os
import time

import pytest

DELAY = float(os.environ.get("HB_DELAY", "0"))


def work():
    if DELAY:
        time.sleep(DELAY)


@pytest.mark.httpbench(tolerance="10000000000000%", repeats=1)
def test_lenient(httpbench):
    httpbench.measure(work, n=50)


@pytest.mark.httpbench(repeats=1)
def test_strict_once(httpbench):
    httpbench.measure(work, n=50)


@pytest.mark.httpbench(repeats=0)
def test_bad_repeats(httpbench):
    httpbench.measure(work, n=50)


@pytest.mark.httpbench(tolerance="a lot")
def test_bad_tolerance(httpbench):
    httpbench.measure(work, n=50)
''')
    base = tmp_path / "base.json"
    run(pytester, f"--httpbench-save={base}", "-k", "not bad").assert_outcomes(
        passed=2, deselected=2)
    monkeypatch.setenv("HB_DELAY", "0.002")
    summary = tmp_path / "s.json"
    res = run(pytester, f"--httpbench-compare={base}", "--httpbench-repeats=3",
              f"--httpbench-json={summary}")
    # 1000x slower: within the lenient marker's tolerance; the strict test fails after one run.
    res.assert_outcomes(passed=1, failed=1, errors=2)
    assert "repeats must be a positive integer, not 0" in res.stdout.str()
    assert "test_bad_tolerance: @pytest.mark.httpbench: tolerance='a lot': expected a " \
        "percentage like '10%'" in res.stdout.str()
    rows = {m["key"]: m for m in json.loads(summary.read_text())["measurements"]}
    assert rows["test_m.py::test_lenient"]["verdict"] == "PASS"
    assert rows["test_m.py::test_strict_once"]["runs"] == 1
    assert rows["test_m.py::test_strict_once"]["regressed"][0] == "p50"
