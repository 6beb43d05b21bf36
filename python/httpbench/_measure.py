"""``measure()`` / ``measure_async()``: per-call latency, CPU, allocation and GC cost.

The timing loop runs in C (``_core._measure_loop``): it calls ``fn`` through
vectorcall, timestamps every call with CLOCK_MONOTONIC and records a
latency histogram; Ctrl-C is checked between samples only. Allocation hooks
(``PyMem_SetAllocator`` wrappers of the RAW, MEM and OBJ domains) and a
``gc.callbacks`` entry are armed for the measured span only, and disarmed
(also when ``fn`` raises) before the exception propagates.

Figures are reported raw, with the harness's own cost measured on a no-op
callable in the same process beside them: ``overhead_ns_per_call`` (not
subtracted from latencies) and ``overhead_allocs_per_call`` (subtracted from
the allocation counts, which therefore are "attributed to fn").

``instructions=True`` / ``syscalls=True`` add exact per-call counts from a
child process (callgrind / strace, see ``_deterministic``): the callable
must be picklable or a ``"module:function"`` string.

Native (C-library) allocations are only visible when the process was started
with the preloadable counter: ``LD_PRELOAD=$(python -c "import httpbench;
print(httpbench.native_alloc_preload_path())")``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import glob
import inspect
import os
import statistics
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

from . import _core, _deterministic, _machine
from ._metadata import system_metadata
from ._results import MeasureResult

__all__ = [
    "measure",
    "measure_async",
    "native_alloc_preload_path",
    "native_allocs",
    "event_loop",
    "system_metadata",
]

_CALIBRATION_CALLS = 5000
# A process that measures many short spans of the same shape (a compare worker)
# sets this: each calibration is made once and reused (it costs ~10 ms with hooks).
REUSE_CALIBRATION = False
_calibrations: dict[tuple[Any, ...], Any] = {}
_DOMAINS = ("raw", "mem", "obj")


# --------------------------------------------------------------------------
# argument handling


def _budget(n: int | None, duration: float | None) -> tuple[int | None, int | None]:
    if n is None and duration is None:
        duration = 1.0
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"n must be an int, not {type(n).__name__}")
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
    dur_ns = None
    if duration is not None:
        duration = float(duration)
        if not duration > 0 or duration != duration or duration == float("inf"):
            raise ValueError(f"duration must be a positive number of seconds, got {duration}")
        dur_ns = max(1, int(duration * 1e9))
    return n, dur_ns


def _warmup(warmup: int | float | None, n: int | None,
            dur_ns: int | None) -> tuple[int, int]:
    """(calls, ns) of warm-up: int = calls, float = seconds, None = automatic."""
    if warmup is None:
        calls = 10 if n is None else max(1, min(10, n // 10))
        return calls, (dur_ns // 10 if dur_ns else 0)
    if isinstance(warmup, bool):
        raise TypeError("warmup must be an int (calls), a float (seconds) or None")
    if isinstance(warmup, int):
        if warmup < 0:
            raise ValueError("warmup must be >= 0")
        return warmup, 0
    if isinstance(warmup, float):
        if not warmup >= 0:
            raise ValueError("warmup must be >= 0")
        return (0, int(warmup * 1e9)) if warmup > 0 else (0, 0)
    raise TypeError("warmup must be an int (calls), a float (seconds) or None")


def _noop_for(nargs: int) -> Callable[..., None]:
    """A no-op with exactly ``nargs`` positional parameters (same call shape as fn)."""
    params = ", ".join(f"a{i}" for i in range(nargs))
    ns: dict[str, Any] = {}
    exec(f"def _noop({params}):\n    return None\n", ns)  # noqa: S102 - fixed template
    return ns["_noop"]


# --------------------------------------------------------------------------
# peak RSS (reset at the start of a run when the kernel allows it)


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM (Linux >= 4.0)
        return True
    except OSError:
        return False


def _peak_rss_bytes(fallback_kb: int) -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return int(fallback_kb) * 1024


# --------------------------------------------------------------------------
# native allocation counter (LD_PRELOAD)


def native_alloc_preload_path() -> str:
    """Path of the preloadable malloc-counting library shipped in the package.

    Start a worker process with ``LD_PRELOAD=<this path>`` to make
    :func:`native_allocs` and ``MeasureResult.native_alloc_*`` available there.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "_mcount*.so")))
    if not found:
        raise FileNotFoundError("httpbench._mcount was not built with this installation")
    return found[0]


def native_allocs() -> dict[str, int] | None:
    """Process-wide malloc counters of the preloaded library since process start:
    ``{"count", "bytes", "frees"}``; None when the process was not started with it."""
    try:
        fn = ctypes.CDLL(None).hb_mcount_read
    except AttributeError:
        return None
    arr = (ctypes.c_uint64 * 3)()
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int]
    fn(arr, 3)
    return {"count": int(arr[0]), "bytes": int(arr[1]), "frees": int(arr[2])}


# --------------------------------------------------------------------------
# turning raw C figures into a MeasureResult


def _per_call(raw: dict[str, Any], calls: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for d in _DOMAINS:
        t = raw.get(f"alloc_{d}")
        if t is not None and calls:
            out[f"{d}_count"] = t[0] / calls
            out[f"{d}_bytes"] = t[1] / calls
    nat = raw.get("native")
    if nat is not None and calls:
        n, b = nat[0], nat[1]
        if raw.get("alloc_raw") is not None:
            # Only what native code itself allocates: Python's RAW-allocator calls
            # (direct and pymalloc's fallbacks) are malloc calls too; _build takes
            # the measured span's out the same way, so they are not taken out twice.
            nested = raw["alloc_raw_nested"]
            n -= raw["alloc_raw"][0] + nested[0]
            b -= raw["alloc_raw"][1] + nested[1]
        out["native_count"] = n / calls
        out["native_bytes"] = b / calls
    return out


def _build(raw: dict[str, Any], cal: dict[str, Any] | None, *, label: str, alloc: bool,
           gc: bool, concurrency: int, rss_reset: bool, extra_meta: dict[str, Any]) -> MeasureResult:
    calls = int(raw["calls"])
    meta = system_metadata()
    meta.update(extra_meta)
    oh = _per_call(cal, int(cal["calls"])) if cal else {}
    overhead_ns = None
    if cal and cal["calls"]:
        overhead_ns = float(cal["latency"].mean)
        meta["overhead_loop_ns_per_call"] = cal["wall_ns"] / cal["calls"]
        meta["calibration_calls"] = int(cal["calls"])

    kw: dict[str, Any] = {}
    python_mallocs = None
    if alloc:
        counts, sizes, raw_counts, raw_sizes = {}, {}, {}, {}
        net = 0
        for d in _DOMAINS:
            n, b, frees = raw[f"alloc_{d}"]
            raw_counts[d], raw_sizes[d] = int(n), int(b)
            counts[d] = max(0, round(n - oh.get(f"{d}_count", 0.0) * calls))
            sizes[d] = max(0, round(b - oh.get(f"{d}_bytes", 0.0) * calls))
            net += int(n) - int(frees)
        nested = raw["alloc_raw_nested"]
        python_mallocs = raw_counts["raw"] + int(nested[0])
        kept = raw.get("alloc_retained")
        kw.update(alloc_counts=counts, alloc_bytes=sizes,
                  alloc_net_count=None if kept is None else int(kept[0]),
                  alloc_net_bytes=None if kept is None else int(kept[1]),
                  overhead_allocs_per_call=sum(oh.get(f"{d}_count", 0.0) for d in _DOMAINS))
        meta["alloc_scope"] = ("Python heap (PyMem RAW/MEM/OBJ domains, all threads) during the "
                               "measured span, calibrated harness allocations subtracted")
        meta["alloc_counts_uncorrected"] = raw_counts
        meta["alloc_bytes_uncorrected"] = raw_sizes
        meta["alloc_raw_fallback_count"] = int(nested[0])  # pymalloc -> RAW, counted once
        meta["alloc_net_scope"] = ("blocks allocated during the measured span and still alive at "
                                   "its end (count, bytes), all domains, harness not subtracted")
        meta["alloc_net_change_count"] = net  # allocations minus frees, incl. older blocks
        meta["overhead_allocs_per_call_by_domain"] = {
            d: oh.get(f"{d}_count", 0.0) for d in _DOMAINS}
    if gc:
        kw.update(gc_collections=tuple(raw["gc_collections"]), gc_pause_ns=int(raw["gc_pause_ns"]))
    nat = raw.get("native")
    if nat is not None:
        total_n, total_b = int(nat[0]), int(nat[1])
        meta["native_malloc_total"] = {"count": total_n, "bytes": total_b, "frees": int(nat[2])}
        native_n = total_n - round(oh.get("native_count", 0.0) * calls)
        native_b = total_b - round(oh.get("native_bytes", 0.0) * calls)
        if python_mallocs is not None:
            # Python's RAW allocator is malloc: take those calls out, leaving C libraries.
            native_n -= python_mallocs
            native_b -= raw_sizes["raw"] + int(raw["alloc_raw_nested"][1])
            meta["native_scope"] = ("malloc-family calls by native code (C libraries), i.e. "
                                    "all mallocs minus Python's own RAW-allocator calls and "
                                    "the calibrated harness")
        else:
            meta["native_scope"] = ("all malloc-family calls in the process, including "
                                    "Python's own (alloc=False), calibrated harness subtracted")
        if native_n < 0 or native_b < 0:
            # Fewer than the calibrated harness alone: noise from other threads.
            meta["native_alloc_unclamped"] = {"count": native_n, "bytes": native_b}
        kw.update(native_alloc_count=max(0, native_n), native_alloc_bytes=max(0, native_b))
    meta["peak_rss_scope"] = "this run (warm-up + span)" if rss_reset else "process lifetime"
    return MeasureResult(
        label=label,
        calls=calls,
        wall_ns=int(raw["wall_ns"]),
        latency=raw["latency"],
        cpu_user_ns=int(raw["cpu_user_ns"]),
        cpu_sys_ns=int(raw["cpu_sys_ns"]),
        cpu_thread_ns=int(raw["cpu_thread_ns"]),
        peak_rss_bytes=_peak_rss_bytes(raw["maxrss_kb"]),
        overhead_ns_per_call=overhead_ns,
        concurrency=concurrency,
        start_unix_ns=int(raw["start_unix_ns"]),
        end_unix_ns=int(raw["end_unix_ns"]),
        metadata=meta,
        **kw,
    )


def _server_cpu() -> dict[int, int] | None:
    """CPU of the in-process servers' threads so far (None: none can exist here)."""
    mod = sys.modules.get("httpbench._server")
    if mod is None:
        return None
    snap = mod.in_process_server_cpu()
    return snap or None


@contextlib.contextmanager
def _placed(placement: str, sequential: bool, meta: dict[str, Any]) -> Iterator[None]:
    """Run the span where ``placement`` says, next to the servers this process started.

    With a running ``Server()`` or ``start_process()`` server, the calling thread and
    the server's threads are placed by ``_machine.choose_placement`` (one request in
    flight: one CPU when crossing CPUs costs more) and put back afterwards; the
    wake-up calibration and the placement go into ``meta``. ``"unpinned"``, or no
    such server: nothing is moved or recorded. A fixed-work control on each side
    of the span gives ``meta["speed_index"]``.
    """
    if placement not in _machine.PLACEMENTS:
        raise ValueError(f"placement must be one of {', '.join(_machine.PLACEMENTS)}, "
                         f"got {placement!r}")
    mod = sys.modules.get("httpbench._server")
    servers = mod.local_servers() if mod is not None else []
    mine = _machine.usable_cpus()
    if not servers or not mine or placement == "unpinned":
        yield
        return
    wake = _machine.wakeup_cost(mine)
    meta["wakeup_ns"] = {"same_cpu": wake["same_cpu"], "cross_cpu": wake["cross_cpu"]}
    p = _machine.choose_placement(placement, sequential, wake, mine)
    before = [(s, s.cpus) for s in servers]
    moved = []
    try:
        os.sched_setaffinity(0, p["client_cpus"])
        for s in servers:
            try:
                s.set_cpus(p["server_cpus"])
                moved.append(s)
            except (OSError, RuntimeError, ValueError):
                continue  # stopped meanwhile: nothing of it runs in the span
        meta["placement"] = p
        # the machine-speed index right before and after the span (~0.5 ms each)
        before_ns = _machine.fixed_work_ns(5)
        yield
        meta["speed_index"] = _machine.speed_summary([before_ns, _machine.fixed_work_ns(5)])
    finally:
        os.sched_setaffinity(0, mine)
        for s, cpus in before:
            if s in moved and cpus:
                with contextlib.suppress(OSError, RuntimeError, ValueError):
                    s.set_cpus(cpus)


def _exclude_server_cpu(raw: dict[str, Any], before: dict[int, int] | None,
                        meta: dict[str, Any]) -> None:
    """Take the in-process servers' thread CPU of the span out of the process CPU.

    The client's CPU is the quantity reported; the process figure stays in the
    metadata under its own name. The server's CPU has no user/system split, so
    each part is reduced in proportion to its share.
    """
    after = _server_cpu()
    if before is None and after is None:
        return
    before = before or {}
    delta = sum(max(0, v - before.get(k, 0)) for k, v in (after or {}).items())
    user, sys_ = int(raw["cpu_user_ns"]), int(raw["cpu_sys_ns"])
    total = user + sys_
    meta["process_cpu_ns"] = total
    meta["in_process_server_cpu_ns"] = delta
    if total <= 0:
        return
    cut = min(delta, total)
    raw["cpu_user_ns"] = user - round(cut * user / total)
    raw["cpu_sys_ns"] = total - cut - raw["cpu_user_ns"]


def _label_of(fn: Any, label: str | None) -> str:
    if label is not None:
        return str(label)
    if isinstance(fn, str):
        return fn
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


# --------------------------------------------------------------------------
# deterministic counts (child processes)

DETERMINISTIC_DEFAULT_CALLS = 200
_DET_WARMUP = 20


def deterministic_counts(fn: Any, args: Sequence[Any] = (), *, n: int,
                         warmup: int = _DET_WARMUP, instructions: bool | str = True,
                         syscalls: bool = True, callgrind_file: str | None = None,
                         top: int = 15, timeout: float | None = None) -> dict[str, Any]:
    """Exact per-call counts of ``n`` calls of ``fn(*args)``, each in a child
    process: the MeasureResult fields (``instructions_per_call``, ...) and
    metadata entries. ``fn``: picklable, or a ``"module:function"`` string.
    ``instructions="per-call"`` also gives each call's count (slower: a
    callgrind dump per call). ``timeout``: seconds each child may take
    (see ``_deterministic.scaled_timeout``); TimeoutError after it."""
    kw: dict[str, Any] = {}
    meta: dict[str, Any] = {"deterministic_calls": int(n), "deterministic_warmup_calls": warmup}
    if timeout is not None:
        meta["deterministic_timeout_s"] = round(float(timeout), 1)
    if instructions:
        per_call = _per_call_mode(instructions)
        r = _deterministic.count_instructions(fn, args, n=n, warmup=warmup, per_call=per_call,
                                              keep_file=callgrind_file, timeout=timeout)
        kw["instructions_per_call"] = sum(r.instructions) / r.calls
        if per_call:
            kw["instructions_by_call"] = tuple(r.instructions)
            meta["instructions_stdev"] = statistics.pstdev(r.instructions)
        meta["instructions_scope"] = (
            "user-space instructions (Ir) per call under callgrind, all threads, in a child "
            "process with PYTHONHASHSEED=0; no kernel time, I/O waits or cache effects")
        meta["callgrind_top"] = [list(t) for t in _deterministic.top_functions(r.functions, top)]
        if r.callgrind_file:
            meta["callgrind_file"] = r.callgrind_file
    if syscalls:
        r = _deterministic.count_syscalls(fn, args, n=n, warmup=warmup, timeout=timeout)
        names: dict[str, int] = {}
        for c in r.syscalls:
            for k, v in c.items():
                names[k] = names.get(k, 0) + v
        kw["syscalls_per_call"] = {k: v / r.calls for k, v in sorted(names.items())}
        kw["syscalls_by_call"] = tuple(sum(c.values()) for c in r.syscalls)
        meta["syscalls_scope"] = ("system calls per call of the calling thread, by name, under "
                                  "strace -f between marker syscalls (vDSO calls not included)")
        if r.other_threads:
            meta["syscalls_other_threads"] = dict(r.other_threads)
    return {"fields": kw, "metadata": meta}


def _per_call_mode(instructions: bool | str) -> bool:
    if instructions is True:
        return False
    if instructions == "per-call":
        return True
    raise ValueError(f"instructions must be False, True or 'per-call', not {instructions!r}")


def _with_counts(res: MeasureResult, fn: Any, args: tuple, n: int | None, warmup: int | None,
                 instructions: bool | str, syscalls: bool, callgrind_file: str | None
                 ) -> MeasureResult:
    if not (instructions or syscalls):
        return res
    n = n or DETERMINISTIC_DEFAULT_CALLS
    warmup = _DET_WARMUP if warmup is None else warmup
    det = deterministic_counts(
        fn, args, n=n, warmup=warmup, instructions=instructions, syscalls=syscalls,
        callgrind_file=callgrind_file,
        timeout=_deterministic.scaled_timeout(_slowest_per_call_s(res), n + warmup))
    meta = dict(res.metadata)
    meta.update(det["metadata"])
    return dataclasses.replace(res, metadata=meta, **det["fields"])


def _events_meta(events_per_call: int | None) -> dict[str, int]:
    """The metadata entry of ``events_per_call`` (checked), or nothing."""
    if events_per_call is None:
        return {}
    if isinstance(events_per_call, bool) or not isinstance(events_per_call, int) or \
            events_per_call < 1:
        raise ValueError(f"events_per_call must be an int >= 1, got {events_per_call!r}")
    return {"events_per_call": events_per_call}


def _slowest_per_call_s(res: MeasureResult) -> float:
    """Seconds one call took when timed natively (the larger of the mean wall
    time per call and the p99 latency), the base of the children's deadline."""
    per = res.wall_ns / res.calls * res.concurrency if res.calls else 0.0
    return max(per, float(res.p99 or 0.0)) / 1e9


class _AsyncCall:
    """A picklable synchronous call of a coroutine function: each call runs
    ``coro_fn(*args)`` to completion on one event loop made on first use (in
    the counting child, during its warm-up)."""

    def __init__(self, coro_fn: Any, uvloop: bool = False) -> None:
        self.coro_fn = coro_fn
        self.uvloop = uvloop
        self._loop: asyncio.AbstractEventLoop | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"coro_fn": self.coro_fn, "uvloop": self.uvloop}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["coro_fn"], state["uvloop"])  # type: ignore[misc]

    def __call__(self, *args: Any) -> Any:
        if self._loop is None:
            if isinstance(self.coro_fn, str):
                self.coro_fn = _deterministic.resolve_callable(self.coro_fn)
            self._loop = event_loop(self.uvloop)
        return self._loop.run_until_complete(self.coro_fn(*args))


def _det_warmup(warmup: int | float | None) -> int | None:
    """Warm-up calls of the counting children: int as given, else the default."""
    if isinstance(warmup, int) and not isinstance(warmup, bool):
        return warmup
    return None


# --------------------------------------------------------------------------
# measure()



def _counting_args(fn: Any, n: int | None, duration: Any, instructions: Any, syscalls: bool,
                   callgrind_file: Any) -> tuple[Any, int | None]:
    """The callable behind a ``"module:function"`` spec, and ``n`` when counting needs one."""
    if isinstance(fn, str):
        fn = _deterministic.resolve_callable(fn)
    if callgrind_file is not None and not instructions:
        raise ValueError("callgrind_file needs instructions=True")
    if instructions:
        _per_call_mode(instructions)
    if (instructions or syscalls) and n is None and duration is None:
        n = DETERMINISTIC_DEFAULT_CALLS
    return fn, n

def measure(
    fn: Callable[..., Any],
    *,
    n: int | None = None,
    duration: float | None = None,
    warmup: int | float | None = None,
    args: Sequence[Any] = (),
    alloc: bool = True,
    gc: bool = True,
    label: str | None = None,
    calibrate: bool = True,
    instructions: bool | str = False,
    syscalls: bool = False,
    callgrind_file: str | None = None,
    placement: str = "auto",
    events_per_call: int | None = None,
) -> MeasureResult:
    """Call ``fn(*args)`` repeatedly from a C loop and report what each call costs.

    ``n`` calls and/or ``duration`` seconds (whichever ends first; neither: 1 s).
    ``warmup``: calls (int) or seconds (float) run first and not measured;
    None: min(10, n // 10) calls (at least 1). ``alloc``/``gc``: track Python
    allocations / GC collections during the measured span. ``calibrate``:
    measure a no-op with the same call shape first, for the harness overhead.

    ``instructions`` / ``syscalls``: also count instructions (callgrind) /
    system calls (strace, each call's) of ``n`` calls (200 when only
    ``duration`` is given) in a child process, after ``warmup`` calls (20
    unless an int is given); ``instructions="per-call"`` also keeps each
    call's instruction count (a callgrind dump per call: slower). ``fn`` must then be picklable or a ``"module:function"`` string
    (which is also accepted alone: it is resolved here for the timing run).
    ``callgrind_file``: keep callgrind's output there (for callgrind_annotate
    or kcachegrind; one part per call).

    ``placement``: with a running ``Server()`` or ``start_process()`` server of
    this process, where the calling thread and the server's threads run during
    the measurement: ``"auto"`` (one CPU when the calibrated cross-CPU wake-up
    costs more, as a request in flight waits for the server), ``"same"``,
    ``"split"``, or ``"unpinned"`` (leave both alone). Restored afterwards;
    ``metadata["placement"]`` and ``metadata["wakeup_ns"]`` record it.

    ``events_per_call``: each call consumes that many stream events (a call reading
    a whole server-sent event stream or WebSocket push of that many events);
    recorded as ``metadata["events_per_call"]``, it gives the budgets
    ``cpu_per_event`` and ``allocs_per_event``.

    Exceptions raised by ``fn`` (and KeyboardInterrupt) stop the run and
    propagate with their traceback; hooks are disarmed first.
    """
    spec = fn
    events_meta = _events_meta(events_per_call)
    fn, n = _counting_args(fn, n, duration, instructions, syscalls, callgrind_file)
    _deterministic.preflight(spec, args, instructions=instructions, syscalls=syscalls)
    if not callable(fn):
        raise TypeError(f"fn must be callable, not {type(fn).__name__}")
    if inspect.iscoroutinefunction(fn):
        raise TypeError("fn is a coroutine function: measure_async() awaits it, measure() "
                        "would only create coroutine objects")
    args = tuple(args)
    n, dur_ns = _budget(n, duration)
    wn, wns = _warmup(warmup, n, dur_ns)
    alloc, gc = bool(alloc), bool(gc)
    cal = None
    if calibrate:
        key = ("sync", len(args), alloc, gc)
        cal = _calibrations.get(key) if REUSE_CALIBRATION else None
        if cal is None:
            noop = _noop_for(len(args))
            cal = _core._measure_loop(noop, args, _CALIBRATION_CALLS, None, 200, 0, alloc, gc)
            if REUSE_CALIBRATION:
                _calibrations[key] = cal
    rss_reset = _reset_peak_rss()
    meta: dict[str, Any] = {"mode": "sync", "warmup_calls": wn, "warmup_ns": wns,
                            **events_meta}
    with _placed(placement, True, meta):
        srv0 = _server_cpu()
        if srv0 is not None:
            # the server's CPU is read around the span alone, so warm up apart first
            if wn or wns:
                _core._measure_loop(fn, args, wn or None, wns or None, 0, 0, False, False)
            srv0 = _server_cpu()
            wn, wns = 0, 0
        raw = _core._measure_loop(fn, args, n, dur_ns, wn, wns, alloc, gc)
    _exclude_server_cpu(raw, srv0, meta)
    res = _build(raw, cal, label=_label_of(spec, label), alloc=alloc, gc=gc, concurrency=1,
                 rss_reset=rss_reset, extra_meta=meta)
    return _with_counts(res, spec, args, n, _det_warmup(warmup), instructions, syscalls,
                        callgrind_file)


# --------------------------------------------------------------------------
# measure_async()

_LOOPS: dict[str, asyncio.AbstractEventLoop] = {}


def event_loop(uvloop: bool = False) -> asyncio.AbstractEventLoop:
    """The persistent event loop ``measure_async`` uses by default (one per kind).

    Create loop-bound clients (an ``aiohttp.ClientSession``...) on it, e.g.
    ``event_loop().run_until_complete(make_session())``.
    """
    kind = "uvloop" if uvloop else "asyncio"
    loop = _LOOPS.get(kind)
    if loop is None or loop.is_closed():
        if uvloop:
            try:
                import uvloop as _uv  # type: ignore[import-not-found]
            except ImportError as e:
                raise ImportError("measure_async(uvloop=True) needs the uvloop package") from e
            loop = _uv.new_event_loop()
        else:
            loop = asyncio.new_event_loop()
        _LOOPS[kind] = loop
    return loop


async def _drive(coro_fn: Callable[..., Awaitable[Any]], args: tuple, rec: Any,
                 concurrency: int, tasks: list) -> None:
    async def worker() -> None:
        begin, end = rec.begin, rec.end
        while True:
            t0 = begin()
            if t0 is None:
                return
            await coro_fn(*args)
            end(t0)

    tasks.extend(asyncio.ensure_future(worker()) for _ in range(concurrency))
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    for t in tasks:
        if t.done() and not t.cancelled() and t.exception() is not None:
            raise t.exception()  # type: ignore[misc]


def _retrieve(t: asyncio.Future) -> None:
    """Mark a finished task's exception as retrieved (no "never retrieved" noise)."""
    if t.done() and not t.cancelled():
        t.exception()


async def _reap(left: list) -> None:
    if left:
        await asyncio.gather(*left, return_exceptions=True)


def _settle(loop: asyncio.AbstractEventLoop, tasks: list) -> None:
    """Cancel and reap what an interrupted run left, and consume the stale
    loop.stop() a KeyboardInterrupt leaves queued, so the persistent loop
    stays usable for the next run."""
    for _ in range(5):
        left = [t for t in tasks if not t.done()]
        for t in left:
            t.cancel()
        try:
            loop.run_until_complete(_reap(left))
        except RuntimeError:  # "Event loop stopped before Future completed": go again
            continue
        if all(t.done() for t in tasks):
            break
    for t in tasks:
        _retrieve(t)


def _run_async(loop: asyncio.AbstractEventLoop, coro_fn: Callable[..., Awaitable[Any]],
               args: tuple, rec: Any, concurrency: int) -> None:
    tasks: list = []
    drive = loop.create_task(_drive(coro_fn, args, rec, concurrency, tasks))
    clean = False
    try:
        loop.run_until_complete(drive)
        clean = True
    finally:
        if not clean:
            _settle(loop, [drive, *tasks])


def measure_async(
    coro_fn: Callable[..., Awaitable[Any]],
    *,
    n: int | None = None,
    duration: float | None = None,
    concurrency: int = 1,
    warmup: int | float | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
    uvloop: bool = False,
    args: Sequence[Any] = (),
    alloc: bool = True,
    gc: bool = True,
    label: str | None = None,
    calibrate: bool = True,
    instructions: bool | str = False,
    syscalls: bool = False,
    callgrind_file: str | None = None,
    placement: str = "auto",
) -> MeasureResult:
    """Await ``coro_fn(*args)`` ``n`` times (or for ``duration`` s) with
    ``concurrency`` coroutines in flight on one persistent event loop.

    Each request is timed in C (``_core._Recorder``: begin/end timestamps and
    the histogram never leave C). ``loop``: the loop to drive (default: the
    persistent :func:`event_loop`; uvloop's with ``uvloop=True``). Must be
    called from synchronous code (no running loop in this thread). Latency is
    per request; ``calls`` counts completed requests; allocation/GC/CPU
    figures cover the event loop's work during the span.

    ``instructions`` / ``syscalls`` / ``callgrind_file``: as for
    :func:`measure`; the child awaits one call at a time on one event loop
    it creates (``coro_fn`` picklable or a ``"module:function"`` string).
    ``placement``: as for :func:`measure`; with ``concurrency`` > 1, ``"auto"``
    splits client and server over two CPUs so their work overlaps.
    """
    spec = coro_fn
    coro_fn, n = _counting_args(coro_fn, n, duration, instructions, syscalls, callgrind_file)
    det_fn = _AsyncCall(spec, uvloop)  # pickles as coro_fn: checking spec checks it
    _deterministic.preflight(spec, args, instructions=instructions, syscalls=syscalls)
    if not callable(coro_fn):
        raise TypeError(f"coro_fn must be callable, not {type(coro_fn).__name__}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("measure_async() drives its own event loop; call it outside a "
                           "running loop (or use measure() around a synchronous client)")
    args = tuple(args)
    n, dur_ns = _budget(n, duration)
    wn, wns = _warmup(warmup, n, dur_ns)
    alloc, gc = bool(alloc), bool(gc)
    if loop is None:
        loop = event_loop(uvloop)
    elif loop.is_closed():
        raise ValueError("loop is closed")

    def span(fn: Callable[..., Awaitable[Any]], rec_n: int | None, rec_dur: int | None,
             accounting: bool) -> dict[str, Any] | None:
        rec = _core._Recorder(rec_n, rec_dur, accounting)
        if not accounting:
            _run_async(loop, fn, args, rec, concurrency)
            return None
        _core._acct_start(alloc, gc)
        try:
            _run_async(loop, fn, args, rec, concurrency)
        finally:
            out = _core._acct_stop()
        out["calls"] = rec.completed
        out["latency"] = rec.histogram()
        return out

    cal = None
    if calibrate:
        async def _noop(*_a: Any) -> None:
            return None

        key = ("async", id(loop), concurrency, len(args), alloc, gc)
        cal = _calibrations.get(key) if REUSE_CALIBRATION else None
        if cal is None:
            span(_noop, 200, None, False)
            cal = span(_noop, 2000, None, True)
            if REUSE_CALIBRATION:
                _calibrations[key] = cal
    meta: dict[str, Any] = {"mode": "async", "event_loop": type(loop).__module__ + "." +
                            type(loop).__name__, "warmup_calls": wn, "warmup_ns": wns}
    with _placed(placement, concurrency == 1, meta):
        if wn or wns:
            span(coro_fn, wn or None, wns or None, False)
        rss_reset = _reset_peak_rss()
        srv0 = _server_cpu()
        raw = span(coro_fn, n, dur_ns, True)
    assert raw is not None
    _exclude_server_cpu(raw, srv0, meta)
    res = _build(raw, cal, label=_label_of(spec, label), alloc=alloc, gc=gc,
                 concurrency=concurrency, rss_reset=rss_reset, extra_meta=meta)
    return _with_counts(res, det_fn, args, n, _det_warmup(warmup), instructions, syscalls,
                        callgrind_file)
