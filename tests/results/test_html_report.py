"""The one-file HTML report: self-contained, complete, and rendered by a real browser."""

import html.parser
import os
import re
import shutil
import subprocess

import httpbench
import pytest
from httpbench import _cli
from httpbench import _results as R
from test_results import make_bench, make_measure, make_set


def _compare_set(shift=1.0, **md):
    rs = R.ResultSet(metadata={"repeat": 3, "hostname": "bench-host", "cpu_model": "Test CPU",
                               "cpus": 2, "python": "3.11.7", "slices": {"get-150b": 8},
                               "started_unix_ns": 1_700_000_000_000_000_000,
                               "noise": {"get-150b": {"rounds": 6, "reruns": 1, "disturbed": 0,
                                                      "steal_median": 0.0, "steal_max": 0.0,
                                                      "other_median": 0.01,
                                                      "other_max": 0.02}}, **md})
    for rep in range(3):
        for i, c in enumerate(("requests", "httpx")):
            m = make_measure(c, seed=10 * i + rep)
            if shift != 1.0:
                m = make_measure(c, seed=10 * i + rep, cpu_user_ns=int(400_000_000 * shift))
            rs = rs.with_result(c, "get-150b", rep, m)
    rs = rs.with_note(R.Note("spread", "run-to-run spread 30%", "httpx", "get-150b"))
    return rs.with_skipped("pycurl", "not installed (pip install pycurl)")


class _Refs(html.parser.HTMLParser):
    """Every attribute value that could make a browser fetch something, and the tags."""

    def __init__(self):
        super().__init__()
        self.refs, self.tags, self.styles = [], [], []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._in_style = tag == "style"
        for k, v in attrs:
            if k in ("src", "href", "xlink:href", "srcset", "action", "data", "poster"):
                self.refs.append(v or "")
            if k == "style":
                self.styles.append(v or "")

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)

    def handle_endtag(self, tag):
        if tag == "style":
            self._in_style = False


def _pages(tmp_path):
    rs = _compare_set()
    slower = _compare_set(shift=1.5, repeat=5, slices={"get-150b": 2})
    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    rs.save(base)
    slower.save(cur)
    bench = make_bench(metadata={"hostname": "bench-host"})
    out = {}
    for name, argv in (("compare", ["report", str(base)]), ("bench", None),
                       ("diff", ["diff", str(base), str(cur)])):
        path = tmp_path / f"{name}.html"
        if argv is None:
            bench.save(tmp_path / "bench.json")
            argv = ["report", str(tmp_path / "bench.json")]
        assert _cli.main([*argv, "--html", str(path)]) == 0
        out[name] = path
    return out


@pytest.mark.slow
def test_html_loads_nothing_from_anywhere(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    for name, path in _pages(tmp_path).items():
        text = path.read_text(encoding="utf-8")
        p = _Refs()
        p.feed(text)
        assert not [t for t in p.tags if t in ("script", "link", "iframe", "img", "object")], name
        # only in-page references (#id of an SVG clip path or glyph) or inline data
        assert all(r.startswith(("#", "data:")) for r in p.refs), (name, p.refs[:5])
        assert not [s for s in p.styles if "@import" in s or re.search(r"url\((?!#)", s)], name
        # the only http(s):// in the file is text (the bench's URL), never a resource
        for m in re.finditer(r"https?://", text):
            before = text[max(0, m.start() - 12):m.start()]
            assert not re.search(r"(src|href|url)\W*$", before), (name, before)
        assert "Content-Security-Policy" in text


@pytest.mark.slow
def test_html_holds_tables_figures_and_the_run(tmp_path):
    pytest.importorskip("matplotlib")
    pages = {k: v.read_text(encoding="utf-8") for k, v in _pages(tmp_path).items()}
    c = pages["compare"]
    assert c.count("<h3>get-150b</h3>") == 1 and ">requests</td>" in c and ">httpx</td>" in c
    assert "run-to-run spread 30%" in c and "pycurl: not installed" in c
    assert c.count('<figure data-kind="') == 3  # percentiles, cdf, bars (not a compare run)
    for fact in ("bench-host", "2 × Test CPU", "2023-11-14 22:13:20 UTC", "machine noise"):
        assert fact in c, fact
    b = pages["bench"]
    assert "Requests per second:    240.00 [#/sec]" in b
    assert '<figure data-kind="throughput">' in b
    d = pages["diff"]
    # the settings that differ are highlighted, the ones that agree are not
    assert re.search(r'<tr class="differs"><td[^>]*>repeats</td><td[^>]*>3</td><td[^>]*>5<', d)
    assert re.search(r'<tr class="differs"><td[^>]*>slices</td>', d)
    assert re.search(r"<tr><td[^>]*>host</td><td[^>]*>bench-host</td>", d)
    assert 'class="verdict-worse">slower<' in d  # CPU/req +50% in every repeat
    assert d.count('<div class="side">') == 1


@pytest.mark.slow
def test_jupyter_display_is_the_report_content():
    pytest.importorskip("matplotlib")
    rs = make_set()
    from httpbench import report

    assert rs._repr_mimebundle_()["text/html"] == report.html_fragment(rs)


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.mark.slow
def test_report_renders_in_headless_chromium(tmp_path):
    """Opened from file:// in a real browser: no console message (an error, or a
    blocked load under the page's no-network policy), every table and figure in the
    DOM, and a screenshot with something drawn on it."""
    pytest.importorskip("matplotlib")
    import matplotlib.image as mpimg

    browser = _chromium()
    if browser is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium)")
    for name, path in _pages(tmp_path).items():
        text = path.read_text(encoding="utf-8")
        url = path.as_uri()
        base = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0"]
        env = dict(os.environ, HOME=str(tmp_path))
        dom = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True,
                             timeout=120, env=env)
        assert dom.returncode == 0, dom.stderr[-2000:]
        console = [ln for ln in dom.stderr.splitlines() if ":CONSOLE" in ln]
        assert not console, (name, console)
        # the browser parsed as many tables and figures as the file holds
        for tag in ("<table", "<svg", "<figure"):
            assert dom.stdout.count(tag) == text.count(tag), (name, tag)
        assert text.count("<table") >= 2 and text.count("<svg") >= 1
        shot = tmp_path / f"{name}.png"
        run = subprocess.run([*base, f"--screenshot={shot}", "--window-size=420,1400", url],
                             capture_output=True, text=True, timeout=120, env=env)
        assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
        px = mpimg.imread(str(shot))[..., :3]
        ink = (px.min(axis=2) < 0.6).mean()  # share of pixels darker than light grey
        assert ink > 0.01, (name, ink)


def test_compare_writes_report_html_beside_results(tmp_path):
    from httpbench import _compare

    written = _compare.write_outputs(make_set(), tmp_path, plots=False)
    assert written["html"] == str(tmp_path / "report.html")
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and ">requests</td>" in text
    assert "<svg" not in text  # no plots asked for
    assert os.path.exists(tmp_path / "results.json")


def test_report_html_unwritable_is_a_clear_error(tmp_path, capsys):
    make_bench().save(tmp_path / "b.json")
    rc = _cli.main(["report", str(tmp_path / "b.json"), "--html",
                    str(tmp_path / "no" / "such" / "dir" / "r.html")])
    assert rc == 2
    assert "cannot write" in capsys.readouterr().err


def test_plot_module_is_callable():
    pytest.importorskip("matplotlib")
    fig = httpbench.plot(make_measure(), kind="percentiles")
    assert fig.axes and fig.axes[0].get_lines()
    assert httpbench.plot.plot_bars is not None  # the functions are still attributes


def test_a_result_set_without_scenario_names_gets_a_real_heading():
    from httpbench.report import format_result

    rs = R.ResultSet(metadata={"source": "pytest --httpbench-save"})
    rs = rs.with_result("tests/test_x.py::test_get", "-", 0, make_measure("x"))
    text = format_result(rs, "text")
    assert text.startswith("pytest --httpbench-save\n=======================")


def _placed_set():
    """A compare run that recorded its placement and a wake-up cost near its figures."""
    # 300 µs per round trip on one CPU: every ~450 µs cell is within 2x of it
    return _compare_set(placement={"get-150b": {"mode": "same", "server_cpus": [1],
                                                "client_cpus": [1]}},
                        placement_rule="auto",
                        wakeup_ns={"same_cpu": 300_000, "cross_cpu": 1_800_000, "cpus": [0, 1]},
                        speed_index={"median": 44523.75, "min": 44281.5, "max": 124886.5,
                                     "rounds": [44381.5, 124886.5, 44281.5],
                                     "unit": "ns per unit of fixed work"})


def test_report_text_and_html_show_placement_machine_and_cell_notes(tmp_path, capsys):
    from httpbench import report

    rs = _placed_set()
    place = "placement: server and client on CPU 1 (same, chosen by calibration;"
    machine = "machine: wake-up round trip 300 µs on one CPU, 1800 µs across two"
    assert report.cell_rows(rs, "get-150b")[0]["notes"] == {"wake-up": 1}
    rs.save(tmp_path / "run.json")
    assert _cli.main(["report", str(tmp_path / "run.json")]) == 0
    text = capsys.readouterr().out
    assert place in text and machine in text
    rows = [ln for ln in text.splitlines() if ln.startswith(("requests ", "httpx "))]
    assert [r.rsplit(" | ", 1)[1] for r in rows] == ["wake-up", "spread, wake-up"]
    page = report.html_report(rs, plots=False)
    assert f'<p class="caption">{place}' in page and f'<p class="caption">{machine}' in page
    # the notes column, one cell per client, in the table's last column
    assert re.search(r">requests</td>(<td[^>]*>[^<]*</td>){9}<td[^>]*>wake-up</td></tr>", page)
    assert re.search(r">httpx</td>(<td[^>]*>[^<]*</td>){9}<td[^>]*>spread, wake-up</td></tr>",
                     page)
    # the same run facts, worded as the terminal prints them
    meta = page[page.index("<h2>Machine and run</h2>"):]
    assert "44.5 µs per unit of fixed work (median of 3 controls, range 44.3-124.9" in meta
    assert "wake-up round trip 300 µs on one CPU, 1800 µs across two" in meta
    assert re.search(r">placement: get-150b</td><td[^>]*>server and client on CPU 1 \(same\)<",
                     meta)
    assert "44523.75" not in page
