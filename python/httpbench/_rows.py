"""Result records flattened into plain rows: one dict per (client, scenario, repeat)
whose columns (:data:`DATAFRAME_COLUMNS`) are the quantities tables, DataFrames
and baseline diffs read, in base units (ns, bytes, per second); and one row per
compare cell (:func:`cell_rows`: a client's medians over its repeats of a
scenario, with their evidence) under the same names."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ._hist import hist_percentile, hist_stat
from ._machine import wakeup_limit_ns
from ._results import BenchResult, MeasureResult, ResultSet, load
from ._stats import median_ci, median_spread

__all__ = ["CELL_COLUMNS", "DATAFRAME_COLUMNS", "THIN_CALLS", "THIN_REPEATS", "as_set",
           "cell_rows", "entries", "is_thin", "isnan", "record_row", "result_rows"]

# a cell resting on fewer repeats, or on a round with fewer requests, is marked "thin"
THIN_REPEATS = 3
THIN_CALLS = 10  # the runner's default fewest requests of a timed round


def is_thin(round_calls: Sequence[int], min_requests: int | None = None) -> bool:
    """True when a cell's rounds are too few, or one of them too short, to headline."""
    least = int(min_requests or THIN_CALLS)
    return len(round_calls) < THIN_REPEATS or not round_calls or min(round_calls) < least

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
    "cpu_ns_per_request": "client CPU per request, ns (measure: process user+sys less any "
                          "in-process server's threads; bench: generator)",
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
    "instructions_per_request": "user-space instructions per call under callgrind (measure)",
    "syscalls_per_request": "system calls per call, all names, under strace (measure)",
    "concurrency": "bench: connections (requests in flight: concurrency x streams); "
                   "measure_async: coroutines",
    "threads": "load-generator threads (bench)",
    "rate": "target rate, requests/s, NaN for closed loop (bench)",
    "keepalive": "keep-alive on (bench)",
    "protocol": "'http/1.1', 'h2' or 'h3' (bench)",
    "streams": "concurrent HTTP/2 or HTTP/3 streams per connection, 1 over HTTP/1.1 (bench)",
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
    "quic_datagrams_per_request": "UDP datagrams sent + received per completed request, "
                                  "HTTP/3 only (bench)",
    "quic_pto": "QUIC probe timeouts that fired, HTTP/3 only (bench)",
    "p50_uncorrected_ns": "median latency from the actual send time, constant rate only (bench)",
    "p99_uncorrected_ns": "99th percentile from the actual send time (bench)",
    "start_unix_ns": "start time, Unix epoch ns",
    "notes": "anomaly note kinds concerning this (client, scenario), ';'-separated",
    "noise_other_pct": "CPU used by other processes during the round, % of the client's CPU "
                       "(measure, in a compare run)",
    "noise_steal_pct": "CPU steal during the round, % of the client's CPU (measure, in a "
                       "compare run)",
    "thin": "the (client, scenario) cell rests on fewer than 3 repeats or on a round under "
            "the minimum request count (measure)",
}

_NAN = math.nan


def _n(v: Any) -> float:
    return _NAN if v is None else float(v)


def _pct(noise: Any, key: str) -> float:
    v = noise.get(key) if isinstance(noise, Mapping) else None
    return _NAN if v is None else float(v) * 100


def record_row(client: str, scenario: str, repeat: int, r: Any, notes: str = "",
               thin: bool | None = None) -> dict[str, Any]:
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
            instructions_per_request=_n(r.instructions_per_call),
            syscalls_per_request=_n(r.syscalls_total_per_call),
            concurrency=float(r.concurrency),
            noise_other_pct=_pct(r.metadata.get("noise"), "other"),
            noise_steal_pct=_pct(r.metadata.get("noise"), "steal"),
            thin=is_thin([r.calls]) if thin is None else thin,
        )
    else:
        c = r.config
        row.update(
            kind="bench", requests=float(r.successes), errors=float(r.failures),
            duration_ns=float(r.duration_ns), rps=r.rps,
            cpu_ns_per_request=r.cpu_ns_per_request,
            concurrency=float(c.concurrency), threads=float(c.threads), rate=_n(c.rate),
            keepalive=c.keepalive, protocol=c.protocol, streams=float(c.streams),
            responses=float(r.responses), non_2xx=float(r.non_2xx),
            transport_errors=float(r.errors), error_rps=r.error_rps,
            bytes_in=float(r.bytes_in), bytes_out=float(r.bytes_out),
            bytes_in_per_s=r.bytes_in_per_s, connections=float(r.connections),
            reconnects=float(r.reconnects), in_flight_at_stop=float(r.in_flight_at_stop),
            interrupted=r.interrupted,
            quic_datagrams_per_request=_n(r.datagrams_per_request),
            quic_pto=_n(r.quic_pto),
            p50_uncorrected_ns=hist_percentile(r.latency_uncorrected, 50),
            p99_uncorrected_ns=hist_percentile(r.latency_uncorrected, 99),
        )
    return row


# How bench runs under one label differ, each as a label suffix: runs that share a label but
# not these are different experiments (a concurrency sweep, HTTP/1.1 against h2), not repeats.
_RUN_SHAPE: tuple[Callable[[BenchResult], str], ...] = (
    lambda r: f" {r.method}",
    lambda r: (f" {r.config.protocol} -m{r.config.streams}" if r.config.protocol in ("h2", "h3")
               else " http/1.1"),
    lambda r: f" -c{r.config.concurrency}",
    lambda r: f" --rate {r.config.rate:g}" if r.config.rate else " closed loop",
    lambda r: "" if r.config.keepalive else " no keep-alive",
    lambda r: f" pipeline {r.config.pipeline}",
)


def _run_labels(records: Sequence[BenchResult | MeasureResult]) -> list[str]:
    """Each record's label, plus what sets it apart from bench runs under the same label."""
    labels = [r.label for r in records]
    runs = {i: r for i, r in enumerate(records) if isinstance(r, BenchResult)}
    for lab in set(labels):
        group = [i for i in runs if labels[i] == lab]
        if len(group) < 2:
            continue
        for part in _RUN_SHAPE:
            vals = {i: part(runs[i]) for i in group}
            if len(set(vals.values())) > 1:
                for i, v in vals.items():
                    labels[i] += v
    return labels


def entries(obj: Any) -> list[tuple[str, str, int, Any]]:
    """(client, scenario, repeat, record) for a ResultSet, a record or a list of records.

    In a list, records with one label are repeats of one client unless they are bench runs
    made differently (method, protocol, concurrency, rate, keep-alive, pipelining): those get
    what differs added to their label, e.g. ``URL -c16`` and ``URL h2 -m10``."""
    if isinstance(obj, ResultSet):
        return [(c, s, i, r) for (c, s, i), r in obj]
    if isinstance(obj, (BenchResult, MeasureResult)):
        return [(obj.label, "", 0, obj)]
    if isinstance(obj, Iterable) and not isinstance(obj, (str, bytes, Mapping)):
        out: list[tuple[str, str, int, Any]] = []
        seen: dict[str, int] = {}
        items = list(obj)
        records = [r for r in items if not isinstance(r, ResultSet)]
        for r in records:
            if not isinstance(r, (BenchResult, MeasureResult)):
                raise TypeError(f"expected results, got {type(r).__name__}")
        labels = iter(_run_labels(records))
        for r in items:
            if isinstance(r, ResultSet):
                out.extend(entries(r))
                continue
            label = next(labels)
            i = seen.get(label, 0)
            seen[label] = i + 1
            out.append((label, "", i, r))
        return out
    raise TypeError(f"expected a ResultSet, a result or a list of results, not {type(obj).__name__}")


def result_rows(obj: Any) -> list[dict[str, Any]]:
    """Plain dict rows (the DataFrame's columns, base units) without needing pandas."""
    notes: dict[tuple[str | None, str | None], list[str]] = {}
    if isinstance(obj, ResultSet):
        for n in obj.notes:
            notes.setdefault((n.client, n.scenario), []).append(n.kind)
    least = obj.metadata.get("min_requests") if isinstance(obj, ResultSet) else None
    found = entries(obj)
    calls: dict[tuple[str, str], list[int]] = {}
    for c, s, _, r in found:
        if isinstance(r, MeasureResult):
            calls.setdefault((c, s), []).append(r.calls)
    rows = []
    for c, s, i, r in found:
        kinds = notes.get((c, s), []) + notes.get((c, None), []) + notes.get((None, s), [])
        thin = is_thin(calls[(c, s)], least) if (c, s) in calls else None
        rows.append(record_row(c, s, i, r, ";".join(dict.fromkeys(kinds)), thin))
    return rows


def isnan(v: Any) -> bool:
    """True for a missing cell (None or NaN)."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def as_set(obj: Any) -> ResultSet:
    """``obj`` (a ResultSet, a record, a list of records or a file path) as a ResultSet."""
    if isinstance(obj, ResultSet):
        return obj
    if isinstance(obj, (str, os.PathLike)):
        return as_set(load(obj))
    rs = ResultSet()
    for c, s, i, r in entries(obj):
        rs = rs.with_result(c, s, i, r)
    return rs


# A compare cell's columns: medians over the repeats under DATAFRAME_COLUMNS' names,
# plus the evidence each median rests on.
CELL_COLUMNS: dict[str, str] = {
    "client": "client name",
    "repeats": "repeats (rounds) of the cell",
    "requests": "requests measured over all repeats",
    "min_round_requests": "requests of the cell's smallest round",
    "thin": "fewer than 3 repeats, or a round under the minimum request count",
    "rps": "median requests per second",
    "rps_spread": "(CI high - CI low) / median of req/s over the repeats; 0 for one repeat",
    "rps_ci": "(low, high) confidence interval of the median req/s",
    "ci_coverage": "coverage of the median's order-statistic confidence interval",
    "p50_ns": "median over repeats of the p50 latency, ns",
    "p50_ns_ci": "(low, high) confidence interval of that median, ns",
    "p99_ns": "median of the p99 latency, ns",
    "cpu_ns_per_request": "median client CPU per request, ns",
    "cpu_ns_per_request_ci": "(low, high) confidence interval of that median, ns",
    "allocs_per_request": "median Python allocations per request",
    "native_allocs_per_request": "median native (malloc) allocations per request",
    "alloc_bytes_per_request": "median Python heap bytes allocated per request",
    "gc_per_10k": "median GC collections per 10,000 requests",
    "peak_rss_bytes": "largest peak RSS of the repeats, bytes",
    "errors": "failed calls over all repeats",
    "notes": "note kind -> how many of the cell's rounds carry it ('thin' added when thin, "
             "'wake-up' when p50 or CPU/req is within 2x of the machine's wake-up cost)",
    "instructions_per_request": "median instructions per request; None unless counted",
    "syscalls_per_request": "median syscalls per request; None unless counted",
}


def _median(values: list[float]) -> float:
    return median_spread(values)[0]


def _median_of(values: list[float | None]) -> float | None:
    """Median of the measured values; None when none was measured."""
    got = [v for v in values if v is not None]
    return _median(got) if got else None


def cell_rows(rs: ResultSet, scenario: str) -> list[dict[str, Any]]:
    """One row per client of ``scenario`` (:data:`CELL_COLUMNS`, base units): the
    medians over its ``measure()`` repeats, their confidence intervals and notes."""
    rows = []
    for client in rs.clients:
        reps = [r for r in rs.repeats(client, scenario) if isinstance(r, MeasureResult)]
        if not reps:
            continue
        rates = [r.calls_per_s for r in reps]
        rate = _median(rates)
        lo, hi, coverage = median_ci(rates)
        p50s = [r.p50 for r in reps]
        cpus = [r.cpu_ns_per_call for r in reps]
        tags: dict[str, int] = {}
        for note in rs.notes:
            if note.client == client and note.scenario == scenario:
                tags[note.kind] = tags.get(note.kind, 0) + 1
        calls = [r.calls for r in reps]
        limit = wakeup_limit_ns(rs.metadata.get("wakeup_ns"),
                                (rs.metadata.get("placement") or {}).get(scenario))
        if limit and min(_median(p50s), _median(cpus)) <= limit:
            tags["wake-up"] = 1  # the figure is within 2x of the machine's wake-up cost
        thin = is_thin(calls, rs.metadata.get("min_requests"))
        if thin:
            tags["thin"] = 1
        rows.append({
            "client": client,
            "repeats": len(reps),
            "requests": sum(calls),
            "min_round_requests": min(calls),
            "thin": thin,
            "rps": rate,
            "rps_spread": (hi - lo) / rate if rate and len(reps) > 1 else 0.0,
            "rps_ci": (lo, hi),
            "ci_coverage": coverage,
            "p50_ns": _median(p50s),
            "p50_ns_ci": median_ci(p50s)[:2],
            "p99_ns": _median([r.p99 for r in reps]),
            "cpu_ns_per_request": _median(cpus),
            "cpu_ns_per_request_ci": median_ci(cpus)[:2],
            "allocs_per_request": _median([r.allocs_per_call for r in reps]),
            "native_allocs_per_request": _median([r.native_allocs_per_call for r in reps]),
            "alloc_bytes_per_request": _median([r.alloc_bytes_per_call for r in reps]),
            "gc_per_10k": _median([r.gc_per_10k for r in reps]),
            "peak_rss_bytes": max((r.peak_rss_bytes or 0) for r in reps) or _NAN,
            "errors": sum(r.errors for r in reps),
            "notes": tags,
            "instructions_per_request": _median_of([r.instructions_per_call for r in reps]),
            "syscalls_per_request": _median_of([r.syscalls_total_per_call for r in reps]),
        })
    return rows
