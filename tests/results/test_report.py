"""Reports: DataFrame rows, tables, ab-style report, HdrHistogram export,
significance tests, baseline comparison and the ``httpbench report`` CLI."""

import base64
import json
import math
import random
import sys

import httpbench
import pytest
from httpbench import _cli
from httpbench import _results as R
from httpbench import report as P
from test_results import hist, make_bench, make_measure, make_set

# ---------------------------------------------------------------- DataFrame


def test_dataframe_columns_and_values():
    pd = pytest.importorskip("pandas")
    rs = make_set()
    df = rs.to_dataframe()
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == list(P.DATAFRAME_COLUMNS)
    assert len(df) == len(rs) == 5
    assert list(zip(df.client, df.scenario, df.repeat, strict=True)) == rs.keys()
    for (c, s, i), r in rs:
        row = df[(df.client == c) & (df.scenario == s) & (df.repeat == i)].iloc[0]
        assert row.p50_ns == r.latency.percentile(50)
        assert row.p99_ns == r.latency.percentile(99)
        assert row.max_ns == r.latency.max
        assert row.rps == pytest.approx(r.rps)
        assert row.start_unix_ns == r.start_unix_ns
        if isinstance(r, R.MeasureResult):
            assert row.kind == "measure"
            assert row.requests == r.calls
            assert row.cpu_ns_per_request == pytest.approx(r.cpu_ns_per_call)
            assert row.allocs_per_request == pytest.approx(r.allocs_per_call)
            assert row.alloc_obj == r.alloc_counts["obj"]
            assert row.gc_gen0 == r.gc_collections[0]
            assert row.peak_rss_bytes == r.peak_rss_bytes
            assert math.isnan(row.native_allocs_per_request)  # not tracked -> NaN, not 0
            assert math.isnan(row.bytes_in)
        else:
            assert row.kind == "bench"
            assert row.requests == r.successes == 480
            assert row.errors == r.failures == 25
            assert row.non_2xx == 20 and row.transport_errors == 5
            assert row.concurrency == 16 and row.rate == 250.0
            assert row.protocol == "http/1.1" and row.streams == 1
            assert row.p99_uncorrected_ns == r.latency_uncorrected.percentile(99)
            assert math.isnan(row.allocs_per_request)
    notes = df[(df.client == "httpx")].notes.tolist()
    assert notes == ["spread", "spread"]


def test_dataframe_of_single_records_and_lists():
    pytest.importorskip("pandas")
    m = make_measure("solo")
    df = m.to_dataframe()
    assert df.shape == (1, len(P.DATAFRAME_COLUMNS))
    assert df.client[0] == "solo" and df.scenario[0] == "" and df.repeat[0] == 0
    df2 = P.to_dataframe([make_measure("a"), make_measure("a"), make_bench()])
    assert df2.repeat.tolist() == [0, 1, 0]
    assert math.isnan(df2.streams[0]) and df2.streams[2] == 1  # measure: not a bench figure
    h2 = make_bench(config=R.BenchConfig(concurrency=4, protocol="h2", streams=10))
    row = P.to_dataframe([h2]).iloc[0]
    assert (row.protocol, row.streams, row.concurrency) == ("h2", 10, 4)
    with pytest.raises(TypeError):
        P.to_dataframe(["nope"])


def test_dataframe_without_pandas(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        make_measure().to_dataframe()
    assert len(P.result_rows(make_set())) == 5  # rows need no pandas


# ---------------------------------------------------------------- tables


def test_text_and_markdown_tables():
    rs = make_set()
    text = rs.summary("text")
    # measured cells are compare's own table: the same headers, ± and notes column
    assert "get-150b\n========\n\nmedians of 2 repeats; ±: half the width" in text
    lines = text.splitlines()
    header = next(ln for ln in lines if ln.startswith("client") and "allocs/req" in ln)
    assert "CPU µs/req" in header and "KiB allocated/req" in header and header.endswith("notes")
    req = next(ln for ln in lines if ln.startswith("requests "))
    assert req.split(" | ")[1:5] == ["2000 ±0%", "452 µs ±0%", "598 µs", "   450 ±0%"]
    assert req.endswith("| thin")
    httpx = next(ln for ln in lines if ln.startswith("httpx "))
    assert httpx.endswith("| spread, thin")
    assert "load\n====" in text and "p50 (ms)" in text  # a load test's rows keep their table
    assert "[spread] httpx/get-150b: run-to-run spread 30%" in text
    assert "pycurl: not installed" in text
    md = rs.summary("md")
    assert "## get-150b" in md and "| requests |" in md and "|:---|---:|" in md
    js = json.loads(rs.summary("json"), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert len(js) == 5 and js[0]["client"] == "requests"
    assert js[0]["native_allocs_per_request"] is None  # not measured -> null, not NaN
    with pytest.raises(ValueError):
        rs.summary("html")
    assert str(make_measure()).startswith("measure: requests")


def test_bench_text_is_the_ab_style_report():
    from httpbench import _bench

    b = make_bench()
    assert b.summary("text") == _bench.format_report(b) == P.ab_report(b)
    assert "Requests per second:    240.00 [#/sec]" in b.summary("text")
    md = b.summary("md")
    assert md.startswith("| client | req/s |") and "| 240 |" in md


@pytest.mark.slow
def test_mimebundle_has_html_table_svg_and_text():
    pytest.importorskip("matplotlib")
    for rec in (make_measure(), make_bench(), make_set()):
        mb = rec._repr_mimebundle_()
        assert set(mb) == {"text/plain", "text/html"}
        assert "<table" in mb["text/html"] and "<svg" in mb["text/html"]
        assert mb["text/plain"] == rec.summary("text")
    html = make_measure()._repr_mimebundle_()["text/html"]
    assert ">Python allocs/call</td>" in html and ">81</td>" in html
    html = make_set()._repr_mimebundle_()["text/html"]
    assert "<h3>get-150b</h3>" in html and ">requests</td>" in html
    assert "run-to-run spread 30%" in html


# ---------------------------------------------------------------- HdrHistogram export


def _lognormal_hist(n=20_000, seed=5):
    rng = random.Random(seed)
    return hist(rng.lognormvariate(13, 0.6) for _ in range(n))


def test_percentile_spectrum_shape():
    h = _lognormal_hist()
    spec = P.percentile_spectrum(h)
    assert spec[0][1] == 0.0 and spec[-1] == (h.max, 100.0, h.count)
    ps = [p for _, p, _ in spec]
    assert ps == sorted(ps) and ps[-2] > 99.99
    assert all(a[0] <= b[0] and a[2] <= b[2] for a, b in zip(spec, spec[1:], strict=False))
    assert P.percentile_spectrum(httpbench.Histogram()) == []


def test_hgrm_export(tmp_path):
    h = _lognormal_hist()
    path = tmp_path / "lat.hgrm"
    assert P.export_histogram(h, path) == "hgrm"
    lines = path.read_text().splitlines()
    assert lines[0].split() == ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]
    rows = [ln.split() for ln in lines[2:] if ln and not ln.startswith("#")]
    assert all(len(r) == 4 for r in rows[:-1]) and len(rows[-1]) == 3
    median = next(r for r in rows if float(r[1]) == 0.5)
    assert float(median[0]) == pytest.approx(h.percentile(50) / 1e6, abs=1e-3)
    assert float(rows[-1][0]) == pytest.approx(h.max / 1e6, abs=1e-3)
    assert int(rows[-1][2]) == h.count
    assert any(ln.startswith("#[Max") and str(h.count) in ln for ln in lines)


def test_hlog_export_is_read_by_hdrhistogram(tmp_path):
    hdrh = pytest.importorskip("hdrh.histogram")
    h = _lognormal_hist()
    path = tmp_path / "lat.hlog"
    assert P.export_histogram(h, path, start_unix_ns=1_700_000_000_000_000_000,
                              duration_ns=2_000_000_000) == "hlog"
    text = path.read_text().splitlines()
    assert "#[Histogram log format version 1.3]" in text
    assert text[4].startswith('"StartTimestamp","Interval_Length"')
    assert text[2].startswith("#[StartTime: 1700000000.000 (seconds since epoch)")
    start, length, mx, b64 = text[-1].split(",")
    assert (float(start), float(length)) == (0.0, 2.0)
    assert float(mx) == pytest.approx(h.max / 1e6, rel=1e-3)
    other = hdrh.HdrHistogram.decode(b64.encode())
    assert other.get_total_count() == h.count
    for p in (1, 50, 90, 99, 99.9):
        assert other.get_value_at_percentile(p) == pytest.approx(h.percentile(p), rel=1e-3)
    # the binary layout: compressed V2 cookie, then a deflated V2 encoding
    blob = base64.b64decode(b64)
    assert blob[:4] == bytes.fromhex("1c849314")
    with pytest.raises(ValueError):
        P.export_histogram(h, tmp_path / "x", fmt="csv")


def test_hlog_empty_and_extreme_values():
    hdrh = pytest.importorskip("hdrh.histogram")
    h = httpbench.Histogram()
    assert hdrh.HdrHistogram.decode(
        base64.b64encode(P.hdr_compressed(h))).get_total_count() == 0
    for v in (0, 1, 2047, 2048, 10**9, 3 * 10**12):
        h.record(v)
    o = hdrh.HdrHistogram.decode(base64.b64encode(P.hdr_compressed(h)))
    assert o.get_total_count() == 6
    assert o.get_count_at_value(2047) == 1 and o.get_count_at_value(0) == 1


# ---------------------------------------------------------------- statistics


def test_mann_whitney_exact_values():
    assert P.mann_whitney_u([1, 2, 3], [4, 5, 6]) == (0.0, pytest.approx(0.1))
    assert P.mann_whitney_u([1, 2, 3, 4], [5, 6, 7, 8])[1] == pytest.approx(2 / 70)
    assert P.mann_whitney_u(range(1, 6), range(6, 11))[1] == pytest.approx(2 / 252)
    u, p = P.mann_whitney_u([1, 3, 5, 7], [2, 4, 6, 8])
    assert u == 6 and p == pytest.approx(0.6857, abs=1e-4)  # exact: 2*P(U<=6)=2*24/70
    assert P.mann_whitney_u([5], [5])[1] == 1.0


def test_mann_whitney_normal_approximation_with_ties():
    a = [1] * 30 + [2] * 30
    b = [2] * 30 + [3] * 30
    u, p = P.mann_whitney_u(a, b)
    assert u == 450.0  # 30*30 ties at 2 count half: 30*30*0.5
    assert p < 1e-6
    _, p_same = P.mann_whitney_u(a, list(a))
    assert p_same == pytest.approx(1.0, abs=0.05)


def test_welch_t_test_known_values():
    # df = 2: two-sided p = 1 - |t|/sqrt(t^2 + 2); here t = -2*sqrt(2)
    t = 2 * math.sqrt(2)
    assert P.welch_t_test([0, 2], [4, 6]) == pytest.approx(1 - t / math.sqrt(t * t + 2))
    # large samples approach the normal distribution
    rng = random.Random(3)
    a = [rng.gauss(0, 1) for _ in range(4000)]
    b = [x + 0.05 for x in a]
    p = P.welch_t_test(a, b)
    t = 0.05 / math.sqrt(2 * (sum((x - sum(a) / 4000) ** 2 for x in a) / 3999) / 4000)
    assert p == pytest.approx(math.erfc(t / math.sqrt(2)), rel=0.02)
    assert P.welch_t_test([3, 3, 3], [3, 3]) == 1.0
    assert P.welch_t_test([3, 3, 3], [4, 4]) == 0.0
    with pytest.raises(ValueError):
        P.welch_t_test([1], [2, 3])


# ---------------------------------------------------------------- compare_results


def _scaled(label, scale, seed, alloc=81, **kw):
    rng = random.Random(seed)
    lat = hist(int(rng.randint(300_000, 600_000) * scale) for _ in range(2000))
    wall = int(500_000_000 * scale * (1 + rng.uniform(-0.01, 0.01)))
    return make_measure(label, latency=lat, wall_ns=wall, calls=1000,
                        alloc_counts={"obj": alloc * 1000}, **kw)


def _set(scale, n_rep, seed0=0, alloc=81):
    rs = R.ResultSet()
    for i in range(n_rep):
        rs = rs.with_result("requests", "get", i, _scaled("requests", scale, seed0 + i, alloc))
        rs = rs.with_result("httpx", "get", i, _scaled("httpx", 1.0, seed0 + 50 + i, alloc))
    return rs


def test_compare_results_verdicts():
    base = _set(1.0, 5, seed0=0)
    cur = _set(1.3, 5, seed0=100)  # requests 30% slower, httpx unchanged
    cmp = httpbench.compare_results(base, cur)
    c = cmp.get("requests", "get", "p50_ns")
    assert c.verdict == "slower" and c.improved is False and c.test == "mann-whitney"
    assert c.change == pytest.approx(0.3, abs=0.05) and c.p_value < 0.05
    assert cmp.get("requests", "get", "rps").verdict == "slower"
    assert cmp.get("httpx", "get", "p50_ns").verdict == "no significant change"
    assert cmp.get("httpx", "get", "allocs_per_request").verdict == "no significant change"
    back = httpbench.compare_results(cur, base)
    assert back.get("requests", "get", "p50_ns").verdict == "faster"
    assert {(c.client, c.metric) for c in cmp.regressions} >= {("requests", "p50_ns")}
    assert all(c.client == "requests" for c in cmp.regressions)
    text = cmp.format("text")
    assert "slower" in text and "requests" in text
    assert json.loads(cmp.format("json"))["changes"][0]["client"] in ("requests", "httpx")


def test_compare_results_small_samples_and_deterministic_counts():
    base, cur = _set(1.0, 3, alloc=81), _set(1.0, 3, seed0=7, alloc=95)
    cmp = httpbench.compare_results(base, cur)
    a = cmp.get("requests", "get", "allocs_per_request")
    assert a.test == "welch" and a.verdict == "worse" and a.p_value == 0.0
    one = httpbench.compare_results(_set(1.0, 1), _set(2.0, 1))
    c = one.get("requests", "get", "p50_ns")
    assert c.verdict == "not tested" and c.change == pytest.approx(1.0, abs=0.05)
    assert not one.regressions


def test_compare_results_min_change_and_missing_keys():
    base = _set(1.0, 5)
    cur = _set(1.0, 5, seed0=1).with_result("aiohttp", "get", 0, make_measure("aiohttp"))
    cmp = httpbench.compare_results(base, cur, min_change=0.5)
    assert not cmp.regressions and not cmp.improvements
    assert cmp.only_current == (("aiohttp", "get"),) and cmp.only_baseline == ()
    with pytest.raises(ValueError):
        httpbench.compare_results(base, cur, metrics=["banana"])
    with pytest.raises(ValueError):
        httpbench.compare_results(base, cur, test="sign")


# ---------------------------------------------------------------- CLI


def test_cli_report_formats(tmp_path, capsys):
    path = tmp_path / "r.json"
    make_set().save(path)
    assert _cli.main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "get-150b" in out and "requests" in out
    assert _cli.main(["report", str(path), "--format", "md"]) == 0
    assert "| requests |" in capsys.readouterr().out
    assert _cli.main(["report", str(path), "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 5


def test_cli_report_reads_a_compare_out_directory(tmp_path, capsys):
    make_set().save(tmp_path / "results.json")
    assert _cli.main(["report", str(tmp_path), "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 5


def test_cli_report_baseline_and_regression_exit(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _set(1.0, 5).save(a)
    _set(1.3, 5, seed0=100).save(b)
    assert _cli.main(["report", "--baseline", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "slower" in out and "regressions" in out
    assert _cli.main(["report", "--baseline", str(a), str(b), "--fail-on-regression"]) == 1
    capsys.readouterr()
    assert _cli.main(["report", "--baseline", str(a), str(a), "--fail-on-regression"]) == 0


def test_cli_report_errors_and_export(tmp_path, capsys):
    assert _cli.main(["report", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "httpbench-results", "schema_version": 99, "record": {}}')
    assert _cli.main(["report", str(bad)]) == 2
    assert "newer than this httpbench supports" in capsys.readouterr().err
    assert _cli.main(["report", "--format", "xml", str(bad)]) == 2
    good = tmp_path / "m.json"
    make_bench().save(good)
    out = tmp_path / "lat.hgrm"
    assert _cli.main(["report", str(good), "--export-hdr", str(out)]) == 0
    assert out.read_text().startswith("       Value")


# ---------------------------------------------------------------- progress bars


def test_progress_bar_follows_bench_snapshots(capsys):
    pytest.importorskip("tqdm")
    from httpbench._bench import Progress

    bar = P.progress_bar("GET /", enable=True)
    bar(Progress(0, 0, 0, 0, 0.0, True, 100, None))
    bar(Progress(40, 38, 2, 1000, 0.5, False, 100, None))
    assert bar._bar.total == 100 and bar._bar.n == 40
    bar("worker 1 done")  # compare-style messages are accepted too
    bar.close(make_bench(config=R.BenchConfig(n=100), responses=90, successes=90,
                         error_counts={"read": 10}, status_counts={200: 90}))
    err = capsys.readouterr().err
    assert "GET /" in err and "100/100" in err
    bar.close()  # idempotent


def test_progress_bar_is_off_when_not_interactive(monkeypatch, capsys):
    monkeypatch.setenv("CI", "true")
    assert not P.interactive()
    bar = P.progress_bar("x")
    assert not bar.enabled
    bar("message")
    bar.close()
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_cli_report_plot_dir(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "b.json"
    make_bench().save(path)
    figs = tmp_path / "figs"
    assert _cli.main(["report", str(path), "--plot", str(figs)]) == 0
    assert sorted(p.name for p in figs.iterdir()) == [
        "cdf.png", "cdf.svg", "percentiles.png", "percentiles.svg",
        "throughput.png", "throughput.svg"]
    assert "wrote 6 files" in capsys.readouterr().err


def test_interval_log_of_a_result_set(tmp_path):
    hdrh_log = pytest.importorskip("hdrh.log")
    from hdrh.histogram import HdrHistogram

    rs = make_set()
    path = tmp_path / "all.hlog"
    assert P.export_hdr_log(rs, path) == len(rs)
    text = path.read_text()
    assert "#[requests/get-150b#0]" in text and "#[native/load#0]" in text
    reader = hdrh_log.HistogramLogReader(str(path), HdrHistogram(1, 3_600_000_000_000, 3))
    counts = []
    while True:
        h = reader.get_next_interval_histogram()
        if h is None:
            break
        counts.append(h.get_total_count())
    assert counts == [r.latency.count for _, r in rs]
    tagged = P.hdr_interval_log([(0.0, 1.0, make_measure().latency, "a b,c")], tags=True)
    assert tagged.splitlines()[-1].startswith("Tag=a_b_c,0.000,1.000,")


def test_cli_export_hgrm_merges_repeats(tmp_path, capsys):
    path = tmp_path / "s.json"
    make_set().save(path)
    out = tmp_path / "x.hgrm"
    assert _cli.main(["report", str(path), "--export-hdr", str(out)]) == 0
    assert "requests/get-150b, 2 repeat(s) merged" in capsys.readouterr().err
    total = int([ln for ln in out.read_text().splitlines() if ln.startswith("#[Max")][0]
                .split("=")[-1].strip(" ]"))
    assert total == sum(r.latency.count for r in make_set().repeats("requests", "get-150b"))


def test_comparison_from_zero_baseline_is_valid_json():
    base = R.ResultSet({("a", "s", i): make_measure("a", errors=0) for i in range(3)})
    cur = R.ResultSet({("a", "s", i): make_measure("a", errors=5) for i in range(3)})
    cmp = httpbench.compare_results(base, cur)
    c = cmp.get("a", "s", "errors")
    assert c.change == math.inf and c.verdict == "worse"
    doc = json.loads(cmp.format("json"))
    assert [x for x in doc["changes"] if x["metric"] == "errors"][0]["change"] is None
    row = [ln for ln in cmp.format("text").splitlines() if " errors " in ln][0]
    assert "from 0" in row and row.endswith("worse")
