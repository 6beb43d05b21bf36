"""Figures: every plot renders a non-empty image and its artists hold the plotted series."""

import io
import random
import sys

import pytest
from httpbench import _results as R
from httpbench import plot as PL
from httpbench._rows import result_rows
from test_results import hist, make_bench, make_measure

pytest.importorskip("matplotlib")


def _png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=40)
    data = buf.getvalue()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
    return data


def _set():
    rs = R.ResultSet()
    for rep in range(3):
        for c, base in (("requests", 400_000), ("httpx", 520_000), ("native", 60_000)):
            for s, k in (("get-150b", 1), ("get-12k", 2)):
                rng = random.Random(rep * 7 + len(c) + k)
                lat = hist(int(base * k * rng.lognormvariate(0, 0.4)) for _ in range(800))
                rs = rs.with_result(c, s, rep, make_measure(
                    c, latency=lat, cpu_user_ns=(base // 2) * 1000 * k + rep * 1000, cpu_sys_ns=0,
                    alloc_counts={"obj": (base // 1000) * 1000}, alloc_bytes={"obj": base * k}))
    return rs


@pytest.mark.slow
def test_percentile_spectrum_plot_holds_each_client():
    rs = _set().select(scenario="get-150b")
    fig = PL.plot_percentiles(rs)
    _png(fig)
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert set(lines) == {"requests", "httpx", "native"}
    assert ax.get_xscale() == "log" and ax.get_ylabel() == "latency (ms, log scale)"
    assert [t.get_text() for t in ax.get_xticklabels()][:4] == ["0%", "90%", "99%", "99.9%"]
    for c in ("requests", "httpx", "native"):
        merged = PL._merge([r.latency for r in rs.repeats(c, "get-150b")])
        y = lines[c].get_ydata()
        assert y[-1] == pytest.approx(merged.max / 1e6)  # ends at the max
        assert y[0] == pytest.approx(merged.percentile(0) / 1e6)  # starts at the 0th percentile
        assert list(y) == sorted(y)
        x = lines[c].get_xdata()
        for xv, p in ((2.0, 50.0), (4.0, 75.0), (256.0, 99.609375)):  # levels 1 - 2^-k
            i = min(range(len(x)), key=lambda j, xv=xv: abs(x[j] - xv))
            assert x[i] == pytest.approx(xv)
            assert y[i] == pytest.approx(merged.percentile(p) / 1e6)


@pytest.mark.slow
def test_constant_rate_plot_draws_corrected_and_uncorrected():
    lat = [200_000] * 900 + [1_000_000_000 - k * 10_000_000 for k in range(100)]
    b = make_bench(latency=hist(lat), latency_uncorrected=hist([200_000] * 1000))
    fig = b.plot(kind="percentiles")
    _png(fig)
    labels = [ln.get_label() for ln in fig.axes[0].get_lines()]
    # a run labelled by its URL is named by its path in the legend (the URL is the title)
    assert b.label == b.url == "http://127.0.0.1:8080/150b"
    assert labels == ["/150b (corrected)", "/150b (uncorrected)"]
    assert b.url in fig.axes[0].get_title()
    corrected, uncorrected = fig.axes[0].get_lines()
    assert max(corrected.get_ydata()) == pytest.approx(1.0, rel=1e-2)  # seconds axis
    assert max(uncorrected.get_ydata()) == pytest.approx(0.0002, rel=1e-2)
    assert uncorrected.get_linestyle() == "--"


def test_cdf_plot():
    m = make_measure()
    fig = PL.plot(m, kind="cdf")
    _png(fig)
    (line,) = fig.axes[0].get_lines()
    y = line.get_ydata()
    assert y[-1] == pytest.approx(1.0) and list(y) == sorted(y)
    assert len(y) == len(m.latency.buckets())


@pytest.mark.slow
def test_bars_plot_heights_are_medians_with_spread():
    rs = _set()
    fig = rs.plot(kind="bars")
    _png(fig)
    cpu_ax, alloc_ax, kib_ax = fig.axes
    assert cpu_ax.get_title() == "CPU per request" and cpu_ax.get_ylabel() == "µs (log scale)"
    heights = [p.get_height() for p in cpu_ax.patches]
    assert len(heights) == 3 * 2  # clients x scenarios
    med = sorted(r.cpu_ns_per_call / 1e3 for r in rs.repeats("requests", "get-150b"))[1]
    assert heights[0] == pytest.approx(med)
    assert [p.get_height() for p in alloc_ax.patches][:2] == [400.0, 400.0]
    assert kib_ax.get_ylabel() == "KiB (log scale)"
    assert [t.get_text() for t in cpu_ax.get_xticklabels()] == ["get-150b", "get-12k"]
    with pytest.raises(ValueError):
        PL.plot_bars(rs, metrics=["nope"])


@pytest.mark.slow
def test_throughput_and_concurrency_plots():
    sweep = []
    for c in (1, 4, 16):
        rng = random.Random(c)
        lat = hist(int(50_000 * c * rng.lognormvariate(0, 0.3)) for _ in range(500))
        sweep.append(make_bench(config=R.BenchConfig(concurrency=c), latency=lat,
                                latency_uncorrected=None, series_responses=(100 * c, 110 * c),
                                series_errors=(0, c)))
    fig = PL.plot_throughput(sweep[1])
    _png(fig)
    ok, failed = fig.axes[0].get_lines()
    assert list(ok.get_ydata()) == [400.0, 440.0] and list(failed.get_ydata()) == [0.0, 4.0]
    fig = PL.plot_latency_vs_concurrency(sweep)
    _png(fig)
    ax = fig.axes[0]
    p50, p99 = ax.get_lines()
    assert list(p50.get_xdata()) == [1, 4, 16]
    assert p99.get_ydata()[2] == pytest.approx(sweep[2].p99 / 1e6)
    (rps,) = fig.axes[1].get_lines()
    assert list(rps.get_ydata()) == [r.rps for r in sweep]
    with pytest.raises(ValueError, match="concurrencies"):
        PL.plot_latency_vs_concurrency(sweep[:1])
    with pytest.raises(ValueError):
        PL.plot_throughput(make_measure())


@pytest.mark.slow
def test_save_plots_writes_png_and_svg(tmp_path):
    written = PL.save_plots(_set().select(client="native", scenario="get-150b"), tmp_path / "figs",
                            dpi=50)
    names = sorted(p.rsplit("/", 1)[1] for p in written)
    assert names == ["bars.png", "bars.svg", "cdf.png", "cdf.svg",
                     "percentiles.png", "percentiles.svg"]
    for p in written:
        data = open(p, "rb").read()
        assert len(data) > 2000
        assert data.startswith(b"\x89PNG") if p.endswith(".png") else b"<svg" in data


def test_unknown_kind_and_empty_data():
    with pytest.raises(ValueError, match="unknown plot kind"):
        make_measure().plot(kind="pie")
    import httpbench

    empty = make_measure(latency=httpbench.Histogram())
    with pytest.raises(ValueError, match="no latency samples"):
        empty.plot()


def test_figures_display_in_jupyter_without_pyplot():
    fig = make_measure().plot()
    assert fig._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_plotting_never_imports_pyplot_or_needs_a_display(tmp_path):
    import subprocess

    code = (
        "import sys, httpbench\n"
        "h = httpbench.Histogram()\n"
        "[h.record(v) for v in range(1000, 100000, 7)]\n"
        "r = httpbench.MeasureResult(label='x', calls=1, wall_ns=1, latency=h)\n"
        f"r.plot().savefig({str(tmp_path / 'x.png')!r})\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("DISPLAY", "MPLBACKEND")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
    assert (tmp_path / "x.png").read_bytes()[:4] == b"\x89PNG"


def test_missing_matplotlib_is_a_clear_import_error(monkeypatch):
    monkeypatch.setattr(PL, "_FIGURE_CLASS", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        make_measure().plot()


@pytest.mark.slow
def test_multi_scenario_sets_get_one_panel_per_scenario():
    rs = _set()
    for fn in (PL.plot_percentiles, PL.plot_cdf):
        fig = fn(rs)
        _png(fig)
        visible = [ax for ax in fig.axes if ax.get_visible()]
        assert [ax.get_title() for ax in visible] == ["get-150b", "get-12k"]
        for ax in visible:
            assert sorted(ln.get_label() for ln in ax.get_lines()) == ["httpx", "native",
                                                                        "requests"]


def test_runs_under_one_label_are_told_apart_by_how_they_were_made():
    # one URL run over HTTP/1.1 and h2, and a concurrency sweep: different experiments, not
    # repeats to merge; two runs made alike stay repeats of one line
    h1 = make_bench(seed=1, latency=hist([100_000] * 10),
                    config=R.BenchConfig(concurrency=16))
    h2 = make_bench(seed=2, latency=hist([900_000] * 10),
                    config=R.BenchConfig(concurrency=16, protocol="h2", streams=10))
    ax = PL.plot_percentiles([h1, h2]).axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert set(lines) == {"/150b http/1.1", "/150b h2 -m10"}
    assert ax.get_ylabel() == "latency (µs)"
    assert max(lines["/150b http/1.1"].get_ydata()) == pytest.approx(100, rel=0.01)
    assert max(lines["/150b h2 -m10"].get_ydata()) == pytest.approx(900, rel=0.01)
    assert PL.plot_percentiles(h2).axes[0].get_title() == (
        "Latency by percentile: GET http://127.0.0.1:8080/150b (h2 -c16 -m10)")
    assert PL.plot_percentiles(h1).axes[0].get_title() == (
        "Latency by percentile: GET http://127.0.0.1:8080/150b")

    sweep = [make_bench(seed=c, config=R.BenchConfig(concurrency=c)) for c in (1, 4, 16)]
    labels = [ln.get_label() for ln in PL.plot_percentiles(sweep).axes[0].get_lines()]
    assert labels == ["/150b -c1", "/150b -c4", "/150b -c16"]
    rows = result_rows(sweep)  # the rows a DataFrame, tables and baselines read
    assert [(r["client"], r["repeat"]) for r in rows] == [
        (f"{sweep[0].url} -c{c}", 0) for c in (1, 4, 16)]

    alike = [make_bench(seed=1, latency=hist([100_000] * 10), latency_uncorrected=None,
                        config=R.BenchConfig(concurrency=4)),
             make_bench(seed=2, latency=hist([300_000] * 10), latency_uncorrected=None,
                        config=R.BenchConfig(concurrency=4))]
    ax = PL.plot_percentiles(alike).axes[0]
    (line,) = ax.get_lines()
    assert line.get_label() == "/150b" and ax.get_ylabel() == "latency (µs)"
    assert max(line.get_ydata()) == pytest.approx(300, rel=0.01)  # both runs merged
    assert min(line.get_ydata()) == pytest.approx(100, rel=0.01)
