"""One self-contained HTML page of a result or of a diff of two results.

Everything is inline (CSS, SVG figures): the file opens from ``file://``, in a
CI artifact viewer or on a phone with no network, and never fetches anything.
The same content, without the page around it, is what Jupyter shows.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Sequence
from typing import Any

from . import _noise
from ._baseline import Comparison
from ._machine import placement_text, speed_text, wakeup_text
from ._results import BenchResult, MeasureResult, ResultSet
from ._rows import entries

__all__ = ["diff_fragment", "e", "figures", "inline_svg", "noise_lines", "page", "result_fragment",
           "scroll", "settings_rows", "table", "title"]

_CSS = """
:root { color-scheme: light; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       margin: 0 auto; max-width: 1200px; padding: 0.8em; color: #1b1b1b; background: #fff; }
h1 { font-size: 1.35em; margin: 0.2em 0; } h2 { font-size: 1.15em; margin: 1.2em 0 0.3em; }
h3 { font-size: 1em; margin: 1em 0 0.3em; }
.stamp, .caption { color: #555; font-size: 0.9em; }
.scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; max-width: 100%; }
table.httpbench { border-collapse: collapse; font-size: 0.88em; margin: 0.3em 0; }
table.httpbench th, table.httpbench td { border-bottom: 1px solid #ddd; padding: 0.2em 0.55em; }
table.httpbench th { background: #f3f3f3; }
table.meta td:first-child { color: #555; white-space: nowrap; }
tr.differs td { background: #fff4d6; }
.verdict-worse { color: #b03a2e; font-weight: 600; }
.verdict-better { color: #1e7b43; font-weight: 600; }
.verdict-marked { color: #7a6a00; }
ul.notes li { margin: 0.15em 0; } .warn { color: #7a4b00; }
figure { margin: 0.8em 0; } figure svg { max-width: 100%; height: auto; display: block; }
pre { overflow-x: auto; font-size: 0.82em; background: #f7f7f7; padding: 0.6em; }
.side { display: flex; flex-wrap: wrap; gap: 1em; } .side > div { flex: 1 1 22em; min-width: 0; }
"""


_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def e(x: Any) -> str:
    """HTML-escaped text of ``x``."""
    return html.escape(str(x))


def page(title: str, body: str | Sequence[str]) -> str:
    """A complete HTML document around ``body`` (one fragment or several, in order)."""
    if not isinstance(body, str):
        body = "\n<hr>\n".join(body)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            # nothing may load from anywhere: a browser blocks (and reports) any reference
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_CSP}\">\n"
            f"<title>{e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            f"{body}\n</body>\n</html>\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "",
           row_classes: Sequence[str] | None = None, raw_last: bool = False) -> str:
    """An HTML table in a horizontally scrolling box (wide tables stay readable on a phone)."""
    out = [f'<div class="scroll"><table class="httpbench {cls}">',
           "<tr>" + "".join(f"<th>{e(h)}</th>" for h in headers) + "</tr>"]
    for i, r in enumerate(rows):
        rc = row_classes[i] if row_classes else ""
        cells = []
        for j, c in enumerate(r):
            text = str(c) if raw_last and j == len(r) - 1 else e(c)
            side = "left" if j == 0 or "meta" in cls or not _numeric(str(c)) else "right"
            wrap = ";white-space:nowrap" if side == "right" else ""  # "44.2 µs ±2%" on one line
            cells.append(f'<td style="text-align:{side}{wrap}">{text}</td>')
        out.append(f'<tr class="{rc}">' + "".join(cells) + "</tr>" if rc
                   else "<tr>" + "".join(cells) + "</tr>")
    out.append("</table></div>")
    return "\n".join(out)


def scroll(t: str) -> str:
    """A table in a box that scrolls sideways (a wide table stays readable on a phone)."""
    return f'<div class="scroll">{t}</div>'


_NUM = re.compile(r"^[\s+\-−]?[\d.,]+")


def _numeric(s: str) -> bool:
    return bool(_NUM.match(s)) or s in ("—", "-", "–")


# --------------------------------------------------------------------------
# metadata


def _when(obj: Any) -> str:
    from .plot import run_stamp

    return run_stamp(obj)


def _metadata(obj: Any) -> dict[str, Any]:
    if isinstance(obj, ResultSet):
        return dict(obj.metadata)
    if isinstance(obj, (BenchResult, MeasureResult)):
        return {"start_unix_ns": obj.start_unix_ns, **obj.metadata}
    recs = [r for *_, r in entries(obj)]
    return {"start_unix_ns": recs[0].start_unix_ns, **recs[0].metadata} if recs else {}


def _placement(p: Any) -> str:
    """'server and client on CPU 1 (same)': a placement as the terminal names it."""
    if not isinstance(p, dict):
        return str(p)
    return f"{placement_text(p)} ({p.get('mode')})"


def settings_rows(md: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, value) of the machine and run facts worth showing, in reading order."""
    rows: list[tuple[str, str]] = []

    def add(name: str, value: Any) -> None:
        if value is not None and value != "" and value != {}:
            rows.append((name, str(value)))

    start = md.get("started_unix_ns") or md.get("start_unix_ns")
    if start:
        add("date", time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(int(start) / 1e9)))
    add("host", md.get("hostname"))
    cpu = md.get("cpu_model")
    add("CPU", f"{md.get('cpus', '?')} × {cpu}" if cpu else md.get("cpus"))
    add("Python", " ".join(str(x) for x in (md.get("python_implementation"), md.get("python"))
                           if x) or None)
    add("OpenSSL", md.get("openssl"))
    add("kernel", md.get("kernel"))
    add("clock source", md.get("clock_source"))
    if md.get("quick") is not None:
        add("quick", "yes" if md.get("quick") else "no")
    add("repeats", md.get("repeat"))
    sl = md.get("slices")
    if isinstance(sl, dict) and sl:
        vals = set(sl.values())
        add("slices", next(iter(vals)) if len(vals) == 1 else
            ", ".join(f"{k} {v}" for k, v in sl.items()))
    add("scale", md.get("scale"))
    add("requests per round", md.get("n"))
    add("min requests per round", md.get("min_requests"))
    pin = md.get("pinning")
    if isinstance(pin, dict):
        add("pinning", f"server on CPU {pin.get('server_cpus')}, workers on CPU "
                       f"{pin.get('worker_cpu')}")
    pl = md.get("placement")
    if isinstance(pl, dict) and "mode" in pl:  # one placement for the whole record
        add("placement", _placement(pl))
    elif isinstance(pl, dict):
        for sc, p in pl.items():
            add(f"placement: {sc}", _placement(p))
    wk = md.get("wakeup_ns")
    if isinstance(wk, dict):
        add("wake-up cost", wakeup_text(wk) or None)
    si = md.get("speed_index")
    if isinstance(si, dict):
        add("speed index", speed_text(md) or None)
    elif si is not None:
        add("speed index", si)
    env = md.get("environment_changes")
    if isinstance(env, dict) and env:
        add("environment", "; ".join(f"{k}: {v}" for k, v in env.items()))
    if md.get("duration_s") is not None:
        add("took", f"{float(md['duration_s']):.1f} s")
    if md.get("interrupted"):
        add("interrupted", "yes: partial results")
    vers = md.get("client_versions")
    if isinstance(vers, dict) and vers:
        add("clients", "; ".join(k if str(k).endswith(f" {v}") else f"{k} {v}"
                                 for k, v in vers.items() if v))
    return rows


def noise_lines(md: dict[str, Any]) -> list[str]:
    """One 'machine noise' line per scenario of a compare run (none for other records)."""
    noise = md.get("noise")
    if not isinstance(noise, dict):
        return []
    out = []
    for sc, s in noise.items():
        if isinstance(s, dict):
            out.append(f"{sc}: {_noise.summary_line(s)}")
    return out


def _meta_section(obj: Any) -> str:
    md = _metadata(obj)
    parts = ["<h2>Machine and run</h2>",
             table(["", ""], settings_rows(md), cls="meta")]
    lines = noise_lines(md)
    if lines:
        parts.append('<ul class="notes">' + "".join(
            f'<li class="{"warn" if "treat with care" in ln else ""}">{e(ln)}</li>'
            for ln in lines) + "</ul>")
    return "\n".join(parts)


# --------------------------------------------------------------------------
# tables and figures


_ID = re.compile(r'\bid="([^"]+)"')


def inline_svg(svg: str, prefix: str) -> str:
    """A matplotlib SVG fit for inlining: no XML prolog, no RDF metadata or namespace
    URLs (an HTML parser needs neither), ids prefixed so several figures never clash."""
    i = svg.find("<svg")
    svg = svg[i:] if i >= 0 else svg
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    svg = _ID.sub(lambda m: f'id="{prefix}{m.group(1)}"', svg)
    svg = re.sub(r'(xlink:href|href)="#', rf'\1="#{prefix}', svg)
    return re.sub(r"url\(#", f"url(#{prefix}", svg)


_KIND_TITLES = {
    "percentiles": "Latency by percentile",
    "cdf": "Latency distribution",
    "bars": "Cost per request",
    "throughput": "Throughput over time",
    "workers": "Throughput per worker",
    "concurrency": "Latency and throughput vs concurrency",
}


def figures(obj: Any, prefix: str = "f") -> list[tuple[str, str]]:
    """(kind, inline SVG or an HTML note saying why there is none) per applicable plot."""
    try:
        from . import plot as PL

        kinds = PL.applicable_kinds(obj)
        PL.figure_class()
    except ImportError as exc:
        return [("", f'<p class="caption">No figures: {e(exc)}</p>')]
    out = []
    for k, kind in enumerate(kinds):
        try:
            fig = PL.plot(obj, kind)
        except ValueError as exc:
            out.append((kind, f'<p class="caption">{e(_KIND_TITLES.get(kind, kind))}: '
                              f"not drawn ({e(exc)})</p>"))
            continue
        import matplotlib

        # fixed clip-path ids: the same result gives the same page, byte for byte
        with matplotlib.rc_context({"svg.hashsalt": "httpbench"}):
            buf = PL.figure_svg(fig)
        out.append((kind, inline_svg(buf, f"{prefix}{k}-")))
    return out


def _figures_section(obj: Any, prefix: str = "f") -> str:
    parts = ["<h2>Figures</h2>"]
    for kind, svg in figures(obj, prefix):
        if svg.startswith("<svg"):
            parts.append(f'<figure data-kind="{e(kind)}">{svg}<figcaption class="caption">'
                         f"{e(_KIND_TITLES.get(kind, kind))}</figcaption></figure>")
        else:
            parts.append(svg)
    return "\n".join(parts)


def _title(obj: Any) -> str:
    if isinstance(obj, ResultSet):
        clients = len(obj.clients)
        return (f"httpbench compare: {clients} client{'s' if clients != 1 else ''}, "
                f"{len(obj.scenarios)} scenario{'s' if len(obj.scenarios) != 1 else ''}")
    if isinstance(obj, BenchResult):
        return f"httpbench load test: {obj.method} {obj.url}"
    if isinstance(obj, MeasureResult):
        return f"httpbench measure: {obj.label}"
    return "httpbench results"


def result_fragment(obj: Any, tables: str, *, plots: bool = True, heading: bool = True,
                    prefix: str = "f") -> str:
    """The report's content (``tables``, the HTML of the result's tables; figures;
    machine and run) without the page around it."""
    parts = []
    if heading:
        parts.append(f"<h1>{e(_title(obj))}</h1>")
        stamp = _when(obj)
        if stamp:
            parts.append(f'<p class="stamp">{e(stamp)}</p>')
    parts.append("<h2>Results</h2>")
    parts.append(tables)
    if plots:
        parts.append(_figures_section(obj, prefix))
    parts.append(_meta_section(obj))
    return f'<div class="httpbench-report">\n{"".join(p + chr(10) for p in parts)}</div>'


def title(obj: Any) -> str:
    """The page title of a result."""
    return _title(obj)


# --------------------------------------------------------------------------
# diff of two runs


def diff_fragment(base: Any, cur: Any, cmp: Comparison, tables: tuple[str, str], *,
                  names: tuple[str, str] = ("baseline", "current"), plots: bool = True,
                  prefix: str = "d") -> str:
    """Two runs side by side: what differs in their settings, the notes about them,
    the verdicts, then each run's own ``tables`` (HTML) and figures."""
    from ._baseline import DIFF_METRICS, change_text
    from ._tables import median_cell

    parts = [f"<h1>httpbench diff: {e(names[0])} → {e(names[1])}</h1>"]
    ma, mb = dict(settings_rows(_metadata(base))), dict(settings_rows(_metadata(cur)))
    keys = list(dict.fromkeys([*ma, *mb]))
    rows = [(k, ma.get(k, "—"), mb.get(k, "—")) for k in keys]
    classes = ["differs" if a != b and k not in ("date", "took") else "" for k, a, b in rows]
    parts.append("<h2>Settings side by side</h2>")
    parts.append('<p class="caption">Highlighted rows differ between the two runs.</p>')
    parts.append(table(["", names[0], names[1]], rows, cls="meta", row_classes=classes))
    if cmp.notes:
        parts.append('<h2>Unlike runs: read the verdicts with these in mind</h2>'
                     '<ul class="notes">'
                     + "".join(f'<li class="warn">{e(n)}</li>' for n in cmp.notes) + "</ul>")
    parts.append("<h2>Changes</h2>")
    if cmp.changes:
        head = ["client", "scenario", "metric", names[0], names[1], "change", "p", "verdict"]
        body = []
        for c in cmp.changes:
            kind = DIFF_METRICS[c.metric][1]
            cls = ("verdict-marked" if c.significant and c.caution else
                   "verdict-worse" if c.significant and c.improved is False else
                   "verdict-better" if c.significant and c.improved else "")
            v = c.shown_verdict
            verdict = f'<span class="{cls}">{e(v)}</span>' if cls else e(v)
            body.append([c.client, c.scenario, c.title, median_cell(c.baseline, kind),
                         median_cell(c.current, kind), change_text(c.change),
                         "—" if c.p_value != c.p_value else f"{c.p_value:.3f}", verdict])
        parts.append(table(head, body, raw_last=True))
    else:
        parts.append("<p>(nothing in common to compare)</p>")
    parts.append(f"<p>{e(cmp.summary)}</p>")
    for what, ks in (("only in " + names[0], cmp.only_baseline),
                     ("only in " + names[1], cmp.only_current)):
        if ks:
            parts.append(f"<p>{e(what)}: {e(', '.join(f'{c}/{s}' for c, s in ks))}</p>")
    parts.append('<div class="side">')
    for i, (name, obj) in enumerate(((names[0], base), (names[1], cur))):
        parts.append(f"<div><h2>{e(name)}</h2>" + tables[i]
                     + (_figures_section(obj, prefix=f"{prefix}{i}f") if plots else "") + "</div>")
    parts.append("</div>")
    return f'<div class="httpbench-report">\n{"".join(p + chr(10) for p in parts)}</div>'
