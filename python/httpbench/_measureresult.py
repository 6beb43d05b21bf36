"""The record of one ``measure()`` / ``measure_async()`` run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
    num_json,
    passthrough,
    present_ints,
    required,
)
from ._record import (
    ALLOC_DOMAINS,
    DEFAULT_PERCENTILES,
    ResultBase,
    check_counts,
    per_second,
    ratio,
)

if TYPE_CHECKING:
    from ._core import Histogram

__all__ = ["MeasureResult"]


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class MeasureResult(ResultBase):
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
        check_counts(self, (
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
        return per_second(self.calls, self.wall_ns)

    rps = calls_per_s

    @property
    def cpu_ns(self) -> int:
        """Client CPU, user + sys, ns: the process's, less any in-process server's threads."""
        return self.cpu_user_ns + self.cpu_sys_ns

    @property
    def cpu_ns_per_call(self) -> float:
        """Client CPU (user+sys) per call, ns."""
        return ratio(self.cpu_ns, self.calls)

    @property
    def thread_cpu_ns_per_call(self) -> float:
        """Calling thread's CPU per call, ns (NaN when not measured)."""
        return ratio(self.cpu_thread_ns, self.calls)

    @property
    def allocs(self) -> int | None:
        """Python allocations over all domains (None when not tracked)."""
        return None if self.alloc_counts is None else sum(self.alloc_counts.values())

    @property
    def allocs_per_call(self) -> float:
        """Python allocations per call, all domains (NaN when not tracked)."""
        return ratio(self.allocs, self.calls)

    @property
    def alloc_bytes_total(self) -> int | None:
        """Python bytes allocated over all domains (None when not tracked)."""
        return None if self.alloc_bytes is None else sum(self.alloc_bytes.values())

    @property
    def alloc_bytes_per_call(self) -> float:
        """Python bytes allocated per call, all domains (NaN when not tracked)."""
        return ratio(self.alloc_bytes_total, self.calls)

    @property
    def native_allocs_per_call(self) -> float:
        """Native (malloc) allocations per call (NaN when not tracked)."""
        return ratio(self.native_alloc_count, self.calls)

    @property
    def gc_total(self) -> int | None:
        """GC collections over all generations (None when not tracked)."""
        return None if self.gc_collections is None else sum(self.gc_collections)

    @property
    def gc_per_10k(self) -> float:
        """GC collections (all generations) per 10,000 calls (NaN when not tracked)."""
        return ratio(None if self.gc_total is None else self.gc_total * 10_000, self.calls)

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
            return hist_to_json(v)
        if name == "gc_collections" and v is not None:
            return list(v)
        if name in ("overhead_ns_per_call", "overhead_allocs_per_call", "instructions_per_call"):
            return num_json(v)
        if name in ("instructions_by_call", "syscalls_by_call") and v is not None:
            return list(v)
        if name == "metadata":
            return jsonable(v)
        return v

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MeasureResult:
        """Inverse of :meth:`to_dict`; ValueError on missing or malformed fields."""
        w = cls.KIND
        d = cls._from_dict_doc(d)
        kw: dict[str, Any] = {
            "label": str(required(d, "label", w)),
            "calls": as_int(required(d, "calls", w), f"{w}.calls"),
            "wall_ns": as_int(required(d, "wall_ns", w), f"{w}.wall_ns"),
            "latency": hist_from_json(required(d, "latency", w), f"{w}.latency"),
            "metadata": as_dict(d.get("metadata"), f"{w}.metadata"),
        }
        for name in ("alloc_counts", "alloc_bytes"):
            if d.get(name) is not None:
                kw[name] = int_map(d[name], f"{w}.{name}")
        if d.get("gc_collections") is not None:
            kw["gc_collections"] = int_tuple(d["gc_collections"], f"{w}.gc_collections")
        kw.update(present_ints(d, ("cpu_user_ns", "cpu_sys_ns", "concurrency", "errors",
                                   "start_unix_ns", "end_unix_ns"), w))
        for name in ("cpu_thread_ns", "alloc_net_bytes", "alloc_net_count", "native_alloc_count",
                     "native_alloc_bytes", "gc_pause_ns", "peak_rss_bytes"):
            kw[name] = as_int(d.get(name), f"{w}.{name}", optional=True)
        for name in ("overhead_ns_per_call", "overhead_allocs_per_call", "instructions_per_call"):
            kw[name] = as_float(d.get(name), f"{w}.{name}", optional=True)
        for name in ("instructions_by_call", "syscalls_by_call"):
            if d.get(name) is not None:
                kw[name] = int_tuple(d[name], f"{w}.{name}")
        if d.get("syscalls_per_call") is not None:
            sc = as_dict(d["syscalls_per_call"], f"{w}.syscalls_per_call")
            kw["syscalls_per_call"] = {str(k): as_float(v, f"{w}.syscalls_per_call.{k}")
                                       for k, v in sc.items()}
        passthrough(cls, d, kw)
        return cls(**kw)


