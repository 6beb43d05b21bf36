"""Performance budgets: ``assert_budget(result, p99="2ms", rps=">=5000", ...)``.

A budget is a set of limits, one per metric. Each limit is parsed once
(:func:`parse_budget`) into a :class:`Limit` carrying the metric, the
comparison and the value in base units (as in the result records: durations
in ns, sizes in bytes, counts, per second, fractions; units are parsed by
``httpbench._units``). :func:`result_metrics` extracts the same metrics from a
``BenchResult`` or ``MeasureResult`` (or any object with the same fields), and
:func:`check_budget` compares the two. A failed budget raises
:class:`BudgetExceeded`, an ``AssertionError`` whose message is a small table;
an unknown metric or a malformed limit raises :class:`BudgetError`, a
``ValueError`` naming the metric and the accepted names — never a silent pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import _units
from ._hist import hist_count, hist_percentile, hist_stat
from ._tables import render_table

__all__ = [
    "METRICS",
    "BudgetError",
    "BudgetExceeded",
    "Limit",
    "Metric",
    "Row",
    "assert_budget",
    "check_budget",
    "format_table",
    "format_value",
    "metric_names",
    "parse_budget",
    "parse_limit",
    "resolve_metric",
    "result_metrics",
]


@dataclass(frozen=True)
class Metric:
    """One metric a budget can limit.

    ``kind`` selects the units accepted in limits ("duration", "count", "size",
    "rate", "byterate", "ratio"); ``upper`` is the default direction (``True``:
    the measured value must stay at or below the limit); ``deterministic``
    marks counts that baselines compare tightly rather than by timing ratio.
    """

    name: str
    kind: str
    upper: bool
    deterministic: bool
    doc: str


def _m(name: str, kind: str, upper: bool, det: bool, doc: str) -> Metric:
    return Metric(name, kind, upper, det, doc)


# Percentiles: pNN[N...] reads the first two digits as the integer part (p999 is 99.9).
PERCENTILES = {"p50": 50.0, "p75": 75.0, "p90": 90.0, "p95": 95.0, "p99": 99.0,
               "p999": 99.9, "p9999": 99.99}

METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        _m("min", "duration", True, False, "fastest request/call"),
        _m("mean", "duration", True, False, "mean latency"),
        *[_m(p, "duration", True, False, f"{v:g}th percentile latency")
          for p, v in PERCENTILES.items()],
        _m("max", "duration", True, False, "slowest request/call"),
        _m("cpu_per_request", "duration", True, False,
           "client CPU per request (measure: the process less in-process servers; "
           "bench: the generator's threads)"),
        _m("thread_cpu_per_request", "duration", True, False,
           "the calling thread's CPU per call (measure only)"),
        _m("allocs_per_request", "count", True, True, "Python heap allocations per call"),
        _m("alloc_bytes_per_request", "size", True, True, "bytes allocated per call"),
        _m("gc_collections", "count", True, True, "GC collections during the run (all generations)"),
        _m("gc_per_request", "count", True, True, "GC collections (all generations) per call"),
        _m("instructions_per_request", "count", True, True,
           "user-space instructions per call under callgrind (measure(instructions=True))"),
        _m("syscalls_per_request", "count", True, True,
           "system calls per call, all names (measure(syscalls=True))"),
        _m("gc_pause", "duration", True, False, "total GC pause time during the run"),
        _m("peak_rss", "size", True, False, "peak resident set size"),
        _m("rps", "rate", False, False, "successful requests (calls) per second"),
        _m("transfer_rate", "byterate", False, False, "bytes received per second"),
        _m("requests", "count", False, True, "completed requests (calls)"),
        _m("errors", "count", True, True,
           "failed requests (bench: transport errors + non-2xx; measure: failed calls)"),
        _m("non_2xx", "count", True, True, "responses with a status outside 200-299"),
        _m("error_rate", "ratio", True, False, "failed / attempted requests"),
        _m("ttfe_p50", "duration", True, False,
           "median time to first event of a stream (bench(stream=True))"),
        _m("ttfe_p99", "duration", True, False,
           "99th percentile time to first event of a stream (bench(stream=True))"),
        _m("gap_p99", "duration", True, False,
           "99th percentile gap between a stream's events (bench(stream=True))"),
        _m("events_per_sec", "rate", False, False, "stream events received per second"),
        _m("cpu_per_event", "duration", True, False,
           "CPU per stream event: the generator's (bench(stream=True)), or the client's "
           "per call over measure(events_per_call=)"),
        _m("allocs_per_event", "count", True, True,
           "Python heap allocations per stream event (measure(events_per_call=))"),
    ]
}

ALIASES = {
    "median": "p50",
    "p100": "max",
    "cpu_per_call": "cpu_per_request",
    "allocs_per_call": "allocs_per_request",
    "alloc_bytes_per_call": "alloc_bytes_per_request",
    "bytes_per_request": "alloc_bytes_per_request",
    "calls_per_sec": "rps",
    "requests_per_sec": "rps",
    "calls": "requests",
    "allocations": "allocs_per_request",
    "gc": "gc_per_request",
    "gc_per_call": "gc_per_request",
    "instructions": "instructions_per_request",
    "instructions_per_call": "instructions_per_request",
    "syscalls": "syscalls_per_request",
    "syscalls_per_call": "syscalls_per_request",
}


def metric_names() -> list[str]:
    """Accepted metric names (aliases excluded), in table order."""
    return list(METRICS)


class BudgetError(ValueError):
    """A malformed budget: unknown metric, bad value or unit."""

    __module__ = "httpbench"  # as users import it (and as pytest names it)


def resolve_metric(name: str) -> Metric:
    """The :class:`Metric` called ``name`` (or an alias of it); :class:`BudgetError` if unknown."""
    key = ALIASES.get(name, name)
    try:
        return METRICS[key]
    except KeyError:
        raise BudgetError(
            f"unknown budget metric {name!r}; accepted: {', '.join(METRICS)}"
            f" (aliases: {', '.join(sorted(ALIASES))})"
        ) from None


@dataclass(frozen=True)
class Limit:
    """A parsed limit: ``measured <op> value`` must hold (value in base units)."""

    metric: Metric
    op: str  # "<=", "<", ">=", ">", "=="
    value: float
    text: str  # the budget as written, for messages

    def holds(self, measured: float) -> bool:
        """Whether ``measured`` satisfies this limit (NaN never does)."""
        if math.isnan(measured):
            return False
        # Unit conversions (ns totals / calls) leave float noise; equal is equal.
        if math.isclose(measured, self.value, rel_tol=1e-9, abs_tol=1e-9):
            return "=" in self.op
        return {
            "<=": measured <= self.value,
            "<": measured < self.value,
            ">=": measured >= self.value,
            ">": measured > self.value,
            "==": measured == self.value,
        }[self.op]


_OPS = ("<=", ">=", "==", "<", ">")

_UNIT_HINTS = {
    "duration": "ns, us/µs, ms, s",
    "size": "B, KiB, MiB, GiB, kB, MB, GB",
    "byterate": "B, KiB, MiB, GiB, kB, MB, GB (optionally /s)",
    "rate": "a plain number, k or M (optionally /s)",
    "count": "a plain number, k or M",
    "ratio": "% or a fraction",
}


def _parse_quantity(metric: Metric, text: str, spec: Any) -> float:
    """Parse ``text`` (a number and an optional unit) into ``metric``'s base unit."""
    kind = metric.kind
    try:
        if kind == "duration":
            # A bare number is ambiguous (s? ms?) for latencies: parse_duration wants a unit.
            return _units.parse_duration(text)
        if kind in ("size", "byterate"):
            t = text.strip()
            if kind == "byterate" and t.lower().endswith("/s"):
                t = t[:-2]
            return _units.parse_size(t)
        if kind == "ratio":
            return _units.parse_percent(text)
        return _units.parse_count(text)
    except ValueError as exc:
        raise BudgetError(
            f"budget {metric.name}={spec!r}: {exc} (a {kind} metric takes {_UNIT_HINTS[kind]})"
        ) from None


def parse_limit(name: str, spec: Any) -> Limit:
    """Parse one budget entry, e.g. ``("p99", "2ms")`` or ``("rps", ">=5000")``.

    Strings may start with a comparison (``<=``, ``<``, ``>=``, ``>``, ``==``);
    without one the metric's default direction applies (latency, CPU,
    allocations, errors: upper bound; rps, transfer rate, requests: lower bound).
    Numbers are taken in the metric's base unit (bytes, counts, per second,
    fractions); durations need a unit ("2ms"), only 0 may go without one.
    Values are kept in base units: durations in ns, as in the result records.
    """
    metric = resolve_metric(name)
    if isinstance(spec, bool) or spec is None:
        raise BudgetError(f"budget {metric.name}={spec!r}: expected a number or a string like '2ms'")
    op = "<=" if metric.upper else ">="
    if isinstance(spec, (int, float)):
        if math.isnan(spec) or math.isinf(spec):
            raise BudgetError(f"budget {metric.name}={spec!r}: must be finite")
        if metric.kind == "duration" and spec != 0:
            raise BudgetError(
                f"budget {metric.name}={spec!r}: a duration needs a unit, e.g. '{spec}ms' or '{spec}s'"
            )
        value = float(spec)
    elif isinstance(spec, str):
        text = spec.strip()
        for candidate in _OPS:
            if text.startswith(candidate):
                op, text = candidate, text[len(candidate):]
                break
        value = _parse_quantity(metric, text, spec)
    else:
        raise BudgetError(
            f"budget {metric.name}={spec!r}: expected a number or a string like '2ms', not"
            f" {type(spec).__name__}"
        )
    if value < 0:
        raise BudgetError(f"budget {metric.name}={spec!r}: must not be negative")
    return Limit(metric, op, value, str(spec))


def _split_text(text: str) -> dict[str, str]:
    """``"instructions<2.5M, syscalls<=12"`` -> ``{"instructions": "<2.5M", ...}``."""
    out: dict[str, str] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        i = next((j for j, ch in enumerate(part) if ch in "<>="), -1)
        if i <= 0:
            raise BudgetError(f"budget {part!r}: expected 'metric<value' (or <=, >, >=, ==)")
        out[part[:i].strip()] = part[i:].strip()
    return out


def parse_budget(budget: Mapping[str, Any] | str) -> list[Limit]:
    """Parse a whole budget mapping (or ``"metric<value, ..."`` text); an empty
    budget is an error (it would check nothing)."""
    if isinstance(budget, str):
        budget = _split_text(budget)
    if not isinstance(budget, Mapping):
        raise BudgetError(f"a budget is a mapping of metric -> limit, not {type(budget).__name__}")
    if not budget:
        raise BudgetError(f"empty budget: give at least one of {', '.join(METRICS)}")
    limits = [parse_limit(name, spec) for name, spec in budget.items()]
    seen: set[str] = set()
    for lim in limits:
        if lim.metric.name in seen:
            raise BudgetError(f"budget names {lim.metric.name!r} twice (through an alias)")
        seen.add(lim.metric.name)
    return limits


# --- extracting metrics from results ------------------------------------------------------


def _finite(value: Any) -> float | None:
    """``value`` as a float, or None when absent, not a number or NaN/inf."""
    if value is None or isinstance(value, bool):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _put(out: dict[str, float], name: str, value: Any, scale: float = 1.0) -> None:
    v = _finite(value)
    if v is not None:
        out[name] = v * scale


def result_metrics(result: Any) -> dict[str, float]:
    """Every budget metric available on ``result``, in base units (ns, B, counts, 1/s).

    ``result`` is a ``BenchResult`` or ``MeasureResult`` (fields in ns and
    bytes, see ``httpbench._results``). A metric the result does not carry
    (e.g. allocations with ``alloc=False``) is absent from the dict, so a
    budget naming it fails with "not measured" instead of passing.

    ``errors`` of a BenchResult counts every failed request: transport errors
    plus non-2xx responses (``non_2xx`` alone is also available).
    ``cpu_per_request`` is the client's CPU, as everywhere else (for a
    MeasureResult the process's CPU less any in-process server's threads);
    ``thread_cpu_per_request`` is the calling thread's alone.
    """
    out: dict[str, float] = {}
    hist = getattr(result, "latency", None)
    if hist is None:
        raise TypeError(f"not an httpbench result: {type(result).__name__} has no latency histogram")
    for name, pct in PERCENTILES.items():
        _put(out, name, hist_percentile(hist, pct))
    for name in ("min", "mean", "max"):
        _put(out, name, hist_stat(hist, name))
    if hasattr(result, "calls"):  # MeasureResult
        calls = result.calls
        _put(out, "requests", calls)
        _put(out, "rps", result.calls_per_s)
        _put(out, "cpu_per_request", result.cpu_ns_per_call)
        _put(out, "thread_cpu_per_request", result.thread_cpu_ns_per_call)
        _put(out, "allocs_per_request", result.allocs_per_call)
        _put(out, "alloc_bytes_per_request", result.alloc_bytes_per_call)
        _put(out, "gc_collections", result.gc_total)
        if result.gc_total is not None and calls:
            _put(out, "gc_per_request", result.gc_total / calls)
        _put(out, "instructions_per_request", getattr(result, "instructions_per_call", None))
        _put(out, "syscalls_per_request", getattr(result, "syscalls_total_per_call", None))
        _put(out, "gc_pause", result.gc_pause_ns)
        _put(out, "peak_rss", result.peak_rss_bytes)
        _put(out, "errors", result.errors)
        per = result.metadata.get("events_per_call")
        if per:
            if result.cpu_ns_per_call is not None:
                out["cpu_per_event"] = result.cpu_ns_per_call / per
            if result.allocs_per_call is not None:
                out["allocs_per_event"] = result.allocs_per_call / per
        if calls + result.errors:
            out["error_rate"] = result.errors / (calls + result.errors)
    else:  # BenchResult
        _put(out, "requests", result.responses)
        _put(out, "rps", result.rps)
        _put(out, "cpu_per_request", result.cpu_ns_per_request)
        _put(out, "transfer_rate", result.bytes_in_per_s)
        _put(out, "errors", result.failures)
        _put(out, "non_2xx", result.non_2xx)
        attempted = result.responses + result.errors
        if attempted:
            out["error_rate"] = result.failures / attempted
        if getattr(result, "events", None) is not None:
            if hist_count(result.ttfe):
                _put(out, "ttfe_p50", hist_percentile(result.ttfe, 50.0))
                _put(out, "ttfe_p99", hist_percentile(result.ttfe, 99.0))
            if hist_count(result.gap):
                _put(out, "gap_p99", hist_percentile(result.gap, 99.0))
            if result.duration_ns:
                out["events_per_sec"] = result.events * 1e9 / result.duration_ns
            if result.events:
                out["cpu_per_event"] = (result.cpu_user_ns + result.cpu_sys_ns) / result.events
    return out


# --- checking and reporting ---------------------------------------------------------------


def format_value(kind: str, value: float) -> str:
    """``value`` (base units: ns, bytes, 1/s, fractions) readable for a metric of ``kind``."""
    if math.isnan(value):
        return "n/a"
    if kind == "duration":
        return _units.format_duration(value)
    if kind == "size":
        return _units.format_bytes(value)
    if kind == "byterate":
        return _units.format_byte_rate(value)
    if kind == "ratio":
        return _units.format_percent(value, 2)
    if kind == "rate":
        return _units.format_rate(value)
    return _units.format_count(value)


@dataclass(frozen=True)
class Row:
    """One checked limit: the limit, the measured value (NaN if absent) and the verdict."""

    limit: Limit
    measured: float
    ok: bool

    @property
    def margin(self) -> str:
        """How far the measurement is from the limit: relative, or absolute for a 0 limit."""
        if math.isnan(self.measured):
            return "not measured"
        diff = self.measured - self.limit.value
        if self.limit.value:
            return f"{diff / self.limit.value * 100:+.1f}%"
        return "+" + format_value(self.limit.metric.kind, diff) if diff >= 0 else \
            "-" + format_value(self.limit.metric.kind, -diff)


def check_budget(result: Any, limits: list[Limit] | Mapping[str, Any]) -> list[Row]:
    """Evaluate ``limits`` (parsed, or a raw budget mapping) against ``result``."""
    if isinstance(limits, Mapping):
        limits = parse_budget(limits)
    values = result if isinstance(result, Mapping) else result_metrics(result)
    rows = []
    for lim in limits:
        measured = values.get(lim.metric.name)
        measured = math.nan if measured is None else float(measured)
        rows.append(Row(lim, measured, lim.holds(measured)))
    return rows


def format_table(rows: list[Row], headers: tuple[str, ...] = ("metric", "budget", "measured",
                                                               "margin", "")) -> str:
    """Rows as an aligned text table (one line per limit, failed ones marked)."""
    cells = [headers] + [
        (
            r.limit.metric.name,
            f"{r.limit.op} {format_value(r.limit.metric.kind, r.limit.value)}",
            format_value(r.limit.metric.kind, r.measured),
            r.margin,
            "ok" if r.ok else "FAIL",
        )
        for r in rows
    ]
    return render_table(cells[0], cells[1:], style="bare")


class BudgetExceeded(AssertionError):
    """A result broke its performance budget; ``rows`` holds every checked limit."""

    def __init__(self, rows: list[Row], label: str | None = None) -> None:
        self.rows = list(rows)
        self.label = label
        failed = [r for r in self.rows if not r.ok]
        what = f" for {label}" if label else ""
        super().__init__(
            f"performance budget exceeded{what}: {len(failed)} of {len(self.rows)} limits failed\n"
            + format_table(self.rows)
        )

    @property
    def failed(self) -> list[Row]:
        """The rows whose limit did not hold."""
        return [r for r in self.rows if not r.ok]


def assert_budget(result: Any, **budget: Any) -> list[Row]:
    """Check ``result`` against ``budget``; raise :class:`BudgetExceeded` if any limit fails.

    >>> r.assert_budget(p99="2ms", cpu_per_request="80us", allocs_per_request=500,
    ...                 rps=">=5000", errors=0)   # doctest: +SKIP

    Returns the checked rows when every limit holds. A metric the result does
    not carry counts as a failure ("not measured"), never as a pass.
    """
    __tracebackhide__ = True
    rows = check_budget(result, parse_budget(budget))
    if not all(r.ok for r in rows):
        raise BudgetExceeded(rows, label=getattr(result, "label", None))
    return rows


# Shown as httpbench.BudgetExceeded in tracebacks: the public name users import.
BudgetExceeded.__module__ = "httpbench"


def __tracebackhide__(excinfo: Any) -> bool:
    """pytest leaves this module's frames out of a failure's traceback when the error is
    the budget's own (the test's line is the one to read)."""
    return bool(excinfo.errisinstance((BudgetError, BudgetExceeded)))
