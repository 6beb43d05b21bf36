"""Reports: tables (text / Markdown / JSON), the ab-style bench report, DataFrames,
baseline comparisons with significance, HdrHistogram export, and ``httpbench report``.

Every number in a DataFrame or a JSON report is in base units (ns, bytes, per
second); text and Markdown tables choose readable units (see ``_units``).
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import math
import os
import statistics
import struct
import sys
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import _units as U
from ._results import (
    BenchResult,
    MeasureResult,
    ResultSet,
    hist_count,
    hist_percentile,
    hist_stat,
)

__all__ = [
    "DATAFRAME_COLUMNS",
    "Change",
    "Comparison",
    "ab_report",
    "cli_main",
    "compare_results",
    "export_histogram",
    "export_hdr_log",
    "format_result",
    "hdr_hgrm",
    "hdr_interval_log",
    "mann_whitney_u",
    "mimebundle",
    "percentile_spectrum",
    "progress_bar",
    "interactive",
    "result_rows",
    "to_dataframe",
    "welch_t_test",
]

# --------------------------------------------------------------------------
# rows / DataFrame

# Column -> meaning (base units). One row per (client, scenario, repeat); a
# column that does not apply to a record kind is NaN (never a fake 0).
DATAFRAME_COLUMNS: dict[str, str] = {
    "client": "client name (ResultSet key; a lone record uses its label)",
    "scenario": "scenario name (ResultSet key; '' for a lone record)",
    "repeat": "repeat index, 0-based",
    "kind": "'measure' (MeasureResult) or 'bench' (BenchResult)",
    "label": "the record's label",
    "requests": "successful calls (measure) / 2xx responses (bench)",
    "errors": "failed calls (measure) / transport errors + non-2xx responses (bench)",
    "duration_ns": "measured wall time, ns",
    "rps": "successful requests (calls) per second",
    "min_ns": "fastest request, ns",
    "mean_ns": "mean latency, ns",
    "stddev_ns": "latency standard deviation, ns",
    "p50_ns": "median latency, ns",
    "p90_ns": "90th percentile latency, ns",
    "p99_ns": "99th percentile latency, ns",
    "p999_ns": "99.9th percentile latency, ns",
    "max_ns": "slowest request, ns",
    "cpu_ns_per_request": "CPU per request, ns (measure: process user+sys; bench: generator)",
    "thread_cpu_ns_per_request": "calling thread CPU per call, ns (measure)",
    "allocs_per_request": "Python heap allocations per call, all domains (measure)",
    "alloc_bytes_per_request": "Python heap bytes allocated per call (measure)",
    "alloc_raw": "allocations in the RAW domain over the run (measure)",
    "alloc_mem": "allocations in the MEM domain over the run (measure)",
    "alloc_obj": "allocations in the OBJ domain over the run (measure)",
    "alloc_net_bytes": "bytes still allocated after the run (retained) (measure)",
    "native_allocs_per_request": "malloc calls per call seen by the preloaded counter (measure)",
    "native_alloc_bytes_per_request": "malloc bytes per call (measure)",
    "gc_gen0": "generation-0 collections during the run (measure)",
    "gc_gen1": "generation-1 collections (measure)",
    "gc_gen2": "generation-2 (full) collections (measure)",
    "gc_per_10k": "GC collections (all generations) per 10,000 calls (measure)",
    "gc_pause_ns": "total time in GC, ns (measure)",
    "peak_rss_bytes": "peak resident set size, bytes (measure)",
    "overhead_ns_per_call": "calibrated harness overhead per call, ns (measure)",
    "concurrency": "requests in flight (bench connections / measure_async coroutines)",
    "threads": "load-generator threads (bench)",
    "rate": "target rate, requests/s, NaN for closed loop (bench)",
    "keepalive": "keep-alive on (bench)",
    "responses": "complete responses, any status (bench)",
    "non_2xx": "responses with a status outside 2xx (bench)",
    "transport_errors": "requests failed without a response (bench)",
    "error_rps": "failed requests per second (bench)",
    "bytes_in": "bytes received (bench)",
    "bytes_out": "bytes sent (bench)",
    "bytes_in_per_s": "bytes received per second (bench)",
    "connections": "connections opened (bench)",
    "reconnects": "reconnects (bench)",
    "in_flight_at_stop": "requests unanswered when the run stopped (bench)",
    "interrupted": "run stopped early (bench)",
    "p50_uncorrected_ns": "median latency from the actual send time, constant rate only (bench)",
    "p99_uncorrected_ns": "99th percentile from the actual send time (bench)",
    "start_unix_ns": "start time, Unix epoch ns",
    "notes": "anomaly note kinds concerning this (client, scenario), ';'-separated",
}

_NAN = math.nan


def _n(v: Any) -> float:
    return _NAN if v is None else float(v)


def _row(client: str, scenario: str, repeat: int, r: Any, notes: str = "") -> dict[str, Any]:
    row = dict.fromkeys(DATAFRAME_COLUMNS, _NAN)
    h = r.latency
    row.update(
        client=client, scenario=scenario, repeat=repeat, label=r.label, notes=notes,
        min_ns=hist_stat(h, "min"), mean_ns=hist_stat(h, "mean"),
        stddev_ns=hist_stat(h, "stddev"), max_ns=hist_stat(h, "max"),
        p50_ns=hist_percentile(h, 50), p90_ns=hist_percentile(h, 90),
        p99_ns=hist_percentile(h, 99), p999_ns=hist_percentile(h, 99.9),
        start_unix_ns=float(r.start_unix_ns), interrupted=False, keepalive=None,
    )
    if isinstance(r, MeasureResult):
        ac = r.alloc_counts or {}
        gc = r.gc_collections
        row.update(
            kind="measure", requests=float(r.calls), errors=float(r.errors),
            duration_ns=float(r.wall_ns), rps=r.calls_per_s,
            cpu_ns_per_request=r.cpu_ns_per_call,
            thread_cpu_ns_per_request=r.thread_cpu_ns_per_call,
            allocs_per_request=r.allocs_per_call,
            alloc_bytes_per_request=r.alloc_bytes_per_call,
            alloc_raw=_n(ac.get("raw")) if ac else _NAN,
            alloc_mem=_n(ac.get("mem")) if ac else _NAN,
            alloc_obj=_n(ac.get("obj")) if ac else _NAN,
            alloc_net_bytes=_n(r.alloc_net_bytes),
            native_allocs_per_request=r.native_allocs_per_call,
            native_alloc_bytes_per_request=(
                _NAN if r.native_alloc_bytes is None or not r.calls
                else r.native_alloc_bytes / r.calls),
            gc_gen0=_n(gc[0]) if gc else _NAN, gc_gen1=_n(gc[1]) if gc else _NAN,
            gc_gen2=_n(gc[2]) if gc else _NAN, gc_per_10k=r.gc_per_10k,
            gc_pause_ns=_n(r.gc_pause_ns), peak_rss_bytes=_n(r.peak_rss_bytes),
            overhead_ns_per_call=_n(r.overhead_ns_per_call),
            concurrency=float(r.concurrency),
        )
    else:
        c = r.config
        row.update(
            kind="bench", requests=float(r.successes), errors=float(r.failures),
            duration_ns=float(r.duration_ns), rps=r.rps,
            cpu_ns_per_request=r.cpu_ns_per_request,
            concurrency=float(c.concurrency), threads=float(c.threads), rate=_n(c.rate),
            keepalive=c.keepalive, responses=float(r.responses), non_2xx=float(r.non_2xx),
            transport_errors=float(r.errors), error_rps=r.error_rps,
            bytes_in=float(r.bytes_in), bytes_out=float(r.bytes_out),
            bytes_in_per_s=r.bytes_in_per_s, connections=float(r.connections),
            reconnects=float(r.reconnects), in_flight_at_stop=float(r.in_flight_at_stop),
            interrupted=r.interrupted,
            p50_uncorrected_ns=hist_percentile(r.latency_uncorrected, 50),
            p99_uncorrected_ns=hist_percentile(r.latency_uncorrected, 99),
        )
    return row


def _entries(obj: Any) -> list[tuple[str, str, int, Any]]:
    """(client, scenario, repeat, record) for a ResultSet, a record or a list of records."""
    if isinstance(obj, ResultSet):
        return [(c, s, i, r) for (c, s, i), r in obj]
    if isinstance(obj, (BenchResult, MeasureResult)):
        return [(obj.label, "", 0, obj)]
    if isinstance(obj, Iterable) and not isinstance(obj, (str, bytes, Mapping)):
        out: list[tuple[str, str, int, Any]] = []
        seen: dict[str, int] = {}
        for r in obj:
            if isinstance(r, ResultSet):
                out.extend(_entries(r))
                continue
            if not isinstance(r, (BenchResult, MeasureResult)):
                raise TypeError(f"expected results, got {type(r).__name__}")
            i = seen.get(r.label, 0)
            seen[r.label] = i + 1
            out.append((r.label, "", i, r))
        return out
    raise TypeError(f"expected a ResultSet, a result or a list of results, not {type(obj).__name__}")


def result_rows(obj: Any) -> list[dict[str, Any]]:
    """Plain dict rows (the DataFrame's columns, base units) without needing pandas."""
    notes: dict[tuple[str | None, str | None], list[str]] = {}
    if isinstance(obj, ResultSet):
        for n in obj.notes:
            notes.setdefault((n.client, n.scenario), []).append(n.kind)
    rows = []
    for c, s, i, r in _entries(obj):
        kinds = notes.get((c, s), []) + notes.get((c, None), []) + notes.get((None, s), [])
        rows.append(_row(c, s, i, r, ";".join(dict.fromkeys(kinds))))
    return rows


def to_dataframe(obj: Any) -> Any:
    """A pandas DataFrame, one row per (client, scenario, repeat); columns in
    :data:`DATAFRAME_COLUMNS` (base units: ns, bytes, per second).

    Raises ImportError with the pip command when pandas is not installed.
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError(
            "to_dataframe() needs pandas: pip install pandas (or pip install 'httpbench[notebook]')"
        ) from None
    return pd.DataFrame(result_rows(obj), columns=list(DATAFRAME_COLUMNS))


# --------------------------------------------------------------------------
# tables


def _render(headers: Sequence[str], rows: Sequence[Sequence[str]], fmt: str,
            left: int = 1, left_last: bool = False) -> str:
    """An aligned text table (first ``left`` columns left-aligned, and the last one
    with ``left_last``) or a Markdown table."""
    nl = len(headers) - 1 if left_last else len(headers)
    if fmt == "md":
        esc = [[c.replace("|", "\\|") for c in r] for r in rows]
        out = ["| " + " | ".join(headers) + " |",
               "|" + "|".join(":---" if i < left or i >= nl else "---:"
                        for i in range(len(headers))) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in esc]
        return "\n".join(out)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < left or i >= nl else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def _median(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return statistics.median(xs) if xs else _NAN


def _spread(xs: Sequence[float]) -> float:
    """Half the range relative to the median (0.05 == ±5%); NaN for < 2 values."""
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    if len(xs) < 2:
        return _NAN
    m = statistics.median(xs)
    return (max(xs) - min(xs)) / 2 / m if m else _NAN


def _cell(values: Sequence[float], kind: str, unit: str | None = None) -> str:
    m = _median(values)
    if kind == "duration":
        s = U.format_duration(m, unit=unit) if unit is None else _num(m / U.DURATION_UNITS[unit])
    elif kind == "size":
        s = U.format_bytes(m) if unit is None else _num(m / U.SIZE_UNITS[unit.lower()])
    elif kind == "byterate":
        s = U.format_byte_rate(m)
    elif kind == "rate":
        s = U.format_count(m)
    else:
        s = U.format_count(m)
    sp = _spread(values)
    if not math.isnan(sp) and s != U.MISSING:
        s += f" ±{sp * 100:.0f}%"
    return s


def _num(v: float) -> str:
    if v is None or math.isnan(v):
        return U.MISSING
    return U._sig(v, 3) if abs(v) < 1e4 else f"{v:,.0f}"


def _col_unit(values: Iterable[float], kind: str) -> str | None:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return None
    m = statistics.median(vals)
    if kind == "duration":
        return U.duration_unit(m)[0]
    if kind == "size":
        return U.size_unit(m)[0]
    return None


# (column title, row key, kind) for the compare tables; kind picks units.
_MEASURE_COLS = [
    ("req/s", "rps", "rate"),
    ("p50", "p50_ns", "duration"),
    ("p99", "p99_ns", "duration"),
    ("CPU/req", "cpu_ns_per_request", "duration"),
    ("allocs/req", "allocs_per_request", "count"),
    ("native allocs/req", "native_allocs_per_request", "count"),
    ("alloc/req", "alloc_bytes_per_request", "size"),
    ("GC/10k req", "gc_per_10k", "count"),
    ("peak RSS", "peak_rss_bytes", "size"),
]
_BENCH_COLS = [
    ("req/s", "rps", "rate"),
    ("p50", "p50_ns", "duration"),
    ("p99", "p99_ns", "duration"),
    ("p99.9", "p999_ns", "duration"),
    ("max", "max_ns", "duration"),
    ("errors", "errors", "count"),
    ("CPU/req", "cpu_ns_per_request", "duration"),
    ("in", "bytes_in_per_s", "byterate"),
]


def _group_cells(rows: list[dict[str, Any]], cols: list[tuple[str, str, str]],
                 first: str = "client") -> tuple[list[str], list[list[str]], bool]:
    """Headers and cells of a per-client table (medians over repeats ± half range)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r[first], []).append(r)
    # Drop columns with no data at all (e.g. native allocs when the counter was off).
    cols = [c for c in cols if any(not _isnan(r[c[1]]) for r in rows)]
    units = {key: _col_unit((r[key] for r in rows), kind) for _, key, kind in cols}
    headers = [first]
    for title, key, _kind in cols:
        headers.append(f"{title} ({units[key]})" if units[key] else title)
    has_notes = any(r["notes"] for r in rows)
    if has_notes:
        headers.append("notes")
    out = []
    for name, rs in groups.items():
        cells = [name] + [_cell([r[key] for r in rs], kind, units[key]) for _, key, kind in cols]
        if has_notes:
            cells.append(rs[0]["notes"])
        out.append(cells)
    return headers, out, has_notes


def _group_table(rows: list[dict[str, Any]], fmt: str, cols: list[tuple[str, str, str]],
                 first: str = "client") -> str:
    headers, cells, has_notes = _group_cells(rows, cols, first)
    return _render(headers, cells, fmt, left_last=has_notes)


def _isnan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def format_resultset(rs: ResultSet, fmt: str = "text") -> str:
    """One table per scenario: a row per client, medians over repeats ± half range."""
    rows = result_rows(rs)
    parts = []
    heading = (lambda s: f"## {s}") if fmt == "md" else (lambda s: f"{s}\n{'=' * len(s)}")
    for sc in rs.scenarios:
        srows = [r for r in rows if r["scenario"] == sc]
        nrep = max(r["repeat"] for r in srows) + 1
        kinds = {r["kind"] for r in srows}
        cols = _BENCH_COLS if kinds == {"bench"} else _MEASURE_COLS
        title = f"{sc}" + (f" (median of {nrep} repeats ± half range)" if nrep > 1 else "")
        parts.append(heading(title) + "\n\n" + _group_table(srows, fmt, cols))
    if rs.notes:
        bullet = "- " if fmt == "md" else "  * "
        parts.append(("**Notes**" if fmt == "md" else "Notes:") + "\n"
                     + "\n".join(bullet + str(n) for n in rs.notes))
    if rs.skipped:
        bullet = "- " if fmt == "md" else "  * "
        parts.append(("**Skipped**" if fmt == "md" else "Skipped:") + "\n"
                     + "\n".join(f"{bullet}{k}: {v}" for k, v in rs.skipped.items()))
    return "\n\n".join(parts) + "\n"


def _measure_rows(r: MeasureResult) -> list[list[str]]:
    rows: list[list[str]] = [
        ["calls", U.format_count(r.calls)],
        ["wall time", U.format_duration(r.wall_ns)],
        ["calls/s", U.format_count(r.calls_per_s)],
    ]
    for p, v in r.percentiles((50, 90, 99, 99.9)).items():
        rows.append([f"p{p:g}", U.format_duration(v)])
    rows.append(["max", U.format_duration(hist_stat(r.latency, "max"))])
    rows.append(["CPU/call (process)", U.format_duration(r.cpu_ns_per_call)])
    rows.append(["CPU/call (thread)", U.format_duration(r.thread_cpu_ns_per_call)])
    if r.alloc_counts is not None:
        rows.append(["Python allocs/call", U.format_count(r.allocs_per_call)])
        per = ", ".join(f"{d.upper()} {U.format_count(n / r.calls if r.calls else _NAN)}"
                        for d, n in r.alloc_counts.items())
        rows.append(["  by domain", per])
        rows.append(["Python bytes/call", U.format_bytes(r.alloc_bytes_per_call)])
        if r.alloc_net_bytes is not None:
            rows.append(["retained after run", U.format_bytes(r.alloc_net_bytes)])
    if r.native_alloc_count is not None:
        rows.append(["native mallocs/call", U.format_count(r.native_allocs_per_call)])
    if r.gc_collections is not None:
        g = r.gc_collections
        rows.append(["GC collections", f"{sum(g)} (gen0 {g[0]}, gen1 {g[1]}, gen2 {g[2]})"])
        rows.append(["GC/10k calls", U.format_count(r.gc_per_10k)])
        rows.append(["GC pause", U.format_duration(r.gc_pause_ns)])
    if r.peak_rss_bytes is not None:
        rows.append(["peak RSS", U.format_bytes(r.peak_rss_bytes)])
    if r.overhead_ns_per_call is not None:
        rows.append(["harness overhead/call", U.format_duration(r.overhead_ns_per_call)])
    return rows


def _measure_table(r: MeasureResult, fmt: str) -> str:
    title = f"measure: {r.label}"
    body = _render(["metric", "value"], _measure_rows(r), fmt, left=1)
    return (f"**{title}**\n\n" if fmt == "md" else f"{title}\n") + body + "\n"


def format_result(obj: Any, fmt: str = "text") -> str:
    """Text/Markdown table (or JSON) of a BenchResult, MeasureResult or ResultSet."""
    if fmt not in ("text", "md", "json"):
        raise ValueError(f"unknown format {fmt!r}; use text, md or json")
    if fmt == "json":
        rows = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                 for k, v in r.items()} for r in result_rows(obj)]
        return json.dumps(rows, indent=1, allow_nan=False, default=str) + "\n"  # NaN -> null
    if isinstance(obj, ResultSet):
        return format_resultset(obj, fmt)
    if isinstance(obj, BenchResult):
        return ab_report(obj) if fmt == "text" else _group_table(result_rows(obj), fmt,
                                                                 _BENCH_COLS) + "\n"
    if isinstance(obj, MeasureResult):
        return _measure_table(obj, fmt)
    rows = result_rows(obj)  # a list of records
    kinds = {r["kind"] for r in rows}
    return _group_table(rows, fmt, _BENCH_COLS if kinds == {"bench"} else _MEASURE_COLS,
                        first="client") + "\n"


# --------------------------------------------------------------------------
# ab-style report and percentile spectrum


def percentile_spectrum(h: Any, ticks_per_half: int = 5) -> list[tuple[float, float, int]]:
    """HdrHistogram-style percentile distribution: [(value_ns, percentile, count_le)].

    Percentile levels double their resolution every halving of the remaining
    distance to 100% (``ticks_per_half`` per halving), as HdrHistogram's
    outputPercentileDistribution does; the last row is the max at 100%.
    """
    n = hist_count(h) if h is not None else 0
    if not n:
        return []
    cum: list[tuple[int, int]] = []  # (bucket hi, cumulative count)
    total = 0
    for _lo, hi, c in _buckets(h):
        total += c
        cum.append((hi, total))

    def count_le(v: float) -> int:
        best = 0
        for hi, t in cum:
            if hi <= v:
                best = t
            else:
                break
        return best

    out = []
    i = 0
    last_p = -1.0
    while True:
        p = 100.0 * (1.0 - 0.5 ** (i / ticks_per_half))
        if p >= 100.0 * (1.0 - 1.0 / n) or i > 60 * ticks_per_half:
            break
        v = hist_percentile(h, p)
        if p > last_p:
            out.append((v, p, max(count_le(v), 1)))
            last_p = p
        i += 1
    out.append((hist_stat(h, "max"), 100.0, n))
    return out


def _buckets(h: Any) -> list[tuple[int, int, int]]:
    b = getattr(h, "buckets", None)
    if b is not None:
        return list(b() if callable(b) else b)
    return [(v, v, c) for v, c in h]


def ab_report(r: BenchResult, latency: bool = False) -> str:
    """The ApacheBench-style report of a bench() run (the one ``httpbench URL`` prints;
    implemented by the load generator's ``_bench.format_report``)."""
    from ._bench import format_report

    return format_report(r, latency=latency)


# --------------------------------------------------------------------------
# HdrHistogram export


def hdr_hgrm(h: Any, unit_ns: float = 1e6, ticks_per_half: int = 5) -> str:
    """The classic ``.hgrm`` percentile distribution text (HdrHistogram's
    outputPercentileDistribution): columns Value, Percentile (0..1), TotalCount,
    1/(1-Percentile), then ``#[Mean ...]``/``#[Max ...]`` footers. Values are in
    ms by default (``unit_ns=1e6``), which the HdrHistogram plotter
    (plotFiles.html), hdr-plot and HistogramLogAnalyzer expect.
    """
    out = [f"{'Value':>12} {'Percentile':>14} {'TotalCount':>10} {'1/(1-Percentile)':>14}", ""]
    spec = percentile_spectrum(h, ticks_per_half)
    for v, p, cnt in spec:
        frac = p / 100.0
        if frac < 1.0:
            out.append(f"{v / unit_ns:12.3f} {frac:2.12f} {cnt:10d} {1 / (1 - frac):14.2f}")
        else:
            out.append(f"{v / unit_ns:12.3f} {frac:2.12f} {cnt:10d}")
    n = hist_count(h) if h is not None else 0
    mean = hist_stat(h, "mean") / unit_ns if n else 0.0
    sd = hist_stat(h, "stddev") / unit_ns if n else 0.0
    mx = hist_stat(h, "max") / unit_ns if n else 0.0
    out.append(f"#[Mean    = {mean:12.3f}, StdDeviation   = {sd:12.3f}]")
    out.append(f"#[Max     = {mx:12.3f}, Total count    = {n:12d}]")
    layout = _HdrLayout(int(getattr(h, "highest", 3_600_000_000_000)),
                        int(getattr(h, "sigfigs", 3)))
    out.append(f"#[Buckets = {layout.bucket_count:12d}, SubBuckets     = "
               f"{layout.sub_bucket_count:12d}]")
    return "\n".join(out) + "\n"


class _HdrLayout:
    """HdrHistogram's counts-array indexing (lowest discernible value 1)."""

    def __init__(self, highest: int, sigfigs: int) -> None:
        self.highest = max(highest, 2)
        self.sigfigs = sigfigs
        largest_single = 2 * 10**sigfigs
        mag = math.ceil(math.log2(largest_single))
        self.half_mag = max(mag, 1) - 1
        self.unit_mag = 0
        self.sub_bucket_count = 1 << (self.half_mag + 1)
        self.half = self.sub_bucket_count // 2
        self.mask = (self.sub_bucket_count - 1) << self.unit_mag
        smallest_untrackable = self.sub_bucket_count << self.unit_mag
        buckets = 1
        while smallest_untrackable <= self.highest:
            if smallest_untrackable > (1 << 62):
                buckets += 1
                break
            smallest_untrackable <<= 1
            buckets += 1
        self.bucket_count = buckets
        self.counts_len = (buckets + 1) * self.half
        self.lzc_base = 64 - self.unit_mag - self.half_mag - 1

    def index(self, v: int) -> int:
        v = max(0, min(int(v), self.highest))
        bucket = self.lzc_base - (64 - (v | self.mask).bit_length())
        sub = v >> (bucket + self.unit_mag)
        return ((bucket + 1) << self.half_mag) + (sub - self.half)


def _zigzag_leb128(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    for _ in range(8):
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z & 0xFF)  # 9th byte carries the last 8 bits
    return bytes(out)


_V2_ENCODING_COOKIE = 0x1C849303 | 0x10
_V2_COMPRESSION_COOKIE = 0x1C849304 | 0x10


def hdr_compressed(h: Any) -> bytes:
    """The histogram in HdrHistogram's V2 compressed binary encoding (what interval
    logs embed in base64): big-endian header, ZigZag-LEB128 counts with zero runs,
    deflated. Readable by every HdrHistogram implementation (Java, C, Python hdrh).
    """
    layout = _HdrLayout(int(getattr(h, "highest", 3_600_000_000_000)),
                        int(getattr(h, "sigfigs", 3)))
    counts: dict[int, int] = {}
    for lo, _hi, c in _buckets(h):
        if c:
            i = layout.index(lo)
            counts[i] = counts.get(i, 0) + c
    payload = bytearray()
    if counts:
        limit = max(counts) + 1
        i = 0
        while i < limit:
            c = counts.get(i, 0)
            if c:
                payload += _zigzag_leb128(c)
                i += 1
            else:
                j = i
                while j < limit and not counts.get(j, 0):
                    j += 1
                payload += _zigzag_leb128(-(j - i))
                i = j
    header = struct.pack(">iiiiqqd", _V2_ENCODING_COOKIE, len(payload), 0, layout.sigfigs,
                         1, layout.highest, 1.0)
    data = zlib.compress(header + bytes(payload))
    return struct.pack(">ii", _V2_COMPRESSION_COOKIE, len(data)) + data


def hdr_interval_log(intervals: Sequence[tuple[Any, ...]],
                     start_unix_s: float | None = None, max_unit_ns: float = 1e6,
                     comment: str = "httpbench", tags: bool = False) -> str:
    """An HdrHistogram interval log (format 1.3, V2 compressed histograms).

    ``intervals``: (start_s, length_s, histogram[, name]) with start relative to
    ``start_unix_s``. Interval_Max is in ms (``max_unit_ns``) as jHiccup and
    HistogramLogProcessor expect; histogram values stay in ns. A ``name`` is
    written as a ``#[name]`` comment before its line, or with ``tags=True`` as
    the line's ``Tag=name,`` prefix (format 1.3 tags: the Java tools read them,
    python ``hdrh`` does not).
    """
    import time as _time

    out = [f"#[{comment}]", "#[Histogram log format version 1.3]"]
    if start_unix_s is not None:
        stamp = _time.strftime("%a %b %d %H:%M:%S UTC %Y", _time.gmtime(start_unix_s))
        out.append(f"#[StartTime: {start_unix_s:.3f} (seconds since epoch), {stamp}]")
        out.append(f"#[BaseTime: {start_unix_s:.3f} (seconds since epoch)]")
    out.append('"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"')
    for item in intervals:
        start, length, h = item[:3]
        name = item[3] if len(item) > 3 else None
        mx = hist_stat(h, "max") / max_unit_ns if hist_count(h) else 0.0
        b64 = base64.b64encode(hdr_compressed(h)).decode("ascii")
        prefix = ""
        if name:
            tag = "".join(ch if ch.isalnum() or ch in "-_./#:" else "_" for ch in str(name))
            if tags:
                prefix = f"Tag={tag},"
            else:
                out.append(f"#[{tag}]")
        out.append(f"{prefix}{start:.3f},{length:.3f},{mx:.3f},{b64}")
    return "\n".join(out) + "\n"


def export_hdr_log(obj: Any, path: str | os.PathLike[str], tags: bool = False,
                   which: str = "latency") -> int:
    """Write every record of ``obj`` (a record, list or ResultSet) as one interval
    of an HdrHistogram interval log, in run order, named ``client/scenario#repeat``
    (see :func:`hdr_interval_log`); returns the number of intervals written."""
    entries = [(c, sc, i, r) for c, sc, i, r in _entries(obj)
               if getattr(r, which, None) is not None]
    if not entries:
        raise ValueError(f"nothing to export: no {which!r} histogram")
    t0 = min((r.start_unix_ns for *_, r in entries if r.start_unix_ns), default=0)
    intervals = []
    for c, sc, i, r in entries:
        dur = getattr(r, "duration_ns", None) or getattr(r, "wall_ns", 0)
        start = (r.start_unix_ns - t0) / 1e9 if r.start_unix_ns and t0 else 0.0
        name = c + (f"/{sc}" if sc else "") + f"#{i}"
        intervals.append((start, dur / 1e9, getattr(r, which), name))
    with open(os.fspath(path), "w", encoding="ascii") as f:
        f.write(hdr_interval_log(intervals, t0 / 1e9 if t0 else None, tags=tags))
    return len(intervals)


def export_histogram(h: Any, path: str | os.PathLike[str], fmt: str | None = None,
                     start_unix_ns: int = 0, duration_ns: int = 0) -> str:
    """Write a latency histogram for HdrHistogram tools; returns the format used.

    ``fmt``: "hlog" (interval log with one V2-compressed interval - HistogramLogAnalyzer,
    HistogramLogProcessor, hdrh.log) or "hgrm" (percentile distribution text -
    the HdrHistogram plotter, hdr-plot). Default from the file suffix (``.hgrm``
    -> hgrm, anything else -> hlog).
    """
    p = os.fspath(path)
    if fmt is None:
        fmt = "hgrm" if p.endswith(".hgrm") else "hlog"
    if fmt == "hgrm":
        text = hdr_hgrm(h)
    elif fmt == "hlog":
        start = start_unix_ns / 1e9 if start_unix_ns else None
        text = hdr_interval_log([(0.0, duration_ns / 1e9, h)], start)
    else:
        raise ValueError(f"unknown HdrHistogram export format {fmt!r}; use 'hlog' or 'hgrm'")
    with open(p, "w", encoding="ascii") as f:
        f.write(text)
    return fmt


# --------------------------------------------------------------------------
# statistics (no scipy)


def _betacf(a: float, b: float, x: float) -> float:
    # Continued fraction of the incomplete beta function (modified Lentz).
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's unequal-variance t-test (needs >= 2 values each).

    Both samples constant: p = 1 when their values are equal, 0 when they differ
    (deterministic figures such as allocation counts).
    """
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        raise ValueError("welch_t_test needs at least 2 values per sample")
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va, vb = statistics.variance(a), statistics.variance(b)
    se2 = va / na + vb / nb
    if se2 == 0.0:
        return 1.0 if ma == mb else 0.0
    t = (ma - mb) / math.sqrt(se2)
    df = se2**2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    return _betainc(df / 2.0, 0.5, df / (df + t * t))


def _mwu_exact_cdf(m: int, n: int) -> list[float]:
    """P(U <= u) for u = 0..m*n under H0, no ties (counts arrangements by DP)."""
    # f[j][u]: number of arrangements of i x's and j y's with U == u, built over i.
    prev = [[1] + [0] * (m * n) for _ in range(n + 1)]  # i = 0: U = 0 for any j
    for i in range(1, m + 1):
        cur = [[0] * (m * n + 1) for _ in range(n + 1)]
        cur[0][0] = 1
        for j in range(1, n + 1):
            for u in range(i * j + 1):
                # last element is an x (it beats all j y's) or a y (adds nothing)
                v = cur[j - 1][u]
                if u >= j:
                    v += prev[j][u - j]
                cur[j][u] = v
        prev = cur
    counts = prev[n]
    total = math.comb(m + n, m)
    cdf, acc = [], 0
    for c in counts:
        acc += c
        cdf.append(acc / total)
    return cdf


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann–Whitney U test: (U of ``a``, p-value).

    Exact distribution for small samples without ties (m, n <= 20); otherwise
    the normal approximation with tie correction and continuity correction.
    """
    m, n = len(a), len(b)
    if m == 0 or n == 0:
        raise ValueError("mann_whitney_u needs non-empty samples")
    allv = sorted([(x, 0) for x in a] + [(y, 1) for y in b])
    ranks = [0.0] * len(allv)
    ties = []
    i = 0
    while i < len(allv):
        j = i
        while j + 1 < len(allv) and allv[j + 1][0] == allv[i][0]:
            j += 1
        r = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[k] = r
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    ra = sum(r for r, (_, g) in zip(ranks, allv, strict=True) if g == 0)
    u = ra - m * (m + 1) / 2.0
    if not ties and m <= 20 and n <= 20:
        cdf = _mwu_exact_cdf(m, n)
        lo = min(u, m * n - u)
        p = min(1.0, 2.0 * cdf[int(round(lo))])
        return u, p
    mu = m * n / 2.0
    tie_term = sum(t**3 - t for t in ties) / ((m + n) * (m + n - 1)) if ties else 0.0
    var = m * n / 12.0 * ((m + n + 1) - tie_term)
    if var <= 0:
        return u, 1.0
    z = (abs(u - mu) - 0.5) / math.sqrt(var)
    p = math.erfc(max(z, 0.0) / math.sqrt(2.0))
    return u, min(1.0, p)


# --------------------------------------------------------------------------
# baseline comparison

# metric key -> (title, kind, higher_is_better, verdict words (better, worse))
_CMP_METRICS: dict[str, tuple[str, str, bool, tuple[str, str]]] = {
    "rps": ("req/s", "rate", True, ("faster", "slower")),
    "p50_ns": ("p50", "duration", False, ("faster", "slower")),
    "p99_ns": ("p99", "duration", False, ("faster", "slower")),
    "p999_ns": ("p99.9", "duration", False, ("faster", "slower")),
    "cpu_ns_per_request": ("CPU/req", "duration", False, ("faster", "slower")),
    "allocs_per_request": ("allocs/req", "count", False, ("better", "worse")),
    "alloc_bytes_per_request": ("alloc/req", "size", False, ("better", "worse")),
    "native_allocs_per_request": ("native allocs/req", "count", False, ("better", "worse")),
    "gc_per_10k": ("GC/10k req", "count", False, ("better", "worse")),
    "peak_rss_bytes": ("peak RSS", "size", False, ("better", "worse")),
    "errors": ("errors", "count", False, ("better", "worse")),
}
NO_CHANGE = "no significant change"


def _fmt_change(rel: float) -> str:
    return "from 0" if rel == math.inf else U.format_change(rel)

NOT_TESTED = "not tested"


@dataclass(frozen=True, slots=True)
class Change:
    """One metric of one (client, scenario): baseline vs current across repeats.

    ``change``: median(current)/median(baseline) - 1; ``p_value`` and ``test``
    ("mann-whitney", "welch", or "" when not tested); ``verdict``: "faster" /
    "slower" (time and rate metrics), "better" / "worse" (allocation, memory,
    error metrics), "no significant change", or "not tested" (fewer than 2
    repeats on a side - rerun with ``repeat >= 3``).
    """

    client: str
    scenario: str
    metric: str
    baseline: tuple[float, ...]
    current: tuple[float, ...]
    change: float
    p_value: float
    test: str
    verdict: str
    improved: bool | None

    @property
    def title(self) -> str:
        """Human name of the metric."""
        return _CMP_METRICS[self.metric][0]

    @property
    def significant(self) -> bool:
        """True for a significant change (faster/slower/better/worse)."""
        return self.verdict not in (NO_CHANGE, NOT_TESTED)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN as None)."""
        def f(x: float) -> float | None:
            return None if x is None or not math.isfinite(x) else x
        return {
            "client": self.client, "scenario": self.scenario, "metric": self.metric,
            "baseline": [f(x) for x in self.baseline], "current": [f(x) for x in self.current],
            "change": f(self.change), "p_value": f(self.p_value), "test": self.test,
            "verdict": self.verdict, "improved": self.improved,
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """Result of :func:`compare_results`: every :class:`Change`, plus what was
    only on one side."""

    changes: tuple[Change, ...]
    alpha: float
    min_change: float
    only_baseline: tuple[tuple[str, str], ...] = ()
    only_current: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def regressions(self) -> list[Change]:
        """Significant changes for the worse."""
        return [c for c in self.changes if c.significant and c.improved is False]

    @property
    def improvements(self) -> list[Change]:
        """Significant changes for the better."""
        return [c for c in self.changes if c.significant and c.improved]

    def get(self, client: str, scenario: str, metric: str) -> Change | None:
        """The change of one metric, or None."""
        for c in self.changes:
            if (c.client, c.scenario, c.metric) == (client, scenario, metric):
                return c
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "alpha": self.alpha, "min_change": self.min_change,
            "changes": [c.to_dict() for c in self.changes],
            "only_baseline": [list(k) for k in self.only_baseline],
            "only_current": [list(k) for k in self.only_current],
            "notes": list(self.notes),
        }

    def format(self, fmt: str = "text") -> str:
        """A table: client, scenario, metric, baseline, current, change, p, verdict."""
        if fmt == "json":
            return json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"
        rows = []
        for c in self.changes:
            kind = _CMP_METRICS[c.metric][1]
            rows.append([
                c.client, c.scenario, c.title, _cell(c.baseline, kind), _cell(c.current, kind),
                _fmt_change(c.change),
                "—" if math.isnan(c.p_value) else f"{c.p_value:.3f}", c.verdict,
            ])
        head = ["client", "scenario", "metric", "baseline", "current", "change", "p", "verdict"]
        out = [_render(head, rows, fmt, left=3)] if rows else ["(nothing in common to compare)"]
        summary = (f"{len(self.regressions)} regressions, {len(self.improvements)} improvements "
                   f"(alpha={self.alpha:g}, changes under {self.min_change:.0%} ignored)")
        out.append(summary)
        for what, keys in (("only in baseline", self.only_baseline),
                           ("only in current", self.only_current)):
            if keys:
                out.append(f"{what}: " + ", ".join(f"{c}/{s}" for c, s in keys))
        out.extend(self.notes)
        return "\n\n".join(out) + "\n"

    def __str__(self) -> str:
        return self.format("text")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        rows = [[c.client, c.scenario, c.title, _cell(c.baseline, _CMP_METRICS[c.metric][1]),
                 _cell(c.current, _CMP_METRICS[c.metric][1]), _fmt_change(c.change),
                 "—" if math.isnan(c.p_value) else f"{c.p_value:.3f}", c.verdict]
                for c in self.changes]
        head = ["client", "scenario", "metric", "baseline", "current", "change", "p", "verdict"]
        colour = {"slower": "#c0392b", "worse": "#c0392b", "faster": "#1e8449",
                  "better": "#1e8449"}
        out = ['<table class="httpbench">', "<tr>" + "".join(
            f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
        for r in rows:
            style = colour.get(r[-1])
            cells = [f'<td style="text-align:{"left" if j < 3 else "right"}">'
                     f"{html.escape(v)}</td>" for j, v in enumerate(r[:-1])]
            verdict = html.escape(r[-1])
            if style:
                verdict = f'<b style="color:{style}">{verdict}</b>'
            out.append("<tr>" + "".join(cells) + f"<td>{verdict}</td></tr>")
        out.append("</table>")
        out.append(f"<p>{len(self.regressions)} regressions, {len(self.improvements)} "
                   f"improvements (alpha={self.alpha:g}, changes under "
                   f"{self.min_change:.0%} ignored)</p>")
        return {"text/plain": self.format("text"), "text/html": "\n".join(out)}


def _as_set(obj: Any) -> ResultSet:
    if isinstance(obj, ResultSet):
        return obj
    if isinstance(obj, (str, os.PathLike)):
        from ._results import load

        return _as_set(load(obj))
    rs = ResultSet()
    for c, s, i, r in _entries(obj):
        rs = rs.with_result(c, s, i, r)
    return rs


def compare_results(baseline: Any, current: Any, *, alpha: float = 0.05,
                    min_change: float = 0.02, metrics: Sequence[str] | None = None,
                    test: str = "auto") -> Comparison:
    """Compare two runs metric by metric with a significance verdict across repeats.

    ``baseline``/``current``: ResultSets, records, lists of records or file
    paths. For each (client, scenario) in both and each metric present, the
    repeats' values are compared: ``test="auto"`` uses the Mann–Whitney U test
    when both sides have >= 4 repeats (exact p for small samples) and Welch's
    t-test for 2-3 repeats (where U cannot reach alpha=0.05); a change is
    significant when p < ``alpha`` and the medians differ by at least
    ``min_change`` (default 2%, below which timing noise dominates). Sides with
    one repeat are "not tested".
    """
    if test not in ("auto", "mann-whitney", "welch"):
        raise ValueError(f"unknown test {test!r}; use auto, mann-whitney or welch")
    base, cur = _as_set(baseline), _as_set(current)
    want = list(metrics) if metrics is not None else list(_CMP_METRICS)
    for m in want:
        if m not in _CMP_METRICS:
            raise ValueError(f"unknown metric {m!r}; one of {list(_CMP_METRICS)}")

    def group(rs: ResultSet) -> dict[tuple[str, str], list[dict[str, Any]]]:
        g: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in result_rows(rs):
            g.setdefault((row["client"], row["scenario"]), []).append(row)
        return g

    gb, gc = group(base), group(cur)
    changes = []
    for key in gb:
        if key not in gc:
            continue
        for m in want:
            bv = tuple(float(r[m]) for r in gb[key] if not _isnan(r[m]))
            cv = tuple(float(r[m]) for r in gc[key] if not _isnan(r[m]))
            if not bv or not cv:
                continue
            changes.append(_change(key, m, bv, cv, alpha, min_change, test))
    return Comparison(
        changes=tuple(changes), alpha=alpha, min_change=min_change,
        only_baseline=tuple(k for k in gb if k not in gc),
        only_current=tuple(k for k in gc if k not in gb),
    )


def _change(key: tuple[str, str], metric: str, bv: tuple[float, ...], cv: tuple[float, ...],
            alpha: float, min_change: float, test: str) -> Change:
    _title, _kind, higher_better, (good, bad) = _CMP_METRICS[metric]
    mb, mc = statistics.median(bv), statistics.median(cv)
    if mb == 0:
        rel = 0.0 if mc == 0 else math.inf
    else:
        rel = mc / mb - 1.0
    if len(bv) < 2 or len(cv) < 2:
        return Change(key[0], key[1], metric, bv, cv, rel, _NAN, "", NOT_TESTED, None)
    use = test
    if use == "auto":
        use = "mann-whitney" if min(len(bv), len(cv)) >= 4 else "welch"
    if use == "mann-whitney":
        _u, p = mann_whitney_u(bv, cv)
    else:
        p = welch_t_test(bv, cv)
    verdict, improved = NO_CHANGE, None
    if p < alpha and abs(rel) >= min_change and mc != mb:
        improved = (mc > mb) == higher_better
        verdict = good if improved else bad
    return Change(key[0], key[1], metric, bv, cv, rel, p, use, verdict, improved)


# --------------------------------------------------------------------------
# Jupyter


def _html_grid(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1,
               left_last: bool = False) -> str:
    n = len(headers)

    def align(j: int) -> str:
        return "left" if j < left or (left_last and j == n - 1) else "right"

    out = ['<table class="httpbench">', "<tr>" + "".join(
        f'<th style="text-align:{align(j)};white-space:nowrap">{html.escape(h)}</th>'
        for j, h in enumerate(headers)) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(
            f'<td style="text-align:{align(j)};white-space:nowrap">{html.escape(c)}</td>'
            for j, c in enumerate(r)) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _html_table(rows: list[dict[str, Any]], cols: list[tuple[str, str, str]],
                first: str = "client") -> str:
    headers, cells, has_notes = _group_cells(rows, cols, first)
    return _html_grid(headers, cells, left_last=has_notes)


def _svg(obj: Any) -> str:
    """Inline SVG percentile plot, or '' when matplotlib is missing or nothing to plot."""
    try:
        from ._plot import figure_svg, plot_percentiles
    except ImportError:
        return ""
    try:
        fig = plot_percentiles(obj, figsize=(6.4, 3.4))
        return figure_svg(fig)
    except (ImportError, ValueError):
        return ""


def mimebundle(obj: Any) -> dict[str, str]:
    """Jupyter rich display: text table, HTML table + inline SVG percentile plot."""
    text = format_result(obj, "text")
    rows = result_rows(obj)
    parts = []
    if isinstance(obj, ResultSet):
        for sc in obj.scenarios:
            srows = [r for r in rows if r["scenario"] == sc]
            cols = _BENCH_COLS if {r["kind"] for r in srows} == {"bench"} else _MEASURE_COLS
            parts.append(f"<h4>{html.escape(sc)}</h4>" + _html_table(srows, cols))
        if obj.notes:
            parts.append("<ul>" + "".join(f"<li>{html.escape(str(n))}</li>" for n in obj.notes)
                         + "</ul>")
    elif isinstance(obj, MeasureResult):
        parts.append(f"<b>measure: {html.escape(obj.label)}</b>")
        parts.append(_html_grid(["metric", "value"], _measure_rows(obj)))
    else:
        cols = _BENCH_COLS if rows and rows[0]["kind"] == "bench" else _MEASURE_COLS
        parts.append(_html_table(rows, cols, first="client"))
    svg = _svg(obj)
    if svg:
        parts.append(f'<div class="httpbench-plot">{svg}</div>')
    return {"text/plain": text, "text/html": "\n".join(parts)}


# --------------------------------------------------------------------------
# progress bars


def interactive() -> bool:
    """True in a Jupyter kernel or on a terminal, False under CI or with output redirected."""
    if os.environ.get("CI") or os.environ.get("HTTPBENCH_NO_PROGRESS"):
        return False
    ip_mod = sys.modules.get("IPython")
    if ip_mod is not None:
        try:
            ip = ip_mod.get_ipython()
        except AttributeError:
            ip = None
        if ip is not None and "IPKernelApp" in getattr(ip, "config", {}):
            return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class ProgressBar:
    """A tqdm.auto progress bar (a widget in Jupyter, a line on a terminal) usable
    as ``bench(..., progress=bar)`` (it takes bench's Progress snapshots) or as a
    message callback (``compare(progress=bar)``). Disabled - a no-op - when not
    interactive or when tqdm is not installed.
    """

    def __init__(self, desc: str = "", total: float | None = None,
                 enable: bool | None = None) -> None:
        self.desc = desc
        self._bar: Any = None
        self._total = total
        self.enabled = interactive() if enable is None else bool(enable)
        if self.enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                self.enabled = False
            else:
                self._tqdm = tqdm

    def _ensure(self, total: float | None, unit: str) -> Any:
        if self._bar is None and self.enabled:
            self._bar = self._tqdm(total=total if total is not None else self._total,
                                   desc=self.desc, unit=unit, leave=True, dynamic_ncols=True)
        return self._bar

    def __call__(self, p: Any) -> None:
        if not self.enabled:
            return
        if isinstance(p, str):
            bar = self._ensure(None, "it")
            bar.set_postfix_str(p[-60:], refresh=True)
            return
        if getattr(p, "warming_up", False):
            bar = self._ensure(p.total or p.duration_s, "req" if p.total else "s")
            bar.set_postfix_str("warming up", refresh=True)
            return
        if getattr(p, "total", None):
            bar = self._ensure(p.total, "req")
            bar.n = min(p.completed, p.total)
        else:
            bar = self._ensure(getattr(p, "duration_s", None), "s")
            bar.n = round(p.elapsed_s, 1)
        bar.set_postfix(ok=p.ok, failed=p.failed, refresh=False)
        bar.refresh()

    def close(self, result: Any = None) -> None:
        """Finish the bar (idempotent); given the run's BenchResult, show its final count."""
        if self._bar is not None:
            if isinstance(result, BenchResult):
                if result.config.n:
                    self._bar.n = result.responses + result.errors
                else:
                    self._bar.n = round(result.duration_ns / 1e9, 1)
                self._bar.set_postfix(ok=result.successes, failed=result.failures,
                                      refresh=False)
                self._bar.refresh()
            self._bar.close()
            self._bar = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def progress_bar(desc: str = "", total: float | None = None,
                 enable: bool | None = None) -> ProgressBar:
    """A :class:`ProgressBar` (tqdm.auto; off when not interactive)."""
    return ProgressBar(desc, total, enable)


# --------------------------------------------------------------------------
# CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="httpbench report",
        description="Print saved httpbench results, compare them with a baseline, plot them.",
    )
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="results JSON file(s), or `httpbench compare --out` directories")
    p.add_argument("--format", choices=("text", "md", "json"), default="text")
    p.add_argument("--plot", metavar="DIR", help="write PNG and SVG figures into DIR")
    p.add_argument("--baseline", metavar="FILE",
                   help="compare FILE(s) against this baseline results file")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (0.05)")
    p.add_argument("--min-change", type=U.parse_percent, default=0.02,
                   help="ignore relative changes below this (default 2%%)")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when a significant regression is found")
    p.add_argument("--export-hdr", metavar="FILE",
                   help="write latency histograms for HdrHistogram tools: an interval "
                        "log with one interval per record, or for a .hgrm path the "
                        "percentile text of the first client/scenario (repeats merged)")
    return p


def cli_main(argv: Sequence[str]) -> int:
    """``httpbench report FILE... [--format text|md|json] [--plot DIR] [--baseline A.json]``."""
    from ._results import load

    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    records = []
    for f in [*([args.baseline] if args.baseline else []), *args.files]:
        if os.path.isdir(f):  # a `httpbench compare --out` directory
            f = os.path.join(f, "results.json")
        try:
            records.append(load(f))
        except (OSError, ValueError) as exc:
            sys.stderr.write(f"httpbench report: {exc}\n")
            return 2
    rc = 0
    if args.baseline:
        base, currents = records[0], records[1:]
        for path, cur in zip(args.files, currents, strict=True):
            cmp = compare_results(base, cur, alpha=args.alpha, min_change=args.min_change)
            if len(currents) > 1 and args.format != "json":
                sys.stdout.write(f"{args.baseline} -> {path}\n\n")
            sys.stdout.write(cmp.format(args.format))
            if args.fail_on_regression and cmp.regressions:
                rc = 1
    else:
        for path, rec in zip(args.files, records, strict=True):
            if len(records) > 1 and args.format != "json":
                sys.stdout.write(f"# {path}\n\n")
            sys.stdout.write(format_result(rec, args.format))
    if args.export_hdr:
        rec = records[-1]
        if args.export_hdr.endswith(".hgrm"):
            c, sc, _i, first = next(iter(_entries(rec)))
            hists = [r.latency for cc, ss, _, r in _entries(rec) if (cc, ss) == (c, sc)]
            merged = hists[0].copy()
            for h in hists[1:]:
                merged.merge(h)
            export_histogram(merged, args.export_hdr, fmt="hgrm")
            sys.stderr.write(f"wrote {args.export_hdr} (hgrm of {c}"
                             f"{'/' + sc if sc else ''}, {len(hists)} repeat(s) merged)\n")
        else:
            n = export_hdr_log(rec, args.export_hdr)
            sys.stderr.write(f"wrote {args.export_hdr} (interval log, {n} intervals)\n")
    if args.plot:
        try:
            from ._plot import save_plots
        except ImportError as exc:
            sys.stderr.write(f"httpbench report: --plot needs matplotlib ({exc}); "
                             "pip install matplotlib\n")
            return 2
        written = []
        for rec in records[-1:] if not args.baseline else records:
            written += save_plots(rec, args.plot)
        sys.stderr.write(f"wrote {len(written)} files into {args.plot}\n")
    return rc

