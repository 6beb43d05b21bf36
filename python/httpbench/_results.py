"""Immutable result records, their versioned JSON schema, and loading/saving.

Records (all frozen dataclasses with ``__slots__``):

* :class:`BenchResult` - one run of the native load generator (``httpbench.bench``).
* :class:`MeasureResult` - one run of ``httpbench.measure`` / ``measure_async``.
* :class:`ResultSet` - a compare run: records keyed by ``(client, scenario, repeat)``
  plus run metadata, skipped clients and anomaly notes.

Units (one rule, everywhere): **every duration and latency is in nanoseconds**
(field names end in ``_ns``; histograms record ns), timestamps are Unix epoch
nanoseconds (``*_unix_ns``), sizes are bytes (``*_bytes``), rates are per second
(``*_per_s`` / ``rps``). Human-friendly formatting lives in ``httpbench._units``.

Histograms are ``httpbench.Histogram`` objects (duck-typed: ``encode()``,
``Histogram.decode(bytes)``, ``percentile(p)``, ``count``, ``min``, ``max``,
``mean``, ``stddev``, iteration over ``(value, count)``). In JSON they are
embedded in their compact binary encoding, base64 encoded, next to a few
informative summary numbers that are ignored on load.

Records are shallowly immutable: fields cannot be reassigned; treat the dicts
and histograms they hold as read-only. Files are JSON (optionally gzip when the
path ends in ``.gz``), never pickle.
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
import io
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._hist import (
    decode_histogram,
    encode_histogram,
    hist_count,
    hist_percentile,
    hist_stat,
    is_histogram,
    percentiles,
)

if TYPE_CHECKING:
    from ._core import Histogram

__all__ = [
    "SCHEMA_VERSION",
    "FILE_FORMAT",
    "ERROR_TYPES",
    "ALLOC_DOMAINS",
    "DEFAULT_PERCENTILES",
    "BenchConfig",
    "BenchResult",
    "WorkerResult",
    "MeasureResult",
    "Note",
    "ResultSet",
    "Result",
    "load",
    "loads",
    "save",
    "dumps",
    "result_from_dict",
    "encode_histogram",
    "decode_histogram",
]

# Schema of the JSON files (and of to_dict()). Bump on any incompatible change
# and add a migration in _MIGRATIONS from the previous version.
# History:
#   1 (httpbench 0.1.0): first schema - BenchResult, MeasureResult, ResultSet;
#     histograms as base64 of Histogram.encode(); all times in ns.
#   2: one machine-metadata collector for every kind of result (httpbench._metadata):
#     measure()'s "cpu_count" became "cpus" (usable CPUs) and its "kernel" gained the
#     system name ("Linux 6.1.0"), as compare runs had; a compare worker's
#     "python_impl" became "python_implementation".
#   3: deterministic counts - MeasureResult gained instructions_per_call,
#     instructions_by_call, syscalls_per_call (by name) and syscalls_by_call;
#     version-2 files load with them absent (None).
#   4: "cpus" is a count on every surface: a compare worker's list of the CPUs it
#     may run on moved to "affinity" and its "cpus" became that list's length.
SCHEMA_VERSION = 4
FILE_FORMAT = "httpbench-results"

# Typed transport errors a load-generator run counts.
ERROR_TYPES = ("connect", "tls", "write", "read", "timeout", "protocol", "closed")
# Python allocator domains (PyMem_SetAllocator).
ALLOC_DOMAINS = ("raw", "mem", "obj")
DEFAULT_PERCENTILES = (50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0)


# --------------------------------------------------------------------------
# histograms in JSON


def _hist_to_json(h: Any) -> dict[str, Any] | None:
    if h is None:
        return None
    out: dict[str, Any] = {"encoding": "hb-base64", "data": encode_histogram(h)}
    # Informative only (for jq/grep readers); ignored on load.
    n = hist_count(h)
    out["count"] = n
    if n:
        out["summary_ns"] = {
            "min": hist_stat(h, "min"),
            "p50": hist_percentile(h, 50),
            "p99": hist_percentile(h, 99),
            "max": hist_stat(h, "max"),
        }
    return out


def _hist_from_json(obj: Any, where: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, str):
        return decode_histogram(obj)
    if not isinstance(obj, Mapping) or "data" not in obj:
        raise ValueError(f"{where}: expected an encoded histogram, got {type(obj).__name__}")
    if obj.get("encoding", "hb-base64") != "hb-base64":
        raise ValueError(f"{where}: unknown histogram encoding {obj.get('encoding')!r}")
    return decode_histogram(obj["data"])


# --------------------------------------------------------------------------
# small field codecs


def _req(d: Mapping[str, Any], key: str, where: str) -> Any:
    try:
        return d[key]
    except KeyError:
        raise ValueError(f"{where}: missing required field {key!r}") from None


def _as_int(v: Any, where: str, *, optional: bool = False) -> int | None:
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (
        isinstance(v, float) and not v.is_integer()
    ):
        raise ValueError(f"{where}: expected an integer, got {v!r}")
    return int(v)


def _as_float(v: Any, where: str, *, optional: bool = False) -> float | None:
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{where}: expected a number, got {v!r}")
    return float(v)


def _as_dict(v: Any, where: str) -> dict:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise ValueError(f"{where}: expected an object, got {type(v).__name__}")
    return dict(v)


def _int_map(v: Any, where: str, *, int_keys: bool = False) -> dict:
    out = {}
    for k, n in _as_dict(v, where).items():
        if int_keys:
            try:
                k = int(k)
            except (TypeError, ValueError):
                raise ValueError(f"{where}: key {k!r} is not an integer") from None
        out[k] = _as_int(n, f"{where}[{k!r}]")
    return out


def _int_tuple(v: Any, where: str) -> tuple[int, ...]:
    if v is None:
        return ()
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"{where}: expected a list, got {type(v).__name__}")
    return tuple(_as_int(x, f"{where}[{i}]") for i, x in enumerate(v))


def _check_counts(rec: Any, names: Iterable[str]) -> None:
    """Counts, sizes and durations are never negative (None = not measured)."""
    for name in names:
        v = getattr(rec, name)
        if v is not None and v < 0:
            raise ValueError(f"{type(rec).__name__}.{name} must be >= 0, got {v!r}")


def _per(total: float | None, n: int) -> float:
    """total / n, NaN when either is missing or n is 0 (never a fake 0 or inf)."""
    if total is None or not n:
        return math.nan
    return total / n


def _rate(count: int | float, duration_ns: int) -> float:
    return count * 1e9 / duration_ns if duration_ns > 0 else math.nan


def _jsonable(v: Any) -> Any:
    """Metadata values: keep JSON types, stringify anything else (never pickle)."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return str(v)


def _num_json(v: float | None) -> float | None:
    return v if v is None or math.isfinite(v) else None


def _passthrough(cls: Any, d: Mapping[str, Any], kw: dict[str, Any]) -> None:
    """Fields added later by other components (with defaults) round-trip as plain JSON."""
    for f in dataclasses.fields(cls):
        if f.name not in kw and f.name in d:
            v = d[f.name]
            kw[f.name] = tuple(v) if isinstance(v, list) else v


class _RecordMixin:
    """Shared behaviour: equality through the JSON form, short repr, save, Jupyter."""

    __slots__ = ()
    KIND: str = ""

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError

    @classmethod
    def _from_dict_doc(cls, d: Any) -> dict[str, Any]:
        """``d`` as a dict whose ``kind`` tag, if any, is this class's; ValueError otherwise."""
        w = cls.KIND
        d = _as_dict(d, w)
        if d.get("kind", w) != w:
            raise ValueError(f"expected kind {w!r}, got {d.get('kind')!r}")
        return d

    def __eq__(self, other: object) -> bool:
        # Histograms have no value equality of their own; their encodings do.
        if type(other) is not type(self):
            return NotImplemented
        return self.to_dict() == other.to_dict()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write this record to ``path`` as a versioned JSON file (gzip if ``.gz``)."""
        save(self, path)  # type: ignore[arg-type]

    def to_json(self, indent: int | None = None) -> str:
        """The file form (with schema version) as a JSON string."""
        return dumps(self, indent=indent)  # type: ignore[arg-type]

    def to_dataframe(self) -> Any:
        """A one-row pandas DataFrame (see ``httpbench.report.DATAFRAME_COLUMNS``)."""
        from .report import to_dataframe

        return to_dataframe(self)

    def summary(self, fmt: str = "text") -> str:
        """A readable table of this record (``fmt``: "text", "md" or "json")."""
        from .report import format_result

        return format_result(self, fmt)

    def plot(self, kind: str = "percentiles", **kwargs: Any) -> Any:
        """A matplotlib Figure of this record; see ``httpbench.plot.plot`` for kinds."""
        from .plot import plot

        return plot(self, kind=kind, **kwargs)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .report import mimebundle

        return mimebundle(self)

    def __str__(self) -> str:
        try:
            return self.summary("text")
        except Exception:  # never let a formatting bug hide the object
            return repr(self)


class _ResultMixin(_RecordMixin):
    """What BenchResult and MeasureResult share: latency percentiles, budgets, to_dict."""

    __slots__ = ()

    latency: Histogram  # the main latency histogram (a dataclass field of each subclass)

    def _field_to_json(self, name: str, v: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def p50(self) -> float:
        """Median of the ``latency`` histogram, ns."""
        return hist_percentile(self.latency, 50)

    @property
    def p90(self) -> float:
        """90th percentile of the ``latency`` histogram, ns."""
        return hist_percentile(self.latency, 90)

    @property
    def p99(self) -> float:
        """99th percentile of the ``latency`` histogram, ns."""
        return hist_percentile(self.latency, 99)

    @property
    def p999(self) -> float:
        """99.9th percentile of the ``latency`` histogram, ns."""
        return hist_percentile(self.latency, 99.9)

    def assert_budget(self, **budget: Any) -> list[Any]:
        """Raise ``httpbench.BudgetExceeded`` unless every limit holds (see ``httpbench._budget``)."""
        from ._budget import assert_budget

        return assert_budget(self, **budget)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``kind`` tag, histograms base64-encoded, times in ns)."""
        d: dict[str, Any] = {"kind": self.KIND}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            d[f.name] = self._field_to_json(f.name, getattr(self, f.name))
        return d


# --------------------------------------------------------------------------
# BenchResult


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What a load-generator run was asked to do.

    ``n``: total requests (None: run for ``duration_ns``); ``duration_ns``: run
    length in ns (None: run ``n`` requests); ``concurrency``: connections;
    ``threads``: event-loop threads; ``rate``: target requests/s for the
    constant-rate (coordinated-omission corrected) mode, None for closed loop;
    ``keepalive``: reuse connections; ``pipeline``: requests in flight per
    connection; ``timeout_ns``: per-request timeout; ``warmup_ns``: warm-up not
    counted; ``extra``: anything else (headers, body size, verify, ...).
    """

    n: int | None = None
    duration_ns: int | None = None
    concurrency: int = 1
    threads: int = 1
    rate: float | None = None
    keepalive: bool = True
    pipeline: int = 1
    timeout_ns: int | None = None
    warmup_ns: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    protocol: str = "http/1.1"  # "http/1.1" or "h2"
    streams: int = 1  # HTTP/2: concurrent streams per connection

    @property
    def constant_rate(self) -> bool:
        """True for a constant-rate (open-loop) run."""
        return self.rate is not None

    @property
    def h2_shape(self) -> str:
        """An HTTP/2 run's connections and streams as the CLI spells them (``h2 -c16 -m10``);
        ``""`` over HTTP/1.1."""
        return f"h2 -c{self.concurrency} -m{self.streams}" if self.protocol == "h2" else ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "n": self.n,
            "duration_ns": self.duration_ns,
            "concurrency": self.concurrency,
            "threads": self.threads,
            "rate": self.rate,
            "keepalive": self.keepalive,
            "pipeline": self.pipeline,
            "timeout_ns": self.timeout_ns,
            "warmup_ns": self.warmup_ns,
            "extra": _jsonable(self.extra),
            "protocol": self.protocol,
            "streams": self.streams,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchConfig:
        """Inverse of :meth:`to_dict`; ValueError on bad data."""
        w = "BenchConfig"
        d = _as_dict(d, w)
        return cls(
            n=_as_int(d.get("n"), f"{w}.n", optional=True),
            duration_ns=_as_int(d.get("duration_ns"), f"{w}.duration_ns", optional=True),
            concurrency=_as_int(d.get("concurrency", 1), f"{w}.concurrency"),
            threads=_as_int(d.get("threads", 1), f"{w}.threads"),
            rate=_as_float(d.get("rate"), f"{w}.rate", optional=True),
            keepalive=bool(d.get("keepalive", True)),
            pipeline=_as_int(d.get("pipeline", 1), f"{w}.pipeline"),
            timeout_ns=_as_int(d.get("timeout_ns"), f"{w}.timeout_ns", optional=True),
            warmup_ns=_as_int(d.get("warmup_ns", 0), f"{w}.warmup_ns"),
            extra=_as_dict(d.get("extra"), f"{w}.extra"),
            protocol=_protocol(d.get("protocol", "http/1.1"), f"{w}.protocol"),
            streams=_as_int(d.get("streams", 1), f"{w}.streams"),
        )


def _protocol(v: Any, where: str) -> str:
    if v not in ("http/1.1", "h2"):
        raise ValueError(f"{where} must be 'http/1.1' or 'h2', not {v!r}")
    return str(v)


_BENCH_HISTS = ("latency", "latency_uncorrected", "connect", "tls", "ttfb", "processing",
                "setup")
# Optional BenchResult fields: in JSON only when set (older records load without them).
_BENCH_OPTIONAL = ("setup", "sends", "sends_late", "unsent", "connect_attempts",
                   "connect_failures", "connect_fd_exhausted")


@dataclass(frozen=True, slots=True)
class WorkerResult:
    """One worker's shard of a distributed run (``bench(..., cluster=...)``).

    ``status``: "ok", "interrupted" (stopped early, partial counts), "lost" (the
    worker died or left; nothing of it is in the merge), "cancelled" (never
    started), "failed". ``n``/``concurrency``/``threads``/``rate``: the share it
    was given. ``clock_offset_ns``: its clock minus the scheduler's, estimated
    within ``clock_uncertainty_ns``; ``start_unix_ns`` is on the scheduler's
    clock. ``start_late_ns``: how far past the start barrier it began.
    """

    worker: str
    shard: int = 0
    host: str = ""
    status: str = "ok"
    n: int | None = None
    concurrency: int = 1
    threads: int = 1
    rate: float | None = None
    responses: int = 0
    successes: int = 0
    errors: int = 0
    bytes_in: int = 0
    duration_ns: int = 0
    cpu_user_ns: int = 0
    cpu_sys_ns: int = 0
    clock_offset_ns: int = 0
    clock_uncertainty_ns: int = 0
    start_late_ns: int = 0
    start_unix_ns: int = 0
    series_responses: tuple[int, ...] = ()

    @property
    def rps(self) -> float:
        """Successful responses per second of this shard."""
        return _rate(self.successes, self.duration_ns)

    @property
    def cpu_ns_per_request(self) -> float:
        """Generator CPU per completed request of this shard, ns."""
        return _per(self.cpu_user_ns + self.cpu_sys_ns, self.responses + self.errors)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["series_responses"] = list(self.series_responses)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WorkerResult:
        """Inverse of :meth:`to_dict`; ValueError on bad data."""
        w = "WorkerResult"
        d = _as_dict(d, w)
        kw: dict[str, Any] = {"worker": str(_req(d, "worker", w))}
        for name in ("host", "status"):
            if name in d:
                kw[name] = str(d[name])
        for name in ("shard", "concurrency", "threads", "responses", "successes", "errors",
                     "bytes_in", "duration_ns", "cpu_user_ns", "cpu_sys_ns", "clock_offset_ns",
                     "clock_uncertainty_ns", "start_late_ns", "start_unix_ns"):
            if name in d:
                kw[name] = _as_int(d[name], f"{w}.{name}")
        kw["n"] = _as_int(d.get("n"), f"{w}.n", optional=True)
        kw["rate"] = _as_float(d.get("rate"), f"{w}.rate", optional=True)
        kw["series_responses"] = _int_tuple(d.get("series_responses"), f"{w}.series_responses")
        return cls(**kw)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BenchResult(_ResultMixin):
    """One run of the native load generator. Times in ns, sizes in bytes.

    Counting rules: ``responses`` = complete responses received (any status);
    ``successes`` = those with a 2xx status; ``non_2xx = responses - successes``;
    ``errors`` = requests that failed without a complete response, by type in
    ``error_counts`` (keys: :data:`ERROR_TYPES`, all present, 0 when none).

    Histograms (ns): ``latency`` - total request latency (for a constant-rate
    run measured from the *intended* send time, i.e. coordinated-omission
    corrected); ``latency_uncorrected`` - constant-rate runs only, measured from
    the actual send time; ``connect``/``tls``/``ttfb`` - connect time, TLS
    handshake time, time to first response byte (None when not measured);
    ``processing`` - first request byte written to last response byte.

    ``series_responses`` / ``series_errors``: successes / failures (errors +
    non-2xx) completed in each consecutive ``series_interval_ns`` interval.
    ``cpu_user_ns``/``cpu_sys_ns``: CPU the generator (all its threads) used.
    ``in_flight_at_stop``: requests sent but unanswered when the run stopped
    (reported, never counted as successes or errors). ``interrupted``: stopped
    early (Ctrl-C); the record then holds the partial run.

    Optional (None when not recorded): ``setup`` - per request, issue to first
    byte written (connect and TLS for a request that opened its connection), so
    ``setup + processing`` is each request's total time from its actual start;
    ``sends`` - measured requests sent; constant-rate runs also count
    ``sends_late`` (sent more than the lateness threshold after their scheduled
    time) and ``unsent`` (scheduled in the window, never sent): see
    :attr:`missed`. ``connect_attempts``/``connect_failures`` count connection
    attempts apart from requests; ``connect_fd_exhausted`` those that failed for
    lack of file descriptors (EMFILE/ENFILE).
    """

    KIND = "BenchResult"

    url: str
    latency: Histogram
    duration_ns: int
    method: str = "GET"
    config: BenchConfig = field(default_factory=BenchConfig)
    label: str = ""
    responses: int = 0
    successes: int = 0
    status_counts: dict[int, int] = field(default_factory=dict)
    error_counts: dict[str, int] = field(default_factory=dict)
    bytes_in: int = 0
    bytes_out: int = 0
    latency_uncorrected: Histogram | None = None
    connect: Histogram | None = None
    tls: Histogram | None = None
    ttfb: Histogram | None = None
    processing: Histogram | None = None
    connections: int = 0
    reconnects: int = 0
    in_flight_at_stop: int = 0
    interrupted: bool = False
    cpu_user_ns: int = 0
    cpu_sys_ns: int = 0
    start_unix_ns: int = 0
    end_unix_ns: int = 0
    series_interval_ns: int = 1_000_000_000
    series_responses: tuple[int, ...] = ()
    series_errors: tuple[int, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    # Distributed runs only (in JSON only when set): the shards, and whether any was lost.
    workers: tuple[WorkerResult, ...] = ()
    partial: bool = False
    setup: Histogram | None = None
    sends: int | None = None
    sends_late: int | None = None
    unsent: int | None = None
    connect_attempts: int | None = None
    connect_failures: int | None = None
    connect_fd_exhausted: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "workers", tuple(
            w if isinstance(w, WorkerResult) else WorkerResult.from_dict(w)
            for w in self.workers))
        cfg = self.config
        if isinstance(cfg, Mapping):
            object.__setattr__(self, "config", BenchConfig.from_dict(cfg))
        elif not isinstance(cfg, BenchConfig):
            raise TypeError(f"config must be a BenchConfig or a dict, not {type(cfg).__name__}")
        if not is_histogram(self.latency):
            raise TypeError("latency must be a Histogram")
        for name in _BENCH_HISTS[1:]:
            v = getattr(self, name)
            if v is not None and not is_histogram(v):
                raise TypeError(f"{name} must be a Histogram or None")
        errs = {k: 0 for k in ERROR_TYPES}
        errs.update({str(k): int(v) for k, v in dict(self.error_counts).items()})
        object.__setattr__(self, "error_counts", errs)
        object.__setattr__(
            self, "status_counts", {int(k): int(v) for k, v in dict(self.status_counts).items()}
        )
        object.__setattr__(self, "series_responses", tuple(int(x) for x in self.series_responses))
        object.__setattr__(self, "series_errors", tuple(int(x) for x in self.series_errors))
        object.__setattr__(self, "metadata", dict(self.metadata))
        if not self.label:
            object.__setattr__(self, "label", self.url)
        _check_counts(self, (
            "duration_ns", "responses", "successes", "bytes_in", "bytes_out", "connections",
            "reconnects", "in_flight_at_stop", "cpu_user_ns", "cpu_sys_ns",
            "series_interval_ns"))
        for k, v in self.error_counts.items():
            if v < 0:
                raise ValueError(f"BenchResult.error_counts[{k!r}] must be >= 0, got {v}")
        if self.successes > self.responses:
            raise ValueError(
                f"successes ({self.successes}) cannot exceed responses ({self.responses})"
            )

    # derived counts and rates
    @property
    def non_2xx(self) -> int:
        """Complete responses whose status was not 2xx."""
        return self.responses - self.successes

    @property
    def errors(self) -> int:
        """Requests that failed without a complete response (sum of error_counts)."""
        return sum(self.error_counts.values())

    @property
    def failures(self) -> int:
        """Everything that was not a success: errors + non-2xx responses."""
        return self.errors + self.non_2xx

    @property
    def duration_s(self) -> float:
        """Measured run length in seconds (convenience; the field is duration_ns)."""
        return self.duration_ns / 1e9

    @property
    def rps(self) -> float:
        """Successful (2xx) responses per second - the headline rate."""
        return _rate(self.successes, self.duration_ns)

    success_rps = rps

    @property
    def error_rps(self) -> float:
        """Failed requests (transport errors + non-2xx responses) per second."""
        return _rate(self.failures, self.duration_ns)

    @property
    def bytes_in_per_s(self) -> float:
        """Bytes received per second (headers + bodies, as on the wire)."""
        return _rate(self.bytes_in, self.duration_ns)

    @property
    def bytes_out_per_s(self) -> float:
        """Bytes sent per second."""
        return _rate(self.bytes_out, self.duration_ns)

    @property
    def cpu_ns(self) -> int:
        """Generator CPU time, user + sys, ns."""
        return self.cpu_user_ns + self.cpu_sys_ns

    @property
    def cpu_ns_per_request(self) -> float:
        """Generator CPU (user+sys) per completed request (responses + errors), ns."""
        return _per(self.cpu_ns, self.responses + self.errors)

    @property
    def target_rate(self) -> float | None:
        """Constant-rate runs: the scheduled send rate (requests/s); None in closed loop."""
        return self.config.rate or None

    @property
    def send_rate(self) -> float | None:
        """Requests actually sent per second of the measured window (None if not recorded)."""
        return None if self.sends is None else _rate(self.sends, self.duration_ns)

    @property
    def missed(self) -> int | None:
        """Constant-rate runs: scheduled sends that went out late or never (None otherwise)."""
        if not self.config.rate or self.sends_late is None or self.unsent is None:
            return None
        return self.sends_late + self.unsent

    # latency
    def percentiles(
        self, ps: Iterable[float] = DEFAULT_PERCENTILES, which: str = "latency"
    ) -> dict[float, float]:
        """``{p: value_ns}`` for the histogram named ``which`` (a field name)."""
        if which not in _BENCH_HISTS:
            raise ValueError(f"unknown histogram {which!r}; one of {_BENCH_HISTS}")
        return percentiles(getattr(self, which), ps)

    def __repr__(self) -> str:
        h2 = f" {self.config.h2_shape}" if self.config.h2_shape else ""
        return (
            f"<BenchResult {self.method} {self.url}{h2} {self.successes}/{self.responses} ok, "
            f"{self.errors} errors, {self.rps:.1f} req/s, p50={self.p50:.0f}ns "
            f"p99={self.p99:.0f}ns{' interrupted' if self.interrupted else ''}>"
        )

    @property
    def lost(self) -> tuple[WorkerResult, ...]:
        """The shards of a distributed run that were lost (empty otherwise)."""
        return tuple(w for w in self.workers if w.status == "lost")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``workers``/``partial`` only for distributed runs."""
        d = _ResultMixin.to_dict(self)
        if not self.workers:
            del d["workers"]
        if not self.partial:
            del d["partial"]
        for name in _BENCH_OPTIONAL:
            if d.get(name) is None:
                d.pop(name, None)
        return d

    def _field_to_json(self, name: str, v: Any) -> Any:
        if name in _BENCH_HISTS:
            return _hist_to_json(v)
        if name == "workers":
            return [w.to_dict() for w in v]
        if name == "config":
            return v.to_dict()
        if name == "status_counts":
            return {str(k): n for k, n in sorted(v.items())}
        if name in ("series_responses", "series_errors"):
            return list(v)
        if name in ("metadata", "error_counts"):
            return _jsonable(v)
        return v

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchResult:
        """Inverse of :meth:`to_dict`; ValueError on missing or malformed fields."""
        w = cls.KIND
        d = cls._from_dict_doc(d)
        kw: dict[str, Any] = {
            "url": str(_req(d, "url", w)),
            "latency": _hist_from_json(_req(d, "latency", w), f"{w}.latency"),
            "duration_ns": _as_int(_req(d, "duration_ns", w), f"{w}.duration_ns"),
            "method": str(d.get("method", "GET")),
            "config": BenchConfig.from_dict(d.get("config") or {}),
            "label": str(d.get("label", "")),
            "status_counts": _int_map(d.get("status_counts"), f"{w}.status_counts", int_keys=True),
            "error_counts": _int_map(d.get("error_counts"), f"{w}.error_counts"),
            "interrupted": bool(d.get("interrupted", False)),
            "series_responses": _int_tuple(d.get("series_responses"), f"{w}.series_responses"),
            "series_errors": _int_tuple(d.get("series_errors"), f"{w}.series_errors"),
            "metadata": _as_dict(d.get("metadata"), f"{w}.metadata"),
            "partial": bool(d.get("partial", False)),
        }
        if d.get("workers") is not None:
            if not isinstance(d["workers"], list):
                raise ValueError(f"{w}.workers: expected a list")
            kw["workers"] = tuple(WorkerResult.from_dict(x) for x in d["workers"])
        for name in _BENCH_HISTS[1:]:
            kw[name] = _hist_from_json(d.get(name), f"{w}.{name}")
        for name in (
            "responses", "successes", "bytes_in", "bytes_out", "connections", "reconnects",
            "in_flight_at_stop", "cpu_user_ns", "cpu_sys_ns", "start_unix_ns", "end_unix_ns",
            "series_interval_ns",
        ):
            if name in d:
                kw[name] = _as_int(d[name], f"{w}.{name}")
        _passthrough(cls, d, kw)
        return cls(**kw)


# --------------------------------------------------------------------------
# MeasureResult


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class MeasureResult(_ResultMixin):
    """One run of ``measure()`` / ``measure_async()``. Times in ns, sizes in bytes.

    Totals over the measured span (warm-up excluded): ``calls`` completed calls,
    ``wall_ns`` elapsed wall time, ``latency`` histogram of per-call wall time
    (ns), ``cpu_user_ns``/``cpu_sys_ns`` the client's CPU (the process's, less
    the threads of any in-process server; see docs/metrics.md), ``cpu_thread_ns``
    the calling thread's CPU.

    Python allocations (None when ``alloc=False``): ``alloc_counts`` /
    ``alloc_bytes`` map each domain of :data:`ALLOC_DOMAINS` to the number of
    allocations / bytes requested, attributed to ``fn`` - the calibrated
    harness overhead (``overhead_allocs_per_call`` per call) already
    subtracted; ``alloc_net_bytes``/``alloc_net_count`` are what was still
    allocated when the run ended (retained). ``native_alloc_count`` /
    ``native_alloc_bytes``: malloc calls seen by the preloaded counter (C
    libraries), None when it was not loaded.

    GC (None when ``gc=False``): ``gc_collections`` per generation (0, 1, 2),
    ``gc_pause_ns`` total time inside collections.

    Deterministic counts (None unless asked for, from a child process):
    ``instructions_per_call`` mean user-space instructions per call under
    callgrind and ``instructions_by_call`` each call's count;
    ``syscalls_per_call`` mean system calls per call by name and
    ``syscalls_by_call`` each call's total.

    ``peak_rss_bytes``: the process's peak resident set. ``overhead_ns_per_call``:
    the harness's own cost per call measured on a no-op callable in the same
    process (reported, not subtracted from latencies). ``concurrency``:
    coroutines in flight (measure_async) or 1. ``errors``: failed calls the
    caller counted (e.g. by an adapter), 0 normally.
    """

    KIND = "MeasureResult"

    label: str
    calls: int
    wall_ns: int
    latency: Histogram
    cpu_user_ns: int = 0
    cpu_sys_ns: int = 0
    cpu_thread_ns: int | None = None
    alloc_counts: dict[str, int] | None = None
    alloc_bytes: dict[str, int] | None = None
    alloc_net_bytes: int | None = None
    alloc_net_count: int | None = None
    native_alloc_count: int | None = None
    native_alloc_bytes: int | None = None
    gc_collections: tuple[int, int, int] | None = None
    gc_pause_ns: int | None = None
    peak_rss_bytes: int | None = None
    overhead_ns_per_call: float | None = None
    overhead_allocs_per_call: float | None = None
    concurrency: int = 1
    errors: int = 0
    start_unix_ns: int = 0
    end_unix_ns: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    instructions_per_call: float | None = None
    instructions_by_call: tuple[int, ...] | None = None
    syscalls_per_call: dict[str, float] | None = None
    syscalls_by_call: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not is_histogram(self.latency):
            raise TypeError("latency must be a Histogram")
        if self.instructions_per_call is not None:
            object.__setattr__(self, "instructions_per_call", float(self.instructions_per_call))
        for name in ("instructions_by_call", "syscalls_by_call"):
            v = getattr(self, name)
            if v is not None:
                t = tuple(int(x) for x in v)
                if any(x < 0 for x in t):
                    raise ValueError(f"{name} must be counts >= 0")
                object.__setattr__(self, name, t)
        if self.syscalls_per_call is not None:
            object.__setattr__(self, "syscalls_per_call", {
                str(k): float(v) for k, v in dict(self.syscalls_per_call).items()})
        for name in ("alloc_counts", "alloc_bytes"):
            v = getattr(self, name)
            if v is not None:
                m = {k: 0 for k in ALLOC_DOMAINS}
                m.update({str(k).lower(): int(n) for k, n in dict(v).items()})
                object.__setattr__(self, name, m)
        _check_counts(self, (
            "calls", "wall_ns", "cpu_user_ns", "cpu_sys_ns", "cpu_thread_ns",
            "native_alloc_count", "native_alloc_bytes", "gc_pause_ns", "peak_rss_bytes",
            "concurrency", "errors"))
        if self.gc_collections is not None:
            g = tuple(int(x) for x in self.gc_collections)
            if len(g) != 3:
                raise ValueError(f"gc_collections needs 3 generations, got {len(g)}")
            object.__setattr__(self, "gc_collections", g)
        object.__setattr__(self, "metadata", dict(self.metadata))

    @property
    def calls_per_s(self) -> float:
        """Calls per second of wall time (times concurrency is already included)."""
        return _rate(self.calls, self.wall_ns)

    rps = calls_per_s

    @property
    def cpu_ns(self) -> int:
        """Client CPU, user + sys, ns: the process's, less any in-process server's threads."""
        return self.cpu_user_ns + self.cpu_sys_ns

    @property
    def cpu_ns_per_call(self) -> float:
        """Client CPU (user+sys) per call, ns."""
        return _per(self.cpu_ns, self.calls)

    @property
    def thread_cpu_ns_per_call(self) -> float:
        """Calling thread's CPU per call, ns (NaN when not measured)."""
        return _per(self.cpu_thread_ns, self.calls)

    @property
    def allocs(self) -> int | None:
        """Python allocations over all domains (None when not tracked)."""
        return None if self.alloc_counts is None else sum(self.alloc_counts.values())

    @property
    def allocs_per_call(self) -> float:
        """Python allocations per call, all domains (NaN when not tracked)."""
        return _per(self.allocs, self.calls)

    @property
    def alloc_bytes_total(self) -> int | None:
        """Python bytes allocated over all domains (None when not tracked)."""
        return None if self.alloc_bytes is None else sum(self.alloc_bytes.values())

    @property
    def alloc_bytes_per_call(self) -> float:
        """Python bytes allocated per call, all domains (NaN when not tracked)."""
        return _per(self.alloc_bytes_total, self.calls)

    @property
    def native_allocs_per_call(self) -> float:
        """Native (malloc) allocations per call (NaN when not tracked)."""
        return _per(self.native_alloc_count, self.calls)

    @property
    def gc_total(self) -> int | None:
        """GC collections over all generations (None when not tracked)."""
        return None if self.gc_collections is None else sum(self.gc_collections)

    @property
    def gc_per_10k(self) -> float:
        """GC collections (all generations) per 10,000 calls (NaN when not tracked)."""
        return _per(None if self.gc_total is None else self.gc_total * 10_000, self.calls)

    @property
    def syscalls_total_per_call(self) -> float | None:
        """System calls per call, all names (None when not counted)."""
        if self.syscalls_per_call is None:
            return None
        return float(sum(self.syscalls_per_call.values()))

    def percentiles(self, ps: Iterable[float] = DEFAULT_PERCENTILES) -> dict[float, float]:
        """``{p: latency_ns}`` of the call latency histogram."""
        return percentiles(self.latency, ps)

    def __repr__(self) -> str:
        return (
            f"<MeasureResult {self.label!r} {self.calls} calls, {self.calls_per_s:.1f}/s, "
            f"p50={self.p50:.0f}ns p99={self.p99:.0f}ns cpu/call={self.cpu_ns_per_call:.0f}ns>"
        )

    def _field_to_json(self, name: str, v: Any) -> Any:
        if name == "latency":
            return _hist_to_json(v)
        if name == "gc_collections" and v is not None:
            return list(v)
        if name in ("overhead_ns_per_call", "overhead_allocs_per_call", "instructions_per_call"):
            return _num_json(v)
        if name in ("instructions_by_call", "syscalls_by_call") and v is not None:
            return list(v)
        if name == "metadata":
            return _jsonable(v)
        return v

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MeasureResult:
        """Inverse of :meth:`to_dict`; ValueError on missing or malformed fields."""
        w = cls.KIND
        d = cls._from_dict_doc(d)
        kw: dict[str, Any] = {
            "label": str(_req(d, "label", w)),
            "calls": _as_int(_req(d, "calls", w), f"{w}.calls"),
            "wall_ns": _as_int(_req(d, "wall_ns", w), f"{w}.wall_ns"),
            "latency": _hist_from_json(_req(d, "latency", w), f"{w}.latency"),
            "metadata": _as_dict(d.get("metadata"), f"{w}.metadata"),
        }
        for name in ("alloc_counts", "alloc_bytes"):
            if d.get(name) is not None:
                kw[name] = _int_map(d[name], f"{w}.{name}")
        if d.get("gc_collections") is not None:
            kw["gc_collections"] = _int_tuple(d["gc_collections"], f"{w}.gc_collections")
        for name in ("cpu_user_ns", "cpu_sys_ns", "concurrency", "errors", "start_unix_ns",
                     "end_unix_ns"):
            if name in d:
                kw[name] = _as_int(d[name], f"{w}.{name}")
        for name in ("cpu_thread_ns", "alloc_net_bytes", "alloc_net_count", "native_alloc_count",
                     "native_alloc_bytes", "gc_pause_ns", "peak_rss_bytes"):
            kw[name] = _as_int(d.get(name), f"{w}.{name}", optional=True)
        for name in ("overhead_ns_per_call", "overhead_allocs_per_call", "instructions_per_call"):
            kw[name] = _as_float(d.get(name), f"{w}.{name}", optional=True)
        for name in ("instructions_by_call", "syscalls_by_call"):
            if d.get(name) is not None:
                kw[name] = _int_tuple(d[name], f"{w}.{name}")
        if d.get("syscalls_per_call") is not None:
            sc = _as_dict(d["syscalls_per_call"], f"{w}.syscalls_per_call")
            kw["syscalls_per_call"] = {str(k): _as_float(v, f"{w}.syscalls_per_call.{k}")
                                       for k, v in sc.items()}
        _passthrough(cls, d, kw)
        return cls(**kw)


Result = BenchResult | MeasureResult
_KINDS: dict[str, Any] = {"BenchResult": BenchResult, "MeasureResult": MeasureResult}


def result_from_dict(d: Mapping[str, Any]) -> Result:
    """Rebuild a BenchResult or MeasureResult from its ``to_dict()`` (by its ``kind``)."""
    if not isinstance(d, Mapping):
        raise ValueError(f"expected a result object, got {type(d).__name__}")
    kind = d.get("kind")
    cls = _KINDS.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown result kind {kind!r}; expected one of {sorted(_KINDS)}")
    return cls.from_dict(d)


# --------------------------------------------------------------------------
# ResultSet


@dataclass(frozen=True, slots=True)
class Note:
    """An anomaly or remark attached to a compare run.

    ``kind``: a short machine tag ("server-saturated", "new-connections",
    "nagle-40ms", "errors", "early-answer", "spread", "worker-failed", ...);
    ``message``: the human sentence; ``client``/``scenario``/``repeat``: what
    it concerns (None: the whole run); ``severity``: "info" | "warning" | "error".
    """

    kind: str
    message: str
    client: str | None = None
    scenario: str | None = None
    repeat: int | None = None
    severity: str = "warning"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "kind": self.kind, "message": self.message, "client": self.client,
            "scenario": self.scenario, "repeat": self.repeat, "severity": self.severity,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Note:
        """Inverse of :meth:`to_dict`."""
        d = _as_dict(d, "Note")
        return cls(
            kind=str(_req(d, "kind", "Note")),
            message=str(_req(d, "message", "Note")),
            client=None if d.get("client") is None else str(d["client"]),
            scenario=None if d.get("scenario") is None else str(d["scenario"]),
            repeat=_as_int(d.get("repeat"), "Note.repeat", optional=True),
            severity=str(d.get("severity", "warning")),
        )

    def __str__(self) -> str:
        where = "/".join(x for x in (self.client, self.scenario) if x)
        if self.repeat is not None:
            where += f" #{self.repeat}"
        return f"[{self.kind}] {where + ': ' if where else ''}{self.message}"


Key = tuple[str, str, int]


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ResultSet(_RecordMixin):
    """Records of a compare run keyed by ``(client, scenario, repeat)``.

    ``results``: mapping key -> BenchResult | MeasureResult (insertion order is
    kept: the order the runs happened); ``metadata``: run-wide facts (versions,
    CPU, kernel, server, n, repeat, command line); ``notes``: anomaly
    :class:`Note`\\ s; ``skipped``: client (or "client/scenario") -> reason,
    e.g. ``"pycurl": "not installed (pip install pycurl)"``.

    Build it in one go (``ResultSet(results={...})``) or incrementally with the
    non-mutating :meth:`with_result` / :meth:`with_note` / :meth:`with_skipped`.
    """

    KIND = "ResultSet"

    results: dict[Key, Result] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    notes: tuple[Note, ...] = ()
    skipped: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        res: dict[Key, Result] = {}
        for key, r in dict(self.results).items():
            if not (isinstance(key, tuple) and len(key) == 3):
                raise ValueError(f"ResultSet key must be (client, scenario, repeat), got {key!r}")
            client, scenario, repeat = key
            if not isinstance(r, (BenchResult, MeasureResult)):
                raise TypeError(f"ResultSet value for {key!r} is {type(r).__name__}, not a result")
            res[(str(client), str(scenario), int(repeat))] = r
        object.__setattr__(self, "results", res)
        object.__setattr__(self, "metadata", dict(self.metadata))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "skipped", {str(k): str(v) for k, v in dict(self.skipped).items()})

    # building (returns new sets; the record itself never changes)
    def with_result(self, client: str, scenario: str, repeat: int, result: Result) -> ResultSet:
        """A new set with ``result`` added (or replaced) under (client, scenario, repeat)."""
        res = dict(self.results)
        res[(client, scenario, repeat)] = result
        return ResultSet(res, self.metadata, self.notes, self.skipped)

    def with_note(self, note: Note) -> ResultSet:
        """A new set with ``note`` appended."""
        return ResultSet(self.results, self.metadata, (*self.notes, note), self.skipped)

    def with_skipped(self, what: str, reason: str) -> ResultSet:
        """A new set recording that ``what`` (a client, or "client/scenario") was skipped."""
        sk = dict(self.skipped)
        sk[what] = reason
        return ResultSet(self.results, self.metadata, self.notes, sk)

    def with_metadata(self, **kw: Any) -> ResultSet:
        """A new set with metadata updated from ``kw``."""
        md = dict(self.metadata)
        md.update(kw)
        return ResultSet(self.results, md, self.notes, self.skipped)

    # access
    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self) -> Iterator[tuple[Key, Result]]:
        return iter(self.results.items())

    def __getitem__(self, key: Key) -> Result:
        return self.results[key]

    def __contains__(self, key: object) -> bool:
        return key in self.results

    def keys(self) -> list[Key]:
        """All (client, scenario, repeat) keys in run order."""
        return list(self.results)

    @property
    def clients(self) -> list[str]:
        """Client names in first-seen order."""
        return list(dict.fromkeys(k[0] for k in self.results))

    @property
    def scenarios(self) -> list[str]:
        """Scenario names in first-seen order."""
        return list(dict.fromkeys(k[1] for k in self.results))

    def get(self, client: str, scenario: str, repeat: int = 0) -> Result | None:
        """The record of one run, or None."""
        return self.results.get((client, scenario, repeat))

    def repeats(self, client: str, scenario: str) -> list[Result]:
        """All repeats of (client, scenario), ordered by repeat index."""
        ks = sorted(k for k in self.results if k[0] == client and k[1] == scenario)
        return [self.results[k] for k in ks]

    def select(
        self, *, client: str | Sequence[str] | None = None,
        scenario: str | Sequence[str] | None = None,
    ) -> ResultSet:
        """A new set with only the given client(s)/scenario(s) (and their notes)."""
        def ok(v: str | None, want: str | Sequence[str] | None) -> bool:
            if want is None or v is None:
                return True
            return v == want if isinstance(want, str) else v in want

        res = {k: r for k, r in self.results.items() if ok(k[0], client) and ok(k[1], scenario)}
        notes = tuple(n for n in self.notes if ok(n.client, client) and ok(n.scenario, scenario))
        return ResultSet(res, self.metadata, notes, self.skipped)

    def __repr__(self) -> str:
        return (
            f"<ResultSet {len(self.results)} runs, clients={self.clients}, "
            f"scenarios={self.scenarios}, {len(self.notes)} notes>"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; results as a list of {client, scenario, repeat, result}."""
        return {
            "kind": self.KIND,
            "results": [
                {"client": c, "scenario": s, "repeat": i, "result": r.to_dict()}
                for (c, s, i), r in self.results.items()
            ],
            "metadata": _jsonable(self.metadata),
            "notes": [n.to_dict() for n in self.notes],
            "skipped": dict(self.skipped),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ResultSet:
        """Inverse of :meth:`to_dict`; ValueError on malformed data."""
        w = cls.KIND
        d = cls._from_dict_doc(d)
        entries = d.get("results") or []
        if not isinstance(entries, list):
            raise ValueError(f"{w}.results: expected a list")
        res: dict[Key, Result] = {}
        for i, e in enumerate(entries):
            e = _as_dict(e, f"{w}.results[{i}]")
            key = (
                str(_req(e, "client", f"{w}.results[{i}]")),
                str(_req(e, "scenario", f"{w}.results[{i}]")),
                _as_int(e.get("repeat", 0), f"{w}.results[{i}].repeat"),
            )
            res[key] = result_from_dict(_req(e, "result", f"{w}.results[{i}]"))
        notes = tuple(Note.from_dict(n) for n in (d.get("notes") or []))
        return cls(
            results=res,
            metadata=_as_dict(d.get("metadata"), f"{w}.metadata"),
            notes=notes,
            skipped={str(k): str(v) for k, v in _as_dict(d.get("skipped"), w).items()},
        )


_KINDS["ResultSet"] = ResultSet
AnyRecord = BenchResult | MeasureResult | ResultSet


# --------------------------------------------------------------------------
# files


def _migrate(doc: dict[str, Any]) -> dict[str, Any]:
    """Bring a file document up to SCHEMA_VERSION or raise a clear ValueError."""
    v = doc.get("schema_version")
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"not an httpbench results file: schema_version is {v!r}")
    if v > SCHEMA_VERSION:
        raise ValueError(
            f"results file has schema version {v}, newer than this httpbench supports "
            f"({SCHEMA_VERSION}); upgrade httpbench to read it"
        )
    while v < SCHEMA_VERSION:
        step = _MIGRATIONS.get(v)
        if step is None:
            raise ValueError(
                f"results file has schema version {v}, which this httpbench cannot migrate "
                f"(supported: {sorted(_MIGRATIONS) + [SCHEMA_VERSION]})"
            )
        doc = step(doc)
        v = doc["schema_version"]
    return doc


def _machine_keys_v2(md: Any) -> None:
    """Rename a version-1 metadata dict's machine keys in place to the version-2 ones."""
    if not isinstance(md, dict):
        return
    if "cpu_count" in md:
        md.setdefault("cpus", md.pop("cpu_count"))
    kernel, plat = md.get("kernel"), md.get("platform")
    if isinstance(kernel, str) and " " not in kernel and isinstance(plat, str) and "-" in plat:
        md["kernel"] = f"{plat.split('-', 1)[0]} {kernel}"
    worker = md.get("worker")
    if isinstance(worker, dict) and "python_impl" in worker:
        worker.setdefault("python_implementation", worker.pop("python_impl"))


def _v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    rec = doc.get("record")
    if isinstance(rec, dict):
        _machine_keys_v2(rec.get("metadata"))
        entries = rec.get("results") if rec.get("kind") == "ResultSet" else None
        for e in entries if isinstance(entries, list) else ():
            if isinstance(e, dict) and isinstance(e.get("result"), dict):
                _machine_keys_v2(e["result"].get("metadata"))
    doc["schema_version"] = 2
    return doc


# schema version N -> function turning a version-N document into version N+1.
def _v2_to_v3(doc: dict[str, Any]) -> dict[str, Any]:
    # Only fields were added; from_dict fills absent ones with None.
    doc = dict(doc)
    doc["schema_version"] = 3
    return doc


def _each_metadata(doc: dict[str, Any]) -> Iterator[Any]:
    """The metadata dicts of a document's record (and of a ResultSet's entries)."""
    rec = doc.get("record")
    if isinstance(rec, dict):
        yield rec.get("metadata")
        entries = rec.get("results") if rec.get("kind") == "ResultSet" else None
        for e in entries if isinstance(entries, list) else ():
            if isinstance(e, dict) and isinstance(e.get("result"), dict):
                yield e["result"].get("metadata")


def _v3_to_v4(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    for md in _each_metadata(doc):
        worker = md.get("worker") if isinstance(md, dict) else None
        if isinstance(worker, dict) and isinstance(worker.get("cpus"), list):
            worker["affinity"] = worker.pop("cpus")
            worker["cpus"] = len(worker["affinity"])
    doc["schema_version"] = 4
    return doc


_MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4}


def dumps(record: AnyRecord, indent: int | None = None) -> str:
    """The file form of a record as a JSON string."""
    from ._version import __version__

    doc = {
        "format": FILE_FORMAT,
        "schema_version": SCHEMA_VERSION,
        "httpbench_version": __version__,
        "saved_unix_ns": time.time_ns(),
        "record": record.to_dict(),
    }
    return json.dumps(doc, indent=indent, allow_nan=False, ensure_ascii=False)


def loads(text: str | bytes) -> AnyRecord:
    """Parse the file form (see :func:`dumps`); ValueError on anything else."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not an httpbench results file: invalid JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FILE_FORMAT:
        raise ValueError(f"not an httpbench results file (no \"format\": \"{FILE_FORMAT}\")")
    doc = _migrate(doc)
    return result_from_dict(_req(doc, "record", "results file"))


def save(record: AnyRecord, path: str | os.PathLike[str]) -> None:
    """Write ``record`` to ``path`` as a versioned JSON document (gzip if it ends in .gz).

    The write goes to a temporary file renamed into place, so a crash never
    leaves a truncated results file.
    """
    text = dumps(record, indent=1)
    p = os.fspath(path)
    tmp = f"{p}.tmp{os.getpid()}"
    try:
        if p.endswith(".gz"):
            with gzip.open(tmp, "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
        os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load(path: str | os.PathLike[str]) -> AnyRecord:
    """Read a file written by :func:`save` (BenchResult, MeasureResult or ResultSet).

    Raises ValueError for a file that is not an httpbench results file or has a
    schema version this httpbench cannot read or migrate.
    """
    p = os.fspath(path)
    with open(p, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.GzipFile(fileobj=io.BytesIO(raw)).read()
    try:
        return loads(raw)
    except ValueError as exc:
        raise ValueError(f"{p}: {exc}") from None
