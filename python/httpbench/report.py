"""Presentation of results: tables (text / Markdown / JSON), the ab-style bench
report, DataFrames, diffs of two saved results, HdrHistogram export, Jupyter
display, progress bars and the ``httpbench report`` / ``httpbench diff`` commands.

Every number in a DataFrame or a JSON report is in base units (ns, bytes, per
second); text and Markdown tables choose readable units (see ``_units``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

from . import _units as U
from ._baseline import Change, Comparison, diff
from ._cmptables import caption, compare_table, format_tables, skip_lines
from ._hdrexport import (
    export_hdr_log,
    export_histogram,
    hdr_compressed,
    hdr_hgrm,
    hdr_interval_log,
)
from ._hist import hist_count, hist_percentile, hist_stat, percentile_spectrum
from ._machine import (
    machine_change,
    machine_change_line,
    placement_lines,
    placement_text,
    speed_line,
    wakeup_text,
)
from ._results import BenchResult, MeasureResult, ResultSet, load
from ._rows import CELL_COLUMNS, DATAFRAME_COLUMNS, cell_rows, entries, isnan, result_rows
from ._stats import mann_whitney_u, median_ci, welch_t_test
from ._tables import column_unit, median_cell, median_ci_cell, render_table

__all__ = [
    "CELL_COLUMNS",
    "DATAFRAME_COLUMNS",
    "REPORT_PERCENTILES",
    "SPECTRUM",
    "Change",
    "Comparison",
    "ProgressBar",
    "ab_report",
    "cell_rows",
    "cli_main",
    "compare_table",
    "diff",
    "diff_main",
    "export_hdr_log",
    "export_histogram",
    "format_report",
    "format_result",
    "format_spectrum",
    "format_tables",
    "hdr_compressed",
    "hdr_hgrm",
    "hdr_interval_log",
    "html_diff",
    "html_diff_fragment",
    "html_fragment",
    "html_report",
    "html_tables",
    "idle_note",
    "idle_workers",
    "interactive",
    "mann_whitney_u",
    "mimebundle",
    "percentile_spectrum",
    "progress_bar",
    "result_rows",
    "to_dataframe",
    "welch_t_test",
    "write_html",
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
    # Present only for deterministic runs (dropped when no row has them).
    ("instr/req", "instructions_per_request", "count"),
    ("syscalls/req", "syscalls_per_request", "count"),
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


def _group_table(rows: list[dict[str, Any]], fmt: str, cols: list[tuple[str, str, str]],
                 first: str = "client") -> str:
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
            grid = _group_table(srows, fmt, _BENCH_COLS)
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


def _measure_rows(r: MeasureResult) -> list[list[str]]:
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
    body = render_table(["metric", "value"], _measure_rows(r), fmt, align="lr")
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


REPORT_PERCENTILES = (50, 66, 75, 80, 90, 95, 98, 99, 99.9, 100)
# Percentile ladder of --latency (HdrHistogram's "percentile distribution" style).
SPECTRUM = (0, 10, 20, 30, 40, 50, 55, 60, 65, 70, 75, 77.5, 80, 82.5, 85, 87.5, 88.75, 90,
            91.25, 92.5, 93.75, 94.375, 95, 95.625, 96.25, 96.875, 97.1875, 97.5, 97.8125,
            98.125, 98.4375, 98.59375, 98.75, 98.90625, 99, 99.21875, 99.4, 99.5, 99.6,
            99.7, 99.8, 99.9, 99.95, 99.99, 99.999, 100)


def _ms(ns: float) -> str:
    return "nan" if ns is None or math.isnan(ns) else f"{ns / 1e6:.3f}"


def _row(name: str, h: Any) -> str:
    if h is None or hist_count(h) == 0:
        return f"{name:<12}{'-':>9}{'-':>9}{'-':>8}{'-':>9}{'-':>10}"
    return (f"{name:<12}{_ms(hist_stat(h, 'min')):>9}{_ms(hist_stat(h, 'mean')):>9}"
            f"{_ms(hist_stat(h, 'stddev')):>8}{_ms(hist_percentile(h, 50)):>9}"
            f"{_ms(hist_stat(h, 'max')):>10}")


def _percentile_table(h: Any, title: str) -> list[str]:
    lines = [title]
    if h is None or hist_count(h) == 0:
        return lines + ["  (no samples)"]
    for p in REPORT_PERCENTILES:
        v = hist_percentile(h, p)
        tail = " (longest request)" if p == 100 else ""
        lines.append(f"  {p:>5g}%  {_ms(v):>10}{tail}")
    return lines


def format_spectrum(h: Any, title: str = "Latency distribution (ms)") -> str:
    """HdrHistogram-style percentile spectrum: value, percentile, count, 1/(1-p)."""
    lines = [title, f"{'Value':>12} {'Percentile':>12} {'TotalCount':>11} {'1/(1-p)':>12}"]
    # The .hgrm export's rows (hdr_hgrm): the two agree line by line.
    spec = percentile_spectrum(h)
    if not spec:
        return "\n".join(lines + ["  (no samples)"])
    for v, p, cnt in spec:
        inv = "inf" if p >= 100 else f"{1 / (1 - p / 100):.2f}"
        lines.append(f"{_ms(v):>12} {p / 100:>12.6f} {cnt:>11} {inv:>12}")
    lines.append(f"#[Mean = {_ms(hist_stat(h, 'mean'))}, StdDeviation = "
                 f"{_ms(hist_stat(h, 'stddev'))}]")
    lines.append(f"#[Max = {_ms(hist_stat(h, 'max'))}, Total count = {hist_count(h)}]")
    return "\n".join(lines)


def format_report(r: BenchResult, latency: bool = False) -> str:
    """The text report of a run, in the spirit of ApacheBench's."""
    md = r.metadata
    cfg = r.config
    secs = r.duration_ns / 1e9
    completed = r.responses + r.errors
    lines = []
    w = 24

    def kv(k: str, v: Any) -> None:
        lines.append(f"{k + ':':<{w}}{v}")

    kv("Server Software", md.get("server") or "(none)")
    kv("Server Hostname", md.get("host", ""))
    kv("Server Port", md.get("port", ""))
    if cfg.extra.get("tls"):
        resumed = md.get("tls_resumed", 0)
        if md.get("tls_info"):
            kv("SSL/TLS Protocol", md["tls_info"])
        kv("TLS", f"yes (verify {'on' if cfg.extra.get('verify') else 'OFF'}), "
                  f"{resumed} of {r.connections} handshakes resumed")
    lines.append("")
    kv("Document Path", md.get("path", ""))
    dl = md.get("doc_length", -1)
    kv("Document Length", f"{dl} bytes" if dl is not None and dl >= 0 else "(no 2xx response)")
    lines.append("")
    if cfg.protocol == "h2":
        kv("Protocol", "HTTP/2 (ALPN h2)" if cfg.extra.get("tls") else "HTTP/2 (h2c, prior knowledge)")
    elif cfg.protocol == "h3":
        kv("Protocol", "HTTP/3 (QUIC v1 over UDP, ALPN h3)")
    else:
        kv("Protocol", "HTTP/1.1")
    kv("Concurrency Level", cfg.concurrency)
    if cfg.protocol in ("h2", "h3"):
        kv("Streams per connection", f"{cfg.streams} ({cfg.concurrency * cfg.streams} in flight)")
    mode = [f"{cfg.threads} thread{'s' if cfg.threads != 1 else ''}"]
    mode.append("keep-alive" if cfg.keepalive else "new connection per request")
    if cfg.pipeline > 1:
        mode.append(f"pipeline {cfg.pipeline}")
    if cfg.rate:
        mode.append(f"constant rate {cfg.rate:g} req/s (latency from intended send time)")
    else:
        mode.append("closed loop")
    kv("Mode", ", ".join(mode))
    stopped = ""
    if md.get("gave_up_s"):
        stopped = f"  (STOPPED: no connection in the first {md['gave_up_s']:g} s)"
    kv("Time taken for tests", f"{secs:.3f} seconds"
       + ("  (INTERRUPTED)" if r.interrupted else "") + stopped)
    # with no response at all a per-request figure would only divide failures: "–"
    answered = r.responses > 0
    kv("Complete requests", completed if answered else f"0 (no response; {completed} failed)")
    kv("Failed requests", r.errors)
    if r.errors:
        parts = [f"{k.capitalize()}: {v}" for k, v in r.error_counts.items() if v]
        lines.append("   (" + ", ".join(parts) + ")")
    kv("Non-2xx responses", r.non_2xx)
    if r.non_2xx:
        codes = ", ".join(f"{k}: {v}" for k, v in sorted(r.status_counts.items())
                          if not 200 <= k <= 299)
        lines.append(f"   ({codes})")
    if r.in_flight_at_stop or cfg.duration_ns is not None or r.interrupted:
        kv("In flight at stop", r.in_flight_at_stop)
    kv("Connections opened", f"{r.connections} (reconnects: {r.reconnects})")
    if r.connect_attempts is not None and r.connect_failures:
        kv("Connection attempts", f"{r.connect_attempts} ({r.connect_failures} failed"
                                  + (f", {r.connect_fd_exhausted} for lack of file descriptors"
                                     if r.connect_fd_exhausted else "") + ")")
        errs = r.error_counts
        written = r.responses + r.errors - errs.get("connect", 0) - errs.get("tls", 0)
        if written == 0:
            why = str(md.get("first_error") or "connect failed")
            why = why.removeprefix("connect: ").lower()
            lines.append(f"   ({why}: {r.connect_attempts} attempts, 0 requests sent)")
    kv("Total transferred", f"{r.bytes_in} bytes"
       + (" (UDP payloads: QUIC headers and encryption included)" if cfg.protocol == "h3"
          else ""))
    if r.quic_datagrams_sent is not None and r.quic_datagrams_received is not None:
        per_dg = (f" ({r.datagrams_per_request:.2f} per request)"
                  if r.datagrams_per_request is not None and answered else " (– per request)")
        kv("QUIC datagrams", f"{r.quic_datagrams_sent} sent, {r.quic_datagrams_received} "
                             f"received{per_dg}")
        kv("QUIC probe timeouts", f"{r.quic_pto or 0} (loss recovery timers that fired)")
    kv("HTML transferred", f"{md.get('body_bytes_in', 0)} bytes")
    if cfg.rate:
        lines += _rate_lines(r, w)
    kv("Requests per second", f"{r.rps:.2f} [#/sec] (mean, 2xx only)")
    if r.failures:
        kv("Failures per second", f"{r.error_rps:.2f} [#/sec] (errors + non-2xx)")
    if cfg.rate:
        # The schedule sets the pace, so C * time / n says nothing: show measured latency.
        measured = r.latency_uncorrected if r.latency_uncorrected is not None else r.latency
        if hist_count(measured):
            kv("Time per request", f"{_ms(hist_stat(measured, 'mean'))} [ms] "
                                   "(mean, measured from the actual send)")
        if hist_count(r.latency):
            kv("Time per request", f"{_ms(hist_stat(r.latency, 'mean'))} [ms] "
                                   "(mean, from the intended send time)")
    elif not answered:
        kv("Time per request", "– (no response)")
    elif completed:
        # ab's concurrency x time / n; over HTTP/2 every stream slot is a concurrent request.
        inflight = cfg.concurrency * (cfg.streams if cfg.protocol in ("h2", "h3") else 1)
        kv("Time per request", f"{inflight * secs * 1e3 / completed:.3f} [ms] (mean)")
        kv("Time per request", f"{secs * 1e3 / completed:.3f} [ms] "
                               "(mean, across all concurrent requests)")
    kv("Transfer rate", f"{r.bytes_in_per_s / 1024:.2f} [Kbytes/sec] received")
    lines.append(f"{'':<{w}}{r.bytes_out_per_s / 1024:.2f} kb/s sent")
    cpu = r.cpu_user_ns + r.cpu_sys_ns
    per = (f", {cpu / completed / 1e3:.2f} µs/request" if completed and answered
           else ", – µs/request" if not answered else "")
    kv("Generator CPU", f"user {r.cpu_user_ns / 1e9:.3f} s, sys {r.cpu_sys_ns / 1e9:.3f} s{per}")
    if md.get("placement"):
        kv("Placement", placement_text(md["placement"]) + f" ({md['placement'].get('mode')})")
    if md.get("wakeup_ns"):
        kv("Machine", wakeup_text(md["wakeup_ns"]))
    if md.get("wakeup_note"):
        lines.append(f"   (note: {md['wakeup_note']})")
    if md.get("first_error"):
        kv("First error", md["first_error"])
    if cfg.protocol == "websocket":
        kv("WebSocket", "each request is one message echoed back whole (latency: round trip)")
    if r.events is not None:
        kv("Events", f"{r.events} ({r.events / secs if secs else 0:.2f} [#/sec])")
    lines.append("")
    lines.append("Connection Times (ms)")
    lines.append(f"{'':<12}{'min':>9}{'mean':>9}{'[+/-sd]':>8}{'median':>9}{'max':>10}")
    # ab's rows are per-request components: Connect (issue to first byte
    # written) + Processing = Total for every request, from its actual start.
    per_request = r.setup is not None
    lines.append(_row("Connect:", r.setup if per_request else r.connect))
    if r.tls is not None:
        lines.append(_row("Handshake:" if cfg.protocol == "h3" else "TLS:", r.tls))
    lines.append(_row("Processing:", r.processing))
    lines.append(_row("Waiting:", r.ttfb))
    total = r.latency
    if per_request and cfg.rate and r.latency_uncorrected is not None:
        total = r.latency_uncorrected
    lines.append(_row("Total:", total))
    if r.ttfe is not None:
        lines.append(_row("1st event:", r.ttfe))
        lines.append(_row("Event gap:", r.gap))
    lines.append("")
    title = "Percentage of the requests served within a certain time (ms)"
    if cfg.rate:
        title += ", from the intended send time"
    lines += _percentile_table(r.latency, title)
    if cfg.rate and r.latency_uncorrected is not None:
        lines.append("")
        lines += _percentile_table(r.latency_uncorrected,
                                   "Uncorrected (from the actual send time) (ms)")
    if latency:
        lines.append("")
        lines.append(format_spectrum(r.latency))
    if r.workers:
        lines.append("")
        lines += _worker_table(r)
    return "\n".join(lines) + "\n"


def _rate_lines(r: BenchResult, w: int) -> list[str]:
    """Constant-rate accounting: target, achieved send rate, missed sends, a warning."""
    out = [f"{'Target rate:':<{w}}{r.config.rate:.2f} [#/sec]"]
    if r.send_rate is not None:
        out.append(f"{'Achieved send rate:':<{w}}{r.send_rate:.2f} [#/sec]")
    if r.missed is not None:
        late = (r.metadata.get("late_threshold_ns") or 0) / 1e6
        out.append(f"{'Missed sends:':<{w}}{r.missed} ({r.sends_late} late by more than "
                   f"{late:g} ms, {r.unsent} never sent)")
    rate = r.config.rate or 0.0
    if r.send_rate is not None and rate and r.send_rate < 0.95 * rate:
        out.append(f"WARNING: sent {r.send_rate:.2f} req/s, {100 * r.send_rate / rate:.0f}% of "
                   f"the target {rate:g} req/s: the target (or the generator) cannot keep up; "
                   "add connections (-c) or lower -R")
    return out


def idle_workers(r: BenchResult) -> int:
    """Workers of a distributed run that got no shard (fewer connections or requests
    than workers); 0 for other runs."""
    d = r.metadata.get("distributed") or {}
    return max(0, int(d.get("workers") or 0) - int(d.get("shards") or len(r.workers)))


def idle_note(r: BenchResult) -> str:
    """'1 of 2 workers idle: -c 1 ...': why a distributed run left workers without load."""
    d = r.metadata.get("distributed") or {}
    idle, total = idle_workers(r), int(d.get("workers") or 0)
    why = (f"-c {r.config.concurrency} is fewer connections than workers"
           if r.config.concurrency < total else
           f"-n {r.config.n} is fewer requests than workers")
    return (f"{idle} of {total} worker{'s' if total != 1 else ''} idle: {why}; "
            f"use -c {total} or more to load every worker")


def _worker_table(r: BenchResult) -> list[str]:
    """The per-worker table of a distributed run, under the merged report."""
    k = len(r.workers)
    title = f"Workers ({k} shard{'s' if k != 1 else ''}"
    idle = idle_workers(r)
    if idle:
        title += f"; {idle_note(r)}"
    if r.partial:
        title += "; PARTIAL: " + ", ".join(
            f"shard {w.shard} on {w.worker} lost (n={w.n}, c={w.concurrency})" for w in r.lost)
    lines = [title + ")",
             f"{'#':>3} {'worker':<24} {'host':<14} {'status':<11} {'c':>4} {'requests':>9} "
             f"{'req/s':>10} {'errors':>7} {'CPU µs/req':>10} {'clock off ms':>13} "
             f"{'late ms':>8}"]
    for w in r.workers:
        cpu = w.cpu_ns_per_request
        off = f"{w.clock_offset_ns / 1e6:+.3f}±{w.clock_uncertainty_ns / 1e6:.3f}"
        lines.append(f"{w.shard:>3} {w.worker:<24} {w.host[:14]:<14} {w.status:<11} "
                     f"{w.concurrency:>4} {w.responses + w.errors:>9} {w.rps:>10.1f} "
                     f"{w.errors:>7} {('-' if math.isnan(cpu) else f'{cpu / 1e3:.2f}'):>10} "
                     f"{off:>13} {w.start_late_ns / 1e6:>8.2f}")
    return lines


# The name the notebooks and tests used before format_report lived here.
ab_report = format_report


# --------------------------------------------------------------------------
# Jupyter


def _html_table(rows: list[dict[str, Any]], cols: list[tuple[str, str, str]],
                first: str = "client") -> str:
    headers, cells, has_notes = _group_cells(rows, cols, first)
    return render_table(headers, cells, "html", align=_align(headers, has_notes))


def html_tables(obj: Any) -> str:
    """The tables of a result as HTML: per scenario with their ± and notes, then notes
    and skipped clients; a measure record's metrics; a bench run's row and report."""
    from ._html import e, scroll, table

    parts: list[str] = []
    if isinstance(obj, ResultSet):
        rows = result_rows(obj)
        order = list(obj.metadata.get("scenario_order") or [])
        order += [s for s in obj.scenarios if s not in order]
        descs = obj.metadata.get("scenarios") or {}
        for sc in order:
            srows = [r for r in rows if r["scenario"] == sc]
            if not srows:
                continue
            nrep = max(r["repeat"] for r in srows) + 1
            desc = (descs.get(sc) or {}).get("description") or ""
            cells = cell_rows(obj, sc)  # measured cells: compare's own table, notes and all
            if cells:
                cap, grid = caption(cells, obj.metadata, sc), compare_table(cells, "html")
            else:
                cap = (f"medians of {nrep} repeats ± half the range" if nrep > 1
                       else "one repeat")
                grid = _html_table(srows, _BENCH_COLS)
            name = sc if sc.strip("-") else str(obj.metadata.get("source") or "results")
            where = "".join(f'<p class="caption">{e(ln.strip())}</p>'
                            for ln in placement_lines(obj.metadata, sc))
            parts.append(f"<h3>{e(name)}</h3>"
                         + (f'<p class="caption">{e(desc)} ({e(cap)})</p>' if desc else
                            f'<p class="caption">{e(cap)}</p>')
                         + where + scroll(grid))
        if obj.notes:
            seen: dict[tuple[str, str, str], list[Any]] = {}
            for n in obj.notes:
                seen.setdefault((n.kind, n.client, n.scenario), []).append(n)
            items = []
            for (kind, client, sc), ns in seen.items():
                where = "/".join(x for x in (client, sc) if x)
                more = f" (in {len(ns)} rounds)" if len(ns) > 1 else ""
                items.append(f"<li>[{e(kind)}] {e(where + ': ' if where else '')}"
                             f"{e(ns[0].message)}{e(more)}</li>")
            parts.append('<h3>Notes</h3><ul class="notes">' + "".join(items) + "</ul>")
        if obj.skipped:
            parts.append('<h3>Skipped</h3><ul class="notes">' + "".join(
                f"<li>{e(line)}</li>" for line in skip_lines(obj.skipped)) + "</ul>")
    elif isinstance(obj, MeasureResult):
        parts.append(f"<h3>measure: {e(obj.label)}</h3>"
                     + table(["metric", "value"], _measure_rows(obj)))
    elif isinstance(obj, BenchResult):
        rows = result_rows(obj)
        parts.append(scroll(_html_table(rows, _BENCH_COLS)))
        parts.append("<h3>Load-test report</h3><pre>" + e(format_report(obj)) + "</pre>")
    else:
        rows = result_rows(obj)
        cols = _BENCH_COLS if rows and rows[0]["kind"] == "bench" else _MEASURE_COLS
        parts.append(scroll(_html_table(rows, cols)))
    return "\n".join(parts)


def html_fragment(obj: Any, *, plots: bool = True, prefix: str = "f") -> str:
    """The one-file report's content without the page around it (what Jupyter shows)."""
    from ._html import result_fragment

    return result_fragment(obj, html_tables(obj), plots=plots, prefix=prefix)


def html_report(obj: Any, *, plots: bool = True) -> str:
    """One self-contained HTML page of a result: tables, figures (inline SVG), machine
    and run; it loads nothing from anywhere."""
    from ._html import page, title

    return page(title(obj), html_fragment(obj, plots=plots))


def html_diff_fragment(baseline: Any, current: Any, cmp: Comparison | None = None, *,
                       names: tuple[str, str] = ("baseline", "current"), plots: bool = True,
                       prefix: str = "d") -> str:
    """Two runs side by side (settings, notes on how they are unlike, verdicts, each
    run's tables and figures), without the page around it."""
    from ._html import diff_fragment
    from ._rows import as_set

    base, cur = as_set(baseline), as_set(current)
    if cmp is None:
        cmp = diff(base, cur)
    return diff_fragment(base, cur, cmp, (html_tables(base), html_tables(cur)), names=names,
                         plots=plots, prefix=prefix)


def html_diff(baseline: Any, current: Any, cmp: Comparison | None = None, *,
              names: tuple[str, str] = ("baseline", "current"), plots: bool = True) -> str:
    """One self-contained HTML page comparing two runs."""
    from ._html import page

    return page(f"httpbench diff: {names[0]} → {names[1]}",
                html_diff_fragment(baseline, current, cmp, names=names, plots=plots))


def write_html(obj: Any, path: str | os.PathLike[str], *, plots: bool = True) -> str:
    """Write :func:`html_report` of ``obj`` to ``path``; returns the path written."""
    p = os.fspath(path)
    text = html_report(obj, plots=plots)
    with open(p, "w", encoding="utf-8") as f:
        f.write(text)
    return p


def mimebundle(obj: Any) -> dict[str, str]:
    """Jupyter rich display: the text table, and as HTML the content of the one-file
    report (``httpbench report --html``): tables, inline SVG figures, machine and run."""
    return {"text/plain": format_result(obj, "text"), "text/html": html_fragment(obj)}


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


def _tqdm_class() -> Any:
    """tqdm.auto's bar, except in a notebook without ipywidgets: there tqdm.auto warns
    (TqdmWarning: IProgress not found) and the plain text bar is what shows anyway."""
    import importlib.util

    if importlib.util.find_spec("ipywidgets") is None:
        from tqdm.std import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm


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
                self._tqdm = _tqdm_class()
            except ImportError:
                self.enabled = False

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
        extra = {}
        if getattr(p, "p50_ns", 0):
            extra = {"p50": U.format_duration(p.p50_ns), "p99": U.format_duration(p.p99_ns)}
        bar.set_postfix(ok=p.ok, failed=p.failed, **extra, refresh=False)
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
    p.add_argument("--html", metavar="OUT_HTML",
                   help="write one self-contained HTML page (tables, figures, machine and run; "
                        "with --baseline the two runs side by side) to OUT_HTML")
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
    pages: list[str] = []  # the HTML of each report or diff, when --html
    if args.baseline:
        base, currents = records[0], records[1:]
        for path, cur in zip(args.files, currents, strict=True):
            cmp = diff(base, cur, alpha=args.alpha, min_change=args.min_change)
            if args.html:
                pages.append(html_diff_fragment(base, cur, cmp, names=(args.baseline, path),
                                                prefix=f"d{len(pages)}-"))
            if len(currents) > 1 and args.format != "json":
                sys.stdout.write(f"{args.baseline} -> {path}\n\n")
            sys.stdout.write(cmp.format(args.format))
            machine = machine_change_line(machine_change(base.metadata, cur.metadata))
            if machine and args.format != "json":
                sys.stdout.write(("\n" if args.format == "md" else "") + machine + "\n")
            if args.fail_on_regression and cmp.regressions:
                rc = 1
    else:
        for path, rec in zip(args.files, records, strict=True):
            if len(records) > 1 and args.format != "json":
                sys.stdout.write(f"# {path}\n\n")
            sys.stdout.write(format_result(rec, args.format))
            if args.html:
                pages.append(html_fragment(rec, prefix=f"r{len(pages)}-"))
    if args.html:
        from ._html import page

        try:
            with open(args.html, "w", encoding="utf-8") as f:
                f.write(page("httpbench " + ("diff" if args.baseline else "report"), pages))
        except OSError as exc:
            sys.stderr.write(f"httpbench report: cannot write {args.html}: {exc.strerror}\n")
            return 2
        sys.stderr.write(f"wrote {args.html}\n")
    if args.export_hdr:
        rec = records[-1]
        if args.export_hdr.endswith(".hgrm"):
            c, sc, _i, first = next(iter(entries(rec)))
            hists = [r.latency for cc, ss, _, r in entries(rec) if (cc, ss) == (c, sc)]
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
            from .plot import save_plots
        except ImportError as exc:
            sys.stderr.write(f"httpbench report: --plot needs matplotlib ({exc}); "
                             "pip install matplotlib\n")
            return 2
        written = []
        for rec in records[-1:] if not args.baseline else records:
            written += save_plots(rec, args.plot)
        sys.stderr.write(f"wrote {len(written)} files into {args.plot}\n")
    return rc


def diff_main(argv: Sequence[str]) -> int:
    """``httpbench diff BASELINE CURRENT``: what ``httpbench report CURRENT --baseline
    BASELINE`` prints (a significance-tested change per metric)."""
    p = argparse.ArgumentParser(
        prog="httpbench diff",
        description="Compare two saved results metric by metric, with a significance test "
                    "across repeats (same as httpbench report CURRENT --baseline BASELINE).")
    p.add_argument("baseline", metavar="BASELINE", help="baseline results file or directory")
    p.add_argument("current", metavar="CURRENT", help="current results file or directory")
    p.add_argument("--format", choices=("text", "md", "json"), default="text")
    p.add_argument("--alpha", default="0.05", help="significance level (0.05)")
    p.add_argument("--min-change", default="2%",
                   help="ignore relative changes below this (default 2%%)")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when a significant regression is found")
    p.add_argument("--html", metavar="OUT_HTML",
                   help="also write the two runs side by side as one self-contained HTML page")
    try:
        args = p.parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    return cli_main([args.current, "--baseline", args.baseline, "--format", args.format,
                     "--alpha", args.alpha, "--min-change", args.min_change,
                     *(["--fail-on-regression"] if args.fail_on_regression else []),
                     *(["--html", args.html] if args.html else [])])
