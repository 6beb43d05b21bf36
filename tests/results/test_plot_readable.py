"""Figures that cannot mislead: every log axis says so, a client has one colour in
every figure and run, legends sit outside the data, and the HTML report's figures
stay readable in a real browser at 1400 and at 400 px."""

import html as H
import json
import os
import re
import shutil
import subprocess

import pytest
from httpbench import _results as R
from httpbench import plot as PL
from httpbench._colours import client_colour
from httpbench.report import html_report
from test_results import hist, make_bench, make_measure
from test_verdict import compare_set

pytest.importorskip("matplotlib")

# a 640x spread, as between the native client and curl as a process
_WIDE = {"native": 9_000, "pycurl": 16_600, "requests": 440_000, "curl": 5_760_000}


def _all_figures(rs):
    kinds = PL.applicable_kinds(rs)
    assert kinds[:2] == ["ratios", "rates"]  # the verdict first; no log-scale bars
    return {k: PL.plot(rs, k) for k in [*kinds, "bars"]}


def test_every_log_axis_says_so():
    rs = compare_set(_WIDE)
    logs = 0
    for kind, fig in _all_figures(rs).items():
        for ax in fig.axes:
            for scale, label in ((ax.get_xscale(), ax.get_xlabel()),
                                 (ax.get_yscale(), ax.get_ylabel())):
                if scale == "log":
                    logs += 1
                    assert "log" in label, (kind, label)
    assert logs >= 4  # ratios, percentiles (x and y), cdf, bars: the test saw log axes
    bench = [make_bench(seed=c, config=R.BenchConfig(duration_ns=2_000_000_000, concurrency=c,
                                                     threads=1)) for c in (1, 4, 16)]
    fig = PL.plot_latency_vs_concurrency(bench)
    assert fig.axes[0].get_xscale() == "log" and "log" in fig.axes[0].get_xlabel()


def test_ratio_plot_ranks_by_the_verdict_with_ratio_whiskers():
    fig = PL.plot_ratios(compare_set(_WIDE))
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    # best on top (the highest y), its figure beside its name
    assert labels[0].startswith("native") and "9.00 µs" in labels[0]
    dots = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
    ratios = [ln.get_xdata()[0] for ln in dots]
    assert ratios[0] == 1.0 and ratios == sorted(ratios)
    assert ratios[-1] == pytest.approx(640, rel=0.02)
    assert "log scale" in ax.get_xlabel() and "lower is better" in ax.get_xlabel()


def test_a_client_keeps_its_colour_across_runs_with_other_clients():
    a = compare_set({"native": 9_000, "requests": 440_000, "httpx": 270_000})
    b = compare_set({"pycurl": 16_000, "aiohttp": 300_000, "native": 9_500, "urllib3": 130_000})
    seen = {}
    for rs in (a, b):
        fig = PL.plot_percentiles(rs)
        for ln in fig.axes[0].get_lines():
            seen.setdefault(ln.get_label(), set()).add(ln.get_color())
        ratios = PL.plot_ratios(rs)
        ax = ratios.axes[0]
        names = [t.get_text().split()[0] for t in ax.get_yticklabels()]
        dots = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
        for name, dot in zip(names, dots, strict=True):
            seen.setdefault(name, set()).add(dot.get_color())
    assert seen["native"] == {client_colour("native")}
    assert all(len(cols) == 1 for cols in seen.values()), seen
    # different clients, different colours; an unknown name is stable too
    assert len({client_colour(c) for c in ("native", "pycurl", "requests", "httpx",
                                            "urllib3", "aiohttp", "curl")}) == 7
    assert client_colour("my-client") == client_colour("my-client")
    assert client_colour("httpx-async") != client_colour("httpx")


def test_legends_sit_outside_every_axes():
    rs = compare_set(_WIDE)
    for kind, fig in _all_figures(rs).items():
        for ax in fig.axes:
            assert ax.get_legend() is None, kind  # a legend inside an axes covers data


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


# measures every figure's text (rendered font size) and panel (axes group height)
_MEASURE = """<script>
(function () {
  var out = {texts: [], panels: [], width: document.documentElement.clientWidth};
  document.querySelectorAll('figure svg text').forEach(function (t) {
    var m = t.getScreenCTM(), r = t.getBoundingClientRect();
    if (!t.textContent.trim() || r.width === 0) return;
    out.texts.push([t.textContent.slice(0, 40),
                    parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b)]);
  });
  document.querySelectorAll('figure svg g').forEach(function (g) {
    if (/axes_[0-9]+$/.test(g.id)) out.panels.push([g.id, g.getBoundingClientRect().height]);
  });
  parent.document.body.setAttribute('data-measure', JSON.stringify(out));
})();
</script>"""


def _measure(browser, page, width, tmp_path):
    """The page laid out in a frame exactly ``width`` px wide (a browser window is
    never narrower than 500 px), measured by a script the test adds."""
    page = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
    page = page.replace("</body>", _MEASURE + "</body>")
    outer = (f'<!DOCTYPE html><html><body style="margin:0"><iframe style="border:0;'
             f'width:{width}px;height:1000px" srcdoc="{H.escape(page)}"></iframe></body></html>')
    path = tmp_path / f"frame-{width}.html"
    path.write_text(outer, encoding="utf-8")
    run = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                          "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
                          f"--window-size={max(width, 500) + 40},1000", "--dump-dom",
                          path.as_uri()], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, HOME=str(tmp_path)))
    m = re.search(r'data-measure="([^"]*)"', run.stdout)
    assert m, run.stderr[-2000:]
    return json.loads(H.unescape(m.group(1)))


@pytest.mark.slow
@pytest.mark.parametrize("width", [1400, 400])
def test_html_figures_are_readable_at_desktop_and_phone_width(tmp_path, width):
    browser = _chromium()
    if browser is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium)")
    rs = compare_set(_WIDE)
    m = _measure(browser, html_report(rs), width, tmp_path)
    assert m["width"] <= width
    assert len(m["texts"]) > 50 and len(m["panels"]) >= 4
    small = [t for t in m["texts"] if t[1] < 9.0]
    assert not small, small[:5]
    short = [p for p in m["panels"] if p[1] < 240]
    assert not short, short


def test_bench_and_measure_records_still_draw_their_own_figures():
    m = make_measure(latency=hist(range(1000, 200_000, 100)))
    assert "bars" in PL.applicable_kinds([m])
    rs = R.ResultSet().with_result("a", "x", 0, make_bench())
    assert "ratios" not in PL.applicable_kinds(rs)
