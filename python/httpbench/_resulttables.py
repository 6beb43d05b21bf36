"""Tables of results (text / Markdown / JSON / DataFrame): a ResultSet grouped per
scenario, a bench or measure record's row.

Every number in a DataFrame or a JSON table is in base units (ns, bytes, per second);
text and Markdown tables choose readable units (see ``_units``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from . import _units as U
from ._abreport import ab_report
from ._cmptables import caption, compare_table, skip_lines
from ._hist import hist_stat
from ._machine import placement_lines, speed_line
from ._results import BenchResult, MeasureResult, ResultSet
from ._rows import DATAFRAME_COLUMNS, cell_rows, isnan, result_rows
from ._stats import median_ci
from ._tables import column_unit, median_cell, median_ci_cell, render_table

__all__ = [
    "BENCH_COLS",
    "MEASURE_COLS",
    "format_result",
    "format_resultset",
    "group_table",
    "measure_rows",
    "to_dataframe",
]


# --------------------------------------------------------------------------
# rows / DataFrame

_NAN = math.nan


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


# (column title, row key, kind) for the compare tables; kind picks units.
MEASURE_COLS = [
    ("req/s", "rps", "rate"),
    ("p50", "p50_ns", "duration"),
    ("p99", "p99_ns", "duration"),
    ("CPU/req", "cpu_ns_per_request", "duration"),
    ("allocs/req", "allocs_per_request", "count"),
    ("native allocs/req", "native_allocs_per_request", "count"),
    ("alloc/req", "alloc_bytes_per_request", "size"),
    ("GC/10k req", "gc_per_10k", "count"),
    ("peak RSS", "peak_rss_bytes", "size"),
    # Present only for deterministic runs (dropped when no row has them).
    ("instr/req", "instructions_per_request", "count"),
    ("syscalls/req", "syscalls_per_request", "count"),
]
BENCH_COLS = [
    ("req/s", "rps", "rate"),
    ("p50", "p50_ns", "duration"),
    ("p99", "p99_ns", "duration"),
    ("p99.9", "p999_ns", "duration"),
    ("max", "max_ns", "duration"),
    ("errors", "errors", "count"),
    ("CPU/req", "cpu_ns_per_request", "duration"),
    ("in", "bytes_in_per_s", "byterate"),
]


# columns whose ± is the median's confidence interval, as in compare's tables
_CI_KEYS = frozenset({"p50_ns", "cpu_ns_per_request"})


def _group_cells(rows: list[dict[str, Any]], cols: list[tuple[str, str, str]],
                 first: str = "client") -> tuple[list[str], list[list[str]], bool]:
    """Headers and cells of a per-client table (medians over repeats ± half range)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r[first], []).append(r)
    # Drop columns with no data at all (e.g. native allocs when the counter was off).
    cols = [c for c in cols if any(not isnan(r[c[1]]) for r in rows)]
    units = {key: column_unit((r[key] for r in rows), kind) for _, key, kind in cols}
    headers = [first]
    for title, key, _kind in cols:
        headers.append(f"{title} ({units[key]})" if units[key] else title)
    has_notes = any(r["notes"] for r in rows)
    if has_notes:
        headers.append("notes")
    out = []
    for name, rs in groups.items():
        cells = [name] + [(median_ci_cell if key in _CI_KEYS else median_cell)(
            [r[key] for r in rs], kind, units[key]) for _, key, kind in cols]
        if has_notes:
            cells.append(rs[0]["notes"])
        out.append(cells)
    return headers, out, has_notes


def _align(headers: Sequence[str], has_notes: bool) -> str:
    """First column (and a notes column) left-aligned, numbers right-aligned."""
    return "l" + "r" * (len(headers) - 2) + ("l" if has_notes else "r")


def group_table(rows: list[dict[str, Any]], fmt: str, cols: list[tuple[str, str, str]],
                first: str = "client") -> str:
    """``rows`` as one table in ``fmt`` (text, md, html): a row per ``first``, repeats
    grouped into medians ± half range."""
    headers, cells, has_notes = _group_cells(rows, cols, first)
    return render_table(headers, cells, fmt, align=_align(headers, has_notes))


def format_resultset(rs: ResultSet, fmt: str = "text") -> str:
    """One table per scenario, under its placement and the machine's wake-up cost:
    measured cells as ``compare`` prints them (:func:`cell_rows`, notes included);
    load-test rows as medians over repeats ± half range."""
    rows = result_rows(rs)
    parts = []
    heading = (lambda s: f"## {s}") if fmt == "md" else (lambda s: f"{s}\n{'=' * len(s)}")
    for sc in rs.scenarios:
        srows = [r for r in rows if r["scenario"] == sc]
        nrep = max(r["repeat"] for r in srows) + 1
        cells = cell_rows(rs, sc)
        # a pytest baseline names no scenario ("-"): say where the results came from
        name = sc if sc.strip("-") else str(rs.metadata.get("source") or "results")
        if cells:
            title, ci = name, caption(cells, rs.metadata, sc) + "\n\n"
            grid = compare_table(cells, fmt)
        else:
            cov = median_ci(range(nrep))[2]
            title = name + (f" (median of {nrep} repeats ± half range)" if nrep > 1 else "")
            ci = (f"p50 and CPU/req: ± half the {cov:.0%} order-statistic confidence interval "
                  "of the median\n\n" if nrep > 1 else "")
            grid = group_table(srows, fmt, BENCH_COLS)
        spec = (rs.metadata.get("scenarios") or {}).get(sc) or {}
        if spec.get("protocol") == "h2":
            title += (f" — HTTP/2 ({'h2' if spec.get('tls') else 'h2c'}), "
                      f"{spec.get('concurrency', 1)} stream(s) on one connection")
        elif spec.get("protocol") == "h3":
            title += " — HTTP/3 (QUIC), one request at a time on one connection"
        where = "\n".join(x.strip() for x in placement_lines(rs.metadata, sc))
        parts.append(heading(title) + "\n\n" + ci + (where + "\n\n" if where else "") + grid)
    speed = speed_line(rs.metadata)
    if speed:
        parts.append(speed)
    if rs.notes:
        bullet = "- " if fmt == "md" else "  * "
        parts.append(("**Notes**" if fmt == "md" else "Notes:") + "\n"
                     + "\n".join(bullet + str(n) for n in rs.notes))
    if rs.skipped:
        bullet = "- " if fmt == "md" else "  * "
        parts.append(("**Skipped**" if fmt == "md" else "Skipped:") + "\n"
                     + "\n".join(bullet + line for line in skip_lines(rs.skipped)))
    return "\n\n".join(parts) + "\n"


def measure_rows(r: MeasureResult) -> list[list[str]]:
    rows: list[list[str]] = [
        ["calls", U.format_count(r.calls)],
        ["wall time", U.format_duration(r.wall_ns)],
        ["calls/s", U.format_count(r.calls_per_s)],
    ]
    for p, v in r.percentiles((50, 90, 99, 99.9)).items():
        rows.append([f"p{p:g}", U.format_duration(v)])
    rows.append(["max", U.format_duration(hist_stat(r.latency, "max"))])
    rows.append(["CPU/call (client)", U.format_duration(r.cpu_ns_per_call)])
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
    if r.instructions_per_call is not None:
        rows.append(["instructions/call", U.format_count(r.instructions_per_call)])
    if r.syscalls_per_call is not None:
        rows.append(["syscalls/call", U.format_count(r.syscalls_total_per_call)])
        top = sorted(r.syscalls_per_call.items(), key=lambda kv: (-kv[1], kv[0]))[:6]
        rows.append(["  by name", ", ".join(f"{k} {U.format_count(v)}" for k, v in top)])
    return rows


def _measure_table(r: MeasureResult, fmt: str) -> str:
    title = f"measure: {r.label}"
    body = render_table(["metric", "value"], measure_rows(r), fmt, align="lr")
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
        return ab_report(obj) if fmt == "text" else group_table(result_rows(obj), fmt,
                                                                 BENCH_COLS) + "\n"
    if isinstance(obj, MeasureResult):
        return _measure_table(obj, fmt)
    rows = result_rows(obj)  # a list of records
    kinds = {r["kind"] for r in rows}
    return group_table(rows, fmt, BENCH_COLS if kinds == {"bench"} else MEASURE_COLS,
                        first="client") + "\n"
