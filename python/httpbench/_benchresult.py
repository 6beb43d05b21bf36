"""The load generator's records: :class:`BenchConfig` (what was asked),
:class:`BenchResult` (one run) and :class:`WorkerResult` (one shard of a
distributed run)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._benchsummary import summary_fields
from ._hist import is_histogram, percentiles
from ._jsonfields import (
    as_dict,
    as_float,
    as_int,
    hist_from_json,
    hist_to_json,
    int_map,
    int_tuple,
    jsonable,
    passthrough,
    present_ints,
    required,
)
from ._record import (
    DEFAULT_PERCENTILES,
    ERROR_TYPES,
    ResultBase,
    check_counts,
    per_second,
    ratio,
)

if TYPE_CHECKING:
    from ._core import Histogram

__all__ = ["BenchConfig", "BenchResult", "WorkerResult"]


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
    protocol: str = "http/1.1"  # "http/1.1", "h2" or "h3"
    streams: int = 1  # HTTP/2 and HTTP/3: concurrent streams per connection

    @property
    def constant_rate(self) -> bool:
        """True for a constant-rate (open-loop) run."""
        return self.rate is not None

    @property
    def h2_shape(self) -> str:
        """An HTTP/2 or HTTP/3 run's connections and streams as the CLI spells them
        (``h2 -c16 -m10``, ``h3 -c4 -m10``); ``""`` over HTTP/1.1."""
        if self.protocol in ("h2", "h3"):
            return f"{self.protocol} -c{self.concurrency} -m{self.streams}"
        return ""

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
            "extra": jsonable(self.extra),
            "protocol": self.protocol,
            "streams": self.streams,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchConfig:
        """Inverse of :meth:`to_dict`; ValueError on bad data."""
        w = "BenchConfig"
        d = as_dict(d, w)
        return cls(
            n=as_int(d.get("n"), f"{w}.n", optional=True),
            duration_ns=as_int(d.get("duration_ns"), f"{w}.duration_ns", optional=True),
            concurrency=as_int(d.get("concurrency", 1), f"{w}.concurrency"),
            threads=as_int(d.get("threads", 1), f"{w}.threads"),
            rate=as_float(d.get("rate"), f"{w}.rate", optional=True),
            keepalive=bool(d.get("keepalive", True)),
            pipeline=as_int(d.get("pipeline", 1), f"{w}.pipeline"),
            timeout_ns=as_int(d.get("timeout_ns"), f"{w}.timeout_ns", optional=True),
            warmup_ns=as_int(d.get("warmup_ns", 0), f"{w}.warmup_ns"),
            extra=as_dict(d.get("extra"), f"{w}.extra"),
            protocol=_protocol(d.get("protocol", "http/1.1"), f"{w}.protocol"),
            streams=as_int(d.get("streams", 1), f"{w}.streams"),
        )


def _protocol(v: Any, where: str) -> str:
    if v not in ("http/1.1", "h2", "h3", "websocket"):
        raise ValueError(f"{where} must be 'http/1.1', 'h2', 'h3' or 'websocket', not {v!r}")
    return str(v)


_BENCH_HISTS = ("latency", "latency_uncorrected", "connect", "tls", "ttfb", "processing",
                "setup", "ttfe", "gap")
# Optional BenchResult fields: in JSON only when set (older records load without them).
_BENCH_OPTIONAL = ("setup", "sends", "sends_late", "unsent", "connect_attempts",
                   "connect_failures", "connect_fd_exhausted", "quic_datagrams_sent",
                   "quic_datagrams_received", "quic_pto", "series_p50_ns", "series_p99_ns",
                   "ttfe", "gap", "events")


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
        return per_second(self.successes, self.duration_ns)

    @property
    def cpu_ns_per_request(self) -> float:
        """Generator CPU per completed request of this shard, ns."""
        return ratio(self.cpu_user_ns + self.cpu_sys_ns, self.responses + self.errors)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["series_responses"] = list(self.series_responses)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WorkerResult:
        """Inverse of :meth:`to_dict`; ValueError on bad data."""
        w = "WorkerResult"
        d = as_dict(d, w)
        kw: dict[str, Any] = {"worker": str(required(d, "worker", w))}
        for name in ("host", "status"):
            if name in d:
                kw[name] = str(d[name])
        kw.update(present_ints(d, ("shard", "concurrency", "threads", "responses", "successes",
                                   "errors", "bytes_in", "duration_ns", "cpu_user_ns",
                                   "cpu_sys_ns", "clock_offset_ns", "clock_uncertainty_ns",
                                   "start_late_ns", "start_unix_ns"), w))
        kw["n"] = as_int(d.get("n"), f"{w}.n", optional=True)
        kw["rate"] = as_float(d.get("rate"), f"{w}.rate", optional=True)
        kw["series_responses"] = int_tuple(d.get("series_responses"), f"{w}.series_responses")
        return cls(**kw)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BenchResult(ResultBase):
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
    non-2xx) completed in each consecutive ``series_interval_ns`` interval;
    ``series_p50_ns`` / ``series_p99_ns`` (None when not recorded): the median and
    p99 latency of the responses that finished in each (0 when none did), known
    within 1/16 of the value.
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

    HTTP/3 runs only (None otherwise): ``quic_datagrams_sent`` /
    ``quic_datagrams_received`` - UDP datagrams of the measured window (each
    carries one or more QUIC packets; ``bytes_in``/``bytes_out`` are then their UDP
    payload bytes, QUIC headers and encryption included); ``quic_pto`` - QUIC probe
    timeouts that fired (ngtcp2's loss recovery timer; the library exposes no
    count of lost or retransmitted packets). ``tls`` holds each connection's QUIC
    handshake (first Initial sent to handshake complete); ``connect`` is empty.

    Stream runs only (``bench(stream=True)``, None otherwise): ``ttfe`` - each
    stream's time to its first event (from its intended start, so
    coordinated-omission corrected at a constant rate of new streams), ``gap`` -
    the time between consecutive events of a stream, ``events`` - events
    received (server-sent event dispatches, or chunks of a chunked body).

    WebSocket runs (``bench(ws=True)``, ``config.protocol == "websocket"``): a
    request is one message echoed back whole, so ``responses``/``successes``
    count echoed messages, ``latency`` is the echo round trip and ``ttfb`` the
    time to the echo's first byte; ``error_counts`` adds ``upgrade`` (the
    upgrade refused or broken) and ``ws_close`` (the server closed with
    messages in flight).
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
    quic_datagrams_sent: int | None = None
    quic_datagrams_received: int | None = None
    quic_pto: int | None = None
    # per series interval: the p50 / p99 latency (ns) of the responses that finished in
    # it (0: none did), from a coarse per-second histogram (within 1/16 of the value)
    series_p50_ns: tuple[int, ...] | None = None
    series_p99_ns: tuple[int, ...] | None = None
    ttfe: Histogram | None = None
    gap: Histogram | None = None
    events: int | None = None

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
        check_counts(self, (
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
        return per_second(self.successes, self.duration_ns)

    success_rps = rps

    @property
    def error_rps(self) -> float:
        """Failed requests (transport errors + non-2xx responses) per second."""
        return per_second(self.failures, self.duration_ns)

    @property
    def bytes_in_per_s(self) -> float:
        """Bytes received per second (headers + bodies, as on the wire)."""
        return per_second(self.bytes_in, self.duration_ns)

    @property
    def bytes_out_per_s(self) -> float:
        """Bytes sent per second."""
        return per_second(self.bytes_out, self.duration_ns)

    @property
    def cpu_ns(self) -> int:
        """Generator CPU time, user + sys, ns."""
        return self.cpu_user_ns + self.cpu_sys_ns

    @property
    def cpu_ns_per_request(self) -> float:
        """Generator CPU (user+sys) per completed request (responses + errors), ns."""
        return ratio(self.cpu_ns, self.responses + self.errors)

    @property
    def target_rate(self) -> float | None:
        """Constant-rate runs: the scheduled send rate (requests/s); None in closed loop."""
        return self.config.rate or None

    @property
    def send_rate(self) -> float | None:
        """Requests actually sent per second of the measured window (None if not recorded)."""
        return None if self.sends is None else per_second(self.sends, self.duration_ns)

    @property
    def datagrams_per_request(self) -> float | None:
        """HTTP/3: UDP datagrams sent + received per completed request (None otherwise)."""
        if self.quic_datagrams_sent is None or self.quic_datagrams_received is None:
            return None
        return ratio(self.quic_datagrams_sent + self.quic_datagrams_received,
                     self.responses + self.errors)

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
        d = ResultBase.to_dict(self)
        if not self.workers:
            del d["workers"]
        if not self.partial:
            del d["partial"]
        for name in _BENCH_OPTIONAL:
            if d.get(name) is None:
                d.pop(name, None)
        # the headline numbers as plain fields for tools (derived; ignored on load)
        d["summary"] = summary_fields(self)
        return d

    def _field_to_json(self, name: str, v: Any) -> Any:
        if name in _BENCH_HISTS:
            return hist_to_json(v)
        if name == "workers":
            return [w.to_dict() for w in v]
        if name == "config":
            return v.to_dict()
        if name == "status_counts":
            return {str(k): n for k, n in sorted(v.items())}
        if name in ("series_responses", "series_errors"):
            return list(v)
        if name in ("series_p50_ns", "series_p99_ns"):
            return None if v is None else [int(x) for x in v]
        if name in ("metadata", "error_counts"):
            return jsonable(v)
        return v

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchResult:
        """Inverse of :meth:`to_dict`; ValueError on missing or malformed fields."""
        w = cls.KIND
        d = cls._from_dict_doc(d)
        kw: dict[str, Any] = {
            "url": str(required(d, "url", w)),
            "latency": hist_from_json(required(d, "latency", w), f"{w}.latency"),
            "duration_ns": as_int(required(d, "duration_ns", w), f"{w}.duration_ns"),
            "method": str(d.get("method", "GET")),
            "config": BenchConfig.from_dict(d.get("config") or {}),
            "label": str(d.get("label", "")),
            "status_counts": int_map(d.get("status_counts"), f"{w}.status_counts", int_keys=True),
            "error_counts": int_map(d.get("error_counts"), f"{w}.error_counts"),
            "interrupted": bool(d.get("interrupted", False)),
            "series_responses": int_tuple(d.get("series_responses"), f"{w}.series_responses"),
            "series_errors": int_tuple(d.get("series_errors"), f"{w}.series_errors"),
            "metadata": as_dict(d.get("metadata"), f"{w}.metadata"),
            "partial": bool(d.get("partial", False)),
        }
        if d.get("workers") is not None:
            if not isinstance(d["workers"], list):
                raise ValueError(f"{w}.workers: expected a list")
            kw["workers"] = tuple(WorkerResult.from_dict(x) for x in d["workers"])
        for name in _BENCH_HISTS[1:]:
            kw[name] = hist_from_json(d.get(name), f"{w}.{name}")
        kw.update(present_ints(d, (
            "responses", "successes", "bytes_in", "bytes_out", "connections", "reconnects",
            "in_flight_at_stop", "cpu_user_ns", "cpu_sys_ns", "start_unix_ns", "end_unix_ns",
            "series_interval_ns"), w))
        passthrough(cls, d, kw)
        return cls(**kw)


