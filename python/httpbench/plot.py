"""Figures (matplotlib, imported lazily, headless-safe).

Every function returns a ``matplotlib.figure.Figure`` built without pyplot, so
no GUI backend or global state is touched (works on a server without a
display, in tests and in Jupyter, where a Figure displays itself).

* :func:`plot_percentiles` - HdrHistogram-style latency percentile spectrum
  (x: percentile on a log ``1/(1-p)`` axis from 0 to 99.999%).
* :func:`plot_cdf` - latency distribution (CDF, log time axis).
* :func:`plot_bars` - per-scenario bars per client: CPU µs/request,
  allocations/request, KiB allocated/request; whiskers span the repeats.
* :func:`plot_throughput` - bench()'s per-second series.
* :func:`plot_workers` - a distributed run's throughput per worker and merged.
* :func:`plot_latency_vs_concurrency` - p50/p99 and req/s over a concurrency sweep.

``plot(obj, kind=...)`` dispatches; ``save_plots(obj, dir)`` writes PNG + SVG.
"""

from __future__ import annotations

import io
import math
import os
import statistics
import sys
import time
import types
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

from . import _units as U
from ._hist import hist_count, percentile_spectrum
from ._results import BenchResult, MeasureResult, ResultSet
from ._rows import entries, result_rows

__all__ = [
    "KINDS",
    "figure_svg",
    "plot",
    "plot_bars",
    "plot_cdf",
    "plot_latency_vs_concurrency",
    "plot_percentiles",
    "plot_throughput",
    "plot_workers",
    "run_stamp",
    "save_plots",
    "throughput_points",
]

KINDS = ("percentiles", "cdf", "bars", "throughput", "workers", "concurrency")
_MAX_X = 1e5  # 99.999th percentile on the 1/(1-p) axis
_WIDE = 10.0  # values spanning more than this factor get a log axis


def _log_if_wide(ax: Any, values: Iterable[float], axis: str = "y") -> bool:
    """A log scale when the positive values span more than 10x (else a fast client's
    bar or line sits flat on the zero line next to a slow one); limits keep every
    value visible above the axis."""
    vals = [v for v in values if v is not None and not math.isnan(v) and v > 0]
    if len(vals) < 2 or max(vals) <= _WIDE * min(vals):
        return False
    if axis == "y":
        ax.set_yscale("log")
        ax.set_ylim(min(vals) / 2.5, max(vals) * 3.0)
        ax.yaxis.set_major_formatter(_plain_formatter())
    else:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(_plain_formatter())
    return True


def _plain_formatter() -> Any:
    """1, 10, 100, 1000 rather than 10^0 .. 10^3 on log axes."""
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _pos: f"{v:g}")


def _short_labels(pairs: Sequence[tuple[str, Any]]) -> list[str]:
    """Legend labels: a bench run labelled only by its URL shows its path (the host is in
    the title), and runs that would read alike get their concurrency or repeat added."""
    out = []
    for label, rec in pairs:
        if isinstance(rec, BenchResult) and label.startswith(rec.url):
            u = urlsplit(rec.url)
            short = (u.path or "/") + (f"?{u.query}" if u.query else "")
            if rec.method != "GET":
                short = f"{rec.method} {short}"
            label = short + label[len(rec.url):]
        out.append(label)
    for extra in (lambda r: f" -c{r.config.concurrency}" if isinstance(r, BenchResult) else "",
                  None):
        dup = {lab for lab in out if out.count(lab) > 1}
        if not dup:
            break
        seen: dict[str, int] = {}
        for i, (lab, (_, rec)) in enumerate(zip(list(out), pairs, strict=True)):
            if lab in dup:
                seen[lab] = seen.get(lab, 0) + 1
                out[i] = lab + (extra(rec) if extra else f" #{seen[lab]}")
    return out


_FIGURE_CLASS: Any = None


# figure_class and applicable_kinds serve the HTML report too; not in __all__, not documented
def figure_class() -> Any:
    """A Figure subclass that shows itself in Jupyter without pyplot (``_repr_png_``);
    ImportError naming the pip command when matplotlib is not installed."""
    global _FIGURE_CLASS
    if _FIGURE_CLASS is None:
        try:
            from matplotlib.figure import Figure
        except ImportError:
            raise ImportError(
                "plots need matplotlib: pip install matplotlib (or pip install 'httpbench[plot]')"
            ) from None

        class HttpbenchFigure(Figure):
            """A matplotlib Figure; renders as PNG in Jupyter even when pyplot is unused."""

            def _repr_png_(self) -> bytes:
                buf = io.BytesIO()
                self.savefig(buf, format="png", dpi=100)
                return buf.getvalue()

        _FIGURE_CLASS = HttpbenchFigure
    return _FIGURE_CLASS


def run_stamp(obj: Any) -> str:
    """'2026-12-04 17:05 UTC · host': when and where ``obj`` was measured ('' if unknown)."""
    md: dict[str, Any] = {}
    start = 0
    if isinstance(obj, ResultSet):
        md = obj.metadata
        start = int(md.get("started_unix_ns") or 0)
        if not start:
            start = min((r.start_unix_ns for r in obj.results.values() if r.start_unix_ns),
                        default=0)
    elif isinstance(obj, (BenchResult, MeasureResult)):
        md, start = obj.metadata, obj.start_unix_ns
    elif isinstance(obj, (list, tuple)) and obj:
        return run_stamp(obj[0])
    when = ""
    if start:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(start / 1e9))
    host = str(md.get("hostname") or "")
    return " · ".join(x for x in (when, host) if x)


def _stamped(fig: Any, obj: Any) -> Any:
    """The run's date and host under the figure, so a shared image says what it shows."""
    stamp = run_stamp(obj)
    if stamp:
        fig.supxlabel(stamp, x=0.995, ha="right", fontsize=7, color="0.4")
    return fig


def _figure(figsize: tuple[float, float], nrows: int = 1, ncols: int = 1) -> tuple[Any, Any]:
    fig = figure_class()(figsize=figsize, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def _merge(hists: Sequence[Any]) -> Any:
    out = hists[0].copy()
    for h in hists[1:]:
        out.merge(h)
    return out


def _latency_series(obj: Any, which: str = "latency") -> list[tuple[str, Any]]:
    """(label, histogram) per series; repeats of a (client, scenario) are merged.

    Constant-rate bench results also contribute their uncorrected histogram.
    """
    groups: dict[tuple[str, str], list[Any]] = {}
    for c, s, _i, r in entries(obj):
        groups.setdefault((c, s), []).append(r)
    scenarios = {s for _, s in groups}
    short = dict(zip(groups, _short_labels([(c, recs[0]) for (c, _s), recs in groups.items()]),
                     strict=True))
    out: list[tuple[str, Any]] = []
    for (c, s), recs in groups.items():
        label = short[(c, s)] if len(scenarios) <= 1 else f"{short[(c, s)]} / {s}"
        hs = [getattr(r, which, None) for r in recs]
        hs = [h for h in hs if h is not None and hist_count(h)]
        if not hs:
            continue
        us = []
        if which == "latency" and all(isinstance(r, BenchResult) and r.config.rate for r in recs):
            us = [r.latency_uncorrected for r in recs
                  if r.latency_uncorrected is not None and hist_count(r.latency_uncorrected)]
        out.append((f"{label} (corrected)" if us else label, _merge(hs)))
        if us:
            out.append((f"{label} (uncorrected)", _merge(us)))
    return out


def _time_axis(values_ns: Iterable[float]) -> tuple[str, float]:
    vals = [v for v in values_ns if v is not None and not math.isnan(v) and v > 0]
    return U.duration_unit(max(vals) if vals else 1.0)


def _title(obj: Any, what: str) -> str:
    if isinstance(obj, BenchResult):
        h2 = f" ({obj.config.h2_shape})" if obj.config.h2_shape else ""
        return f"{what}: {obj.method} {obj.url}{h2}"
    if isinstance(obj, MeasureResult):
        return f"{what}: {obj.label}"
    return what


def _panels(obj: Any) -> list[tuple[str | None, Any]]:
    """One panel per scenario for a multi-scenario ResultSet, else one panel."""
    if isinstance(obj, ResultSet) and len(obj.scenarios) > 1:
        return [(sc, obj.select(scenario=sc)) for sc in obj.scenarios]
    return [(None, obj)]


def _grid(obj: Any, which: str, figsize: tuple[float, float]) -> tuple[Any, list]:
    panels = [(t, _latency_series(o, which)) for t, o in _panels(obj)]
    panels = [(t, s) for t, s in panels if s]
    if not panels:
        raise ValueError("nothing to plot: no latency samples")
    ncols = 1 if len(panels) == 1 else 2
    nrows = math.ceil(len(panels) / ncols)
    w, h = figsize
    fig, axes = _figure((w * (1 if ncols == 1 else 1.6), h * (1 if nrows == 1 else 0.8 * nrows)),
                        nrows, ncols)
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    return fig, list(zip(flat, panels, strict=False))


def _colours(panels: list[tuple[Any, tuple[str | None, list[tuple[str, Any]]]]]) -> dict[str, str]:
    """One colour per series label across all panels (a client keeps its colour)."""
    labels = dict.fromkeys(lab for _ax, (_t, series) in panels for lab, _h in series)
    base = dict.fromkeys(lab.removesuffix(" (uncorrected)").removesuffix(" (corrected)")
                         for lab in labels)
    index = {b: i for i, b in enumerate(base)}
    return {lab: f"C{index[lab.removesuffix(' (uncorrected)').removesuffix(' (corrected)')] % 10}"
            for lab in labels}


def _shared_legend(fig: Any, panels: list[Any], colours: dict[str, str]) -> None:
    """Several panels: one legend above them all, never over a line."""
    if len(panels) == 1:
        return
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, linestyle="--" if lab.endswith("(uncorrected)") else "-",
                      label=lab) for lab, c in colours.items()]
    try:
        fig.legend(handles=handles, loc="outside lower center", fontsize="small",
                   ncol=min(5, len(handles)))
    except ValueError:  # matplotlib < 3.7 has no "outside" placement
        panels[0][0].legend(handles=handles, fontsize="small")


def _draw_percentiles(ax: Any, series: list[tuple[str, Any]],
                      colours: dict[str, str] | None = None, legend: bool = True) -> None:
    unit, factor = _time_axis(h.max for _, h in series)
    xmax = 10.0
    for label, h in series:
        spec = [(v, p) for v, p, _ in percentile_spectrum(h, ticks_per_half=10) if p < 100.0]
        n = hist_count(h)
        xs = [1.0 / (1.0 - p / 100.0) for _, p in spec]
        ys = [v / factor for v, _ in spec]
        # close the line at the max, placed at the percentile of the last sample
        xs.append(float(max(n, xs[-1] if xs else 1.0)))
        ys.append(h.max / factor)
        xs = [min(x, _MAX_X) for x in xs]
        xmax = max(xmax, xs[-1])
        style = "--" if label.endswith("(uncorrected)") else "-"
        ax.plot(xs, ys, style, label=label, linewidth=1.6, drawstyle="steps-post",
                color=(colours or {}).get(label))
    ax.set_xscale("log")
    # ticks up to the first decade at or beyond the last sample (at least 99%)
    top = next((t for t in (100, 1e3, 1e4, 1e5) if t >= xmax * 0.999), 1e5)
    ticks = [t for t in (1, 10, 100, 1e3, 1e4, 1e5) if t <= top]
    ax.set_xticks(ticks)
    ax.set_xticklabels(["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"][: len(ticks)])
    ax.set_xlim(1, max(ticks))
    ends = [h.percentile(0) / factor for _, h in series] + [h.max / factor for _, h in series]
    log = _log_if_wide(ax, ends)
    if not log:
        ax.set_ylim(bottom=0)
    ax.set_xlabel("percentile")
    ax.set_ylabel(f"latency ({unit})")
    ax.grid(True, which="major", alpha=0.3)
    if legend:  # a corner the lines leave free (a fixed corner covered some lines)
        ax.legend(loc="best", fontsize="small")


def plot_percentiles(obj: Any, *, which: str = "latency", title: str | None = None,
                     figsize: tuple[float, float] = (8.0, 4.5)) -> Any:
    """Latency by percentile, HdrHistogram style: x = 1/(1-p) on a log axis
    (0%, 90%, 99%, ... 99.999%), y = latency. One line per client (repeats merged),
    one panel per scenario; constant-rate bench runs also draw the uncorrected
    latency, dashed.
    """
    fig, panels = _grid(obj, which, figsize)
    colours = _colours(panels)
    _shared_legend(fig, panels, colours)
    for ax, (ptitle, series) in panels:
        _draw_percentiles(ax, series, colours, legend=len(panels) == 1)
        ax.set_title(ptitle if ptitle is not None
                     else (title or _title(obj, "Latency by percentile")))
    if len(panels) > 1:
        fig.suptitle(title or "Latency by percentile")
    return _stamped(fig, obj)


def _draw_cdf(ax: Any, series: list[tuple[str, Any]], colours: dict[str, str] | None = None,
              legend: bool = True) -> None:
    unit, factor = _time_axis(h.max for _, h in series)
    for label, h in series:
        n = hist_count(h)
        xs, ys, acc = [], [], 0
        for _lo, hi, c in h.buckets():
            acc += c
            xs.append(max(hi, 1) / factor)
            ys.append(acc / n)
        style = "--" if label.endswith("(uncorrected)") else "-"
        ax.plot(xs, ys, style, label=label, drawstyle="steps-post", linewidth=1.6,
                color=(colours or {}).get(label))
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(f"latency ({unit}, log scale)")
    ax.set_ylabel("fraction of requests ≤ latency")
    ax.grid(True, which="both", alpha=0.3)
    if legend:
        ax.legend(loc="lower right", fontsize="small")


def plot_cdf(obj: Any, *, which: str = "latency", title: str | None = None,
             figsize: tuple[float, float] = (8.0, 4.5)) -> Any:
    """Latency distribution: fraction of requests completed within x (log x axis),
    one panel per scenario."""
    fig, panels = _grid(obj, which, figsize)
    colours = _colours(panels)
    _shared_legend(fig, panels, colours)
    for ax, (ptitle, series) in panels:
        _draw_cdf(ax, series, colours, legend=len(panels) == 1)
        ax.set_title(ptitle if ptitle is not None
                     else (title or _title(obj, "Latency distribution (CDF)")))
    if len(panels) > 1:
        fig.suptitle(title or "Latency distribution (CDF)")
    return _stamped(fig, obj)


# (row key, axis title, scale, unit label)
_BAR_METRICS = {
    "cpu_ns_per_request": ("CPU per request", 1e3, "µs"),
    "allocs_per_request": ("Python allocations per request", 1.0, "count"),
    "alloc_bytes_per_request": ("Allocated per request", 1024.0, "KiB"),
    "native_allocs_per_request": ("Native mallocs per request", 1.0, "count"),
    "gc_per_10k": ("GC collections per 10k requests", 1.0, "count"),
    "instructions_per_request": ("Instructions per request (callgrind)", 1.0, "count"),
    "syscalls_per_request": ("System calls per request (strace)", 1.0, "count"),
    "p50_ns": ("Median latency", 1e3, "µs"),
    "p99_ns": ("p99 latency", 1e3, "µs"),
    "rps": ("Requests per second", 1.0, "req/s"),
}


def plot_bars(obj: Any, *, metrics: Sequence[str] = ("cpu_ns_per_request", "allocs_per_request",
                                                    "alloc_bytes_per_request"),
              title: str | None = None, figsize: tuple[float, float] | None = None) -> Any:
    """Grouped bars, one panel per metric: scenarios on x, a bar per client at the
    median over repeats, whiskers from the smallest to the largest repeat.

    A scenario's group holds only the clients that ran it (no empty slots for a
    skipped one); a client that ran but has no value for a metric (curl has no
    Python allocations) gets "n/a" in its slot, never a silent gap.
    """
    rows = result_rows(obj)
    for m in metrics:
        if m not in _BAR_METRICS:
            raise ValueError(f"unknown bar metric {m!r}; one of {list(_BAR_METRICS)}")
    metrics = [m for m in metrics if any(not _nan(r[m]) for r in rows)]
    if not metrics:
        raise ValueError("nothing to plot: none of the metrics was measured")
    clients = list(dict.fromkeys(r["client"] for r in rows))
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    # the clients of each scenario's group, in the run's client order
    group = {s: [c for c in clients if any(r["client"] == c and r["scenario"] == s
                                           for r in rows)] for s in scenarios}
    slots = max(len(g) for g in group.values())
    w = figsize or (max(5.0, 1.6 + 1.2 * len(scenarios) * max(1, slots) / 2) * 1.0,
                    2.9 * len(metrics))
    fig, axes = _figure(w, nrows=len(metrics))
    width = 0.8 / max(1, slots)
    colours = {c: f"C{i % 10}" for i, c in enumerate(clients)}
    for mi, m in enumerate(metrics):
        name, scale, unit = _BAR_METRICS[m]
        ax = axes[mi][0]
        meds: list[float] = []
        missing: list[float] = []  # x of a client's slot with no value
        for c in clients:
            xs, hs, lo, hi = [], [], [], []
            for si, s in enumerate(scenarios):
                if c not in group[s]:
                    continue
                x = si + (group[s].index(c) - (len(group[s]) - 1) / 2) * width
                vals = [r[m] / scale for r in rows
                        if r["client"] == c and r["scenario"] == s and not _nan(r[m])]
                if not vals:
                    missing.append(x)
                    continue
                med = statistics.median(vals)
                meds.append(med)
                xs.append(x)
                hs.append(med)
                lo.append(med - min(vals))
                hi.append(max(vals) - med)
            # an empty bar keeps the client in the legend of a panel it has no value in
            ax.bar(xs, hs, width * 0.92, yerr=[lo, hi] if xs else None, capsize=3, label=c,
                   color=colours[c])
            for x, hgt, up in zip(xs, hs, hi, strict=True):  # value above the whisker
                ax.annotate(U.format_count(hgt), (x, hgt + up), xytext=(0, 2),
                            textcoords="offset points", ha="center", va="bottom",
                            fontsize=7)
        for x in missing:
            ax.annotate("n/a", (x, 0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7,
                        color="0.35", rotation=90)
        ax.set_xticks(range(len(scenarios)))
        ax.set_xticklabels([s or "(run)" for s in scenarios])
        ax.set_ylabel(unit)
        if not _log_if_wide(ax, meds):
            ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.15)  # room for the value labels
        ax.set_title(name)
        ax.grid(True, axis="y", alpha=0.3)
    # one legend for all panels, above them (never over a bar)
    handles, labels = axes[0][0].get_legend_handles_labels()
    try:
        fig.legend(handles, labels, loc="outside upper center", fontsize="small",
                   ncol=min(5, len(clients)))
    except ValueError:  # matplotlib < 3.7 has no "outside" placement
        axes[0][0].legend(handles, labels, fontsize="small", ncol=min(5, len(clients)))
    if title:
        fig.suptitle(title)
    return _stamped(fig, obj)


def _nan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _bench_results(obj: Any) -> list[tuple[str, BenchResult]]:
    runs = [(c, s, i, r) for c, s, i, r in entries(obj) if isinstance(r, BenchResult)]
    short = _short_labels([(c, r) for c, _s, _i, r in runs])
    out = []
    for lab, (_c, s, i, r) in zip(short, runs, strict=True):
        label = lab if not s else f"{lab} / {s}"
        out.append((label + (f" #{i}" if i else ""), r))
    return out


def throughput_points(r: BenchResult) -> tuple[list[float], list[float], list[float], str]:
    """(bucket end times s, 2xx/s, failed/s, note) of a run's per-second series.

    Each bucket's rate is over its real length: the last one ends with the run,
    so a 2.5 s run's third bucket is a rate over 0.5 s, not its count over 1 s.
    A last bucket under a quarter of the interval is dropped (too few requests
    for a rate) and the note says so.
    """
    step = r.series_interval_ns / 1e9
    k = len(r.series_responses)
    dur = r.duration_ns / 1e9
    xs, ok, bad = [], [], []
    note = ""
    for i in range(k):
        end = min((i + 1) * step, dur) if i == k - 1 and dur > i * step else (i + 1) * step
        length = end - i * step
        if i == k - 1 and k > 1 and length < 0.25 * step:
            note = f"last {length:.2f} s dropped: too short for a rate"
            break
        xs.append(end)
        ok.append(r.series_responses[i] / length)
        errs = r.series_errors[i] if i < len(r.series_errors) else 0
        bad.append(errs / length)
    return xs, ok, bad, note


def plot_throughput(obj: Any, *, title: str | None = None,
                    figsize: tuple[float, float] = (8.0, 4.0)) -> Any:
    """Successful and failed requests per second over the run (bench's series), each
    bucket a rate over its real length; a run shorter than two buckets is one
    labelled rate (a bar), not a time series."""
    runs = [(lab, r) for lab, r in _bench_results(obj) if r.series_responses]
    if not runs:
        raise ValueError("nothing to plot: no bench() result with a per-second series")
    fig, axes = _figure(figsize)
    ax = axes[0][0]
    step = min(r.series_interval_ns for _, r in runs) / 1e9
    if all(r.duration_ns / 1e9 < 2 * step for _, r in runs):
        # too short for a series: one rate per run, over the whole run
        labels = [lab for lab, _ in runs]
        rates = [r.rps for _, r in runs]
        bars = ax.bar(range(len(runs)), rates, 0.6)
        for b, (_lab, r) in zip(bars, runs, strict=True):
            ax.annotate(f"{U.format_count(r.rps)} req/s\n{r.responses + r.errors:,} requests "
                        f"in {U.format_duration(r.duration_ns)}",
                        (b.get_x() + b.get_width() / 2, b.get_height()), xytext=(0, 3),
                        textcoords="offset points", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(runs)))
        ax.set_xticklabels(labels)
        ax.set_ylim(0, max(rates + [1.0]) * 1.3)
        ax.set_ylabel("requests per second (2xx, whole run)")
        ax.set_xlabel(f"run shorter than {2 * step:g} s: one rate, not a time series")
    else:
        notes = []
        for label, r in runs:
            xs, ok, bad, note = throughput_points(r)
            ax.plot(xs, ok, marker=".", label=f"{label} 2xx")
            if any(bad):
                ax.plot(xs, bad, marker="x", linestyle=":", label=f"{label} failed")
            if note:
                notes.append(note if len(runs) == 1 else f"{label}: {note}")
        ax.set_xlim(0, max(r.duration_ns / 1e9 for _, r in runs))
        ax.set_xlabel("time since start (s)" + ("; " + "; ".join(notes) if notes else ""))
        ax.set_ylabel("requests per second")
        ax.legend(fontsize="small")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.set_title(title or _title(obj, "Throughput over time"))
    return _stamped(fig, obj)


def _worker_label(w: Any) -> str:
    where = w.host or w.worker
    return f"{where} shard {w.shard}" + ("" if w.status == "ok" else f" ({w.status})")


def plot_workers(obj: Any, *, title: str | None = None,
                 figsize: tuple[float, float] = (8.0, 4.0)) -> Any:
    """A distributed run's successful requests per second: one line per worker (its
    series placed on the run's wall-clock seconds, as in the merge) and the merged
    total, bold; one panel per distributed bench() result."""
    runs = [(lab, r) for lab, r in _bench_results(obj)
            if any(w.series_responses for w in r.workers)]
    if not runs:
        raise ValueError("nothing to plot: no distributed bench() result with per-worker series")
    fig, axes = _figure((figsize[0], figsize[1] * (1 if len(runs) == 1 else 0.8 * len(runs))),
                        nrows=len(runs))
    for (label, r), row in zip(runs, axes, strict=True):
        ax = row[0]
        step = r.series_interval_ns / 1e9
        iv = max(1, r.series_interval_ns)
        for w in r.workers:
            if not w.series_responses:
                continue
            # the merge places a shard's series by its start on the scheduler's clock
            shift = max(0, (w.start_unix_ns - r.start_unix_ns + iv // 2) // iv)
            xs = [(shift + i + 1) * step for i in range(len(w.series_responses))]
            ax.plot(xs, [v / step for v in w.series_responses], marker=".", linewidth=1.2,
                    label=_worker_label(w))
        if r.series_responses:
            xs = [(i + 1) * step for i in range(len(r.series_responses))]
            ax.plot(xs, [v / step for v in r.series_responses], color="black", linewidth=2.4,
                    label="total")
        ax.set_xlabel("time since start (s)")
        ax.set_ylabel("requests per second")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.set_title(title or (_title(r, "Throughput per worker") if len(runs) == 1
                               else f"Throughput per worker: {label}"))
        ax.legend(fontsize="small")
    return _stamped(fig, obj)


def plot_latency_vs_concurrency(obj: Any, *, title: str | None = None,
                                figsize: tuple[float, float] = (8.0, 4.5)) -> Any:
    """p50 and p99 latency (left axis) and req/s (right axis) against concurrency,
    one point per bench() run of a sweep (runs at the same concurrency averaged)."""
    runs = [r for _, r in _bench_results(obj)]
    if len({r.config.concurrency for r in runs}) < 2:
        raise ValueError("latency vs concurrency needs bench() results at >= 2 concurrencies")
    by: dict[int, list[BenchResult]] = {}
    for r in runs:
        by.setdefault(r.config.concurrency, []).append(r)
    cs = sorted(by)
    p50 = [statistics.median(r.p50 for r in by[c]) for c in cs]
    p99 = [statistics.median(r.p99 for r in by[c]) for c in cs]
    rps = [statistics.median(r.rps for r in by[c]) for c in cs]
    unit, factor = _time_axis(p99)
    fig, axes = _figure(figsize)
    ax = axes[0][0]
    ax.plot(cs, [v / factor for v in p50], marker="o", label="p50 latency")
    ax.plot(cs, [v / factor for v in p99], marker="s", label="p99 latency")
    ax.set_xscale("log", base=2)
    ax.set_xticks(cs)
    ax.set_xticklabels([str(c) for c in cs])
    ax.set_xlabel("concurrency (connections)")
    ax.set_ylabel(f"latency ({unit})")
    if not _log_if_wide(ax, [v / factor for v in p50 + p99]):
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax2 = ax.twinx()
    ax2.plot(cs, rps, marker="^", color="tab:green", linestyle="--", label="req/s")
    ax2.set_ylabel("requests per second")
    ax2.set_ylim(bottom=0)
    lines = ax.get_lines() + ax2.get_lines()
    ax.legend(lines, [ln.get_label() for ln in lines], loc="upper left", fontsize="small")
    ax.set_title(title or "Latency and throughput vs concurrency")
    return _stamped(fig, obj)


_DISPATCH = {
    "percentiles": plot_percentiles,
    "spectrum": plot_percentiles,
    "cdf": plot_cdf,
    "bars": plot_bars,
    "throughput": plot_throughput,
    "workers": plot_workers,
    "concurrency": plot_latency_vs_concurrency,
}


def plot(obj: Any, kind: str = "percentiles", **kwargs: Any) -> Any:
    """A Figure of ``obj`` (record, list of records or ResultSet); ``kind`` is one of
    percentiles (alias spectrum), cdf, bars, throughput, workers, concurrency."""
    fn = _DISPATCH.get(kind)
    if fn is None:
        raise ValueError(f"unknown plot kind {kind!r}; one of {KINDS}")
    return fn(obj, **kwargs)


def figure_svg(fig: Any) -> str:
    """The figure as an SVG document string (for inline HTML)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    text = buf.getvalue()
    i = text.find("<svg")
    return text[i:] if i >= 0 else text


def applicable_kinds(obj: Any) -> list[str]:
    """The plot kinds (of :data:`KINDS`) that ``obj``'s data can draw."""
    recs = [r for *_, r in entries(obj)]
    kinds = ["percentiles", "cdf"]
    if any(isinstance(r, MeasureResult) for r in recs) or isinstance(obj, ResultSet):
        kinds.append("bars")
    benches = [r for r in recs if isinstance(r, BenchResult)]
    if any(r.series_responses for r in benches):
        kinds.append("throughput")
    if any(w.series_responses for r in benches for w in r.workers):
        kinds.append("workers")
    if len({r.config.concurrency for r in benches}) >= 2:
        kinds.append("concurrency")
    return kinds


def save_plots(obj: Any, directory: str | os.PathLike[str],
               formats: Sequence[str] = ("png", "svg"), dpi: int = 120) -> list[str]:
    """Write every figure that applies to ``obj`` as ``<kind>.<fmt>`` into ``directory``
    (created if needed); returns the paths written."""
    d = os.fspath(directory)
    os.makedirs(d, exist_ok=True)
    written = []
    for kind in applicable_kinds(obj):
        try:
            fig = plot(obj, kind)
        except ValueError:  # e.g. bars with no CPU/alloc data: skip, don't fail the batch
            continue
        for fmt in formats:
            path = os.path.join(d, f"{kind}.{fmt}")
            fig.savefig(path, dpi=dpi)
            written.append(path)
    return written


class _CallableModule(types.ModuleType):
    """``httpbench.plot(obj, kind=...)`` works as the README shows: the module calls
    :func:`plot`, and its functions stay reachable as attributes."""

    def __call__(self, obj: Any, kind: str = "percentiles", **kwargs: Any) -> Any:
        return plot(obj, kind, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
