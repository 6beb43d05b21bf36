"""Plots people can read, checked on the rendered images (Agg): values spanning more than
10x get a log axis, every bar shows above the axis in its own colour, bars carry their
values, legends name clients (not URLs), PNG and SVG exports hold the labels."""

import io
import random

import pytest
from httpbench import _results as R
from httpbench import plot as PL
from test_results import hist, make_bench, make_measure

pytest.importorskip("matplotlib")
np = pytest.importorskip("numpy")

# CPU µs per request of the README's table: curl is 230x native
CPU_US = {"native": 37.0, "pycurl": 62.0, "http.client": 200.0, "curl": 8490.0}


def _wide_set():
    rs = R.ResultSet()
    for rep in range(3):
        for c, us in CPU_US.items():
            rng = random.Random(rep * 11 + len(c))
            lat = hist(int(us * 1000 * rng.lognormvariate(0, 0.3)) for _ in range(600))
            rs = rs.with_result(c, "get-150b", rep, make_measure(
                c, calls=1000, latency=lat, cpu_user_ns=int(us * 1000 * 1000) + rep * 5000,
                cpu_sys_ns=0, cpu_thread_ns=None, alloc_counts={"obj": 10 + 100 * len(c)},
                alloc_bytes={"obj": 2000 * len(c)}))
    return rs


def _pixels(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # the PNG renderer, as savefig(.png) uses
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())


def _bars(ax):
    return [p for p in ax.patches if p.get_height() > 0]


def _assert_bars_visible(fig, ax, min_px=4.0):
    """Each bar is at least min_px tall on the image and its middle pixel has its colour."""
    img = _pixels(fig)
    height = img.shape[0]
    bottom_px = ax.transData.transform((0, ax.get_ylim()[0]))[1]
    for bar in _bars(ax):
        box = bar.get_window_extent()
        base = max(box.y0, bottom_px)  # a log axis clips the bar at its bottom
        assert box.y1 - base >= min_px, (bar.get_x(), bar.get_height())
        x = int(box.x0 + (box.x1 - box.x0) * 0.3)  # off the whisker drawn at the centre
        y = int(height - (base + (box.y1 - base) * 0.4))
        want = np.array(bar.get_facecolor()[:3]) * 255
        got = img[y, x, :3].astype(float)
        assert np.abs(got - want).max() < 40, (bar.get_x(), got, want)


def test_bars_go_log_when_values_span_more_than_10x():
    fig = PL.plot_bars(_wide_set(), metrics=("cpu_ns_per_request",))
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    bars = _bars(ax)
    assert len(bars) == len(CPU_US)
    lo, hi = ax.get_ylim()
    for bar in bars:
        assert lo < bar.get_height() < hi  # above the axis, below the top
    _assert_bars_visible(fig, ax)
    # every bar carries its value
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == len(bars) and all(texts)
    assert any(t.startswith("8") for t in texts)  # curl's ~8.49k µs


def test_bars_stay_linear_within_10x():
    rs = _wide_set().select(client=["native", "pycurl"])
    fig = PL.plot_bars(rs, metrics=("cpu_ns_per_request",))
    ax = fig.axes[0]
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    _assert_bars_visible(fig, ax)


def test_percentile_spectrum_log_scales_and_client_legend():
    fig = PL.plot_percentiles(_wide_set())
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"  # 1/(1-p), the HdrHistogram percentile axis
    assert ax.get_yscale() == "log"  # native's 37 µs next to curl's 8.5 ms
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[:3] == ["0%", "90%", "99%"]
    lo, hi = ax.get_ylim()
    for line in ax.get_lines():
        y = line.get_ydata()
        assert lo < min(y) and max(y) < hi, line.get_label()
    # the fast clients' lines sit well above the bottom of the image, not on the axis
    _pixels(fig)
    bottom_px = ax.transData.transform((1, lo))[1]
    for line in ax.get_lines():
        ys = ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]))[:, 1]
        assert ys.min() - bottom_px > 5, line.get_label()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == list(CPU_US)


def test_legends_name_runs_not_urls():
    runs = [make_bench(seed=i, url=f"http://127.0.0.1:8080/bytes/{n}")
            for i, n in enumerate((150, 12000))]
    for kind in ("percentiles", "cdf"):
        fig = PL.plot(runs, kind)
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        assert legend and not any("://" in t for t in legend), legend
        assert any("/bytes/150" in t for t in legend), legend
    # the same URL at two concurrencies: told apart by the concurrency, not the URL
    same = [make_bench(seed=1), make_bench(seed=2, config=R.BenchConfig(concurrency=64))]
    fig = PL.plot(same, "percentiles")
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(set(legend)) == len(legend), legend
    assert not any("://" in t for t in legend), legend


@pytest.mark.slow
def test_exports_png_and_svg_with_labels(tmp_path):
    rs = _wide_set()
    paths = PL.save_plots(rs, tmp_path)
    pngs = [p for p in paths if p.endswith(".png")]
    svgs = [p for p in paths if p.endswith(".svg")]
    assert pngs and len(pngs) == len(svgs)
    for p in pngs:
        data = open(p, "rb").read()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    fig = PL.plot_bars(rs, metrics=("cpu_ns_per_request",))
    svg = PL.figure_svg(fig)
    assert svg.startswith("<svg")
    for name in CPU_US:
        assert name in svg
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    w, h = fig.get_size_inches() * 100
    assert 400 <= w <= 1600 and 250 <= h <= 1200
