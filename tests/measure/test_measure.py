"""httpbench.measure(): exact allocation counts, GC collections, CPU, latency, hooks
disarmed after errors, signals, argument validation."""

from __future__ import annotations

import gc
import os
import signal
import time
import traceback
import tracemalloc

import httpbench
import pytest
from httpbench import _core


def make_allocator(k: int):
    """A function that allocates exactly k objects (object() each: one OBJ-domain block)."""
    body = "".join(f"    o{i} = object()\n" for i in range(k)) or "    pass\n"
    ns: dict = {}
    exec(f"def alloc_{k}():\n{body}", ns)
    return ns[f"alloc_{k}"]


def hooks_disarmed() -> bool:
    installed, armed, _on_top, _layers = _core._alloc_hooks_state()
    return armed == 0 and not _core._acct_active()


def our_gc_callbacks() -> list:
    return [cb for cb in gc.callbacks if getattr(cb, "__name__", "") == "_httpbench_gc_watch"]


@pytest.mark.parametrize("k", [0, 1, 3, 17])
def test_exactly_k_allocations_per_call(k: int) -> None:
    r = httpbench.measure(make_allocator(k), n=20_000)
    assert r.calls == 20_000
    assert r.alloc_counts == {"raw": 0, "mem": 0, "obj": k * r.calls}
    assert r.allocs_per_call == k
    # object() is 16 bytes on 64-bit CPython.
    assert r.alloc_bytes["obj"] == 16 * k * r.calls
    # Every block was freed again when the call returned.
    assert r.alloc_net_count == 0
    assert r.alloc_net_bytes == 0
    assert r.overhead_allocs_per_call == 0.0
    assert r.metadata["alloc_counts_uncorrected"]["obj"] == k * r.calls
    assert hooks_disarmed()


def test_net_retained_allocations() -> None:
    keep: list = [None]  # the item array exists already; appends only realloc it

    def retain() -> None:
        keep.append(object())  # list growth is realloc: an alloc and a free, net 0

    r = httpbench.measure(retain, n=5_000, warmup=0)
    assert len(keep) == 5_001
    # 5000 objects plus the item array, which grew (moved) during the span.
    assert r.alloc_net_count == 5_001
    assert 16 * 5_000 < r.alloc_net_bytes <= 16 * 5_000 + 8 * 7_000
    assert r.metadata["alloc_net_change_count"] == 5_000
    assert r.alloc_counts["obj"] == 5_000
    assert r.alloc_counts["mem"] >= 1  # the list's item array grew


def test_allocations_in_every_domain_and_large_blocks_counted_once() -> None:
    big = 100_000

    def every_domain() -> None:
        os.getcwd()  # RAW: its path buffer (plus the str result, OBJ)
        bytes(big)  # OBJ; pymalloc passes >512-byte blocks on to RAW: must count once
        _ = [None] * 10  # MEM: the list's item array

    r = httpbench.measure(every_domain, n=2_000)
    assert r.alloc_counts["raw"] == r.calls
    assert r.alloc_counts["obj"] == 2 * r.calls
    assert r.alloc_counts["mem"] >= r.calls
    assert r.alloc_bytes["obj"] >= big * r.calls
    assert r.metadata["alloc_raw_fallback_count"] == r.calls
    assert r.alloc_net_count == 0


@pytest.mark.slow
def test_gc_collect_is_one_full_collection_per_call() -> None:
    r = httpbench.measure(gc.collect, n=20, warmup=1)
    assert r.gc_collections == (0, 0, 20)
    assert r.gc_total == 20
    assert r.gc_pause_ns > 0
    assert r.gc_pause_ns <= r.wall_ns
    assert our_gc_callbacks() == []


def test_no_gc_no_alloc() -> None:
    r = httpbench.measure(make_allocator(2), n=1000, alloc=False, gc=False)
    assert r.alloc_counts is None and r.alloc_bytes is None and r.alloc_net_count is None
    assert r.gc_collections is None and r.gc_pause_ns is None
    assert r.calls == 1000


def test_busy_loop_cpu_time() -> None:
    cost = 2_000_000  # 2 ms of this thread's CPU per call

    def spin() -> None:
        end = time.thread_time_ns() + cost
        while time.thread_time_ns() < end:
            pass

    r = httpbench.measure(spin, n=50, warmup=0)
    assert cost * r.calls <= r.cpu_thread_ns <= 1.5 * cost * r.calls
    assert r.cpu_ns >= 0.9 * r.cpu_thread_ns  # process CPU includes this thread
    assert r.latency.min >= cost


def test_sleep_1ms_percentiles() -> None:
    r = httpbench.measure(time.sleep, args=(0.001,), n=200, warmup=5)
    assert 1_000_000 <= r.p50 <= 10_000_000  # ≈ 1 ms; generous for a loaded machine
    assert r.latency.min >= 1_000_000
    assert r.p90 <= 50_000_000
    # Sleeping costs far less CPU than wall time.
    assert r.cpu_thread_ns < r.wall_ns / 2
    assert r.latency.count == r.calls == 200


def test_args_and_n() -> None:
    seen = []
    r = httpbench.measure(lambda a, b: seen.append((a, b)), args=(1, "x"), n=123, warmup=7)
    assert r.calls == 123
    assert len(seen) == 130 and set(seen) == {(1, "x")}
    assert len(r.latency) == 123


def test_duration() -> None:
    r = httpbench.measure(time.sleep, args=(0.001,), duration=0.05, warmup=0)
    assert r.calls >= 1
    assert 50_000_000 <= r.wall_ns < 5_000_000_000
    assert r.latency.count == r.calls


def test_exception_propagates_with_traceback_and_disarms() -> None:
    calls = 0

    def flaky() -> None:
        nonlocal calls
        calls += 1
        object()
        if calls == 25:
            raise ValueError("boom at 25")

    with pytest.raises(ValueError, match="boom at 25") as ei:
        httpbench.measure(flaky, n=1000, warmup=0)
    assert calls == 25
    frames = [f.name for f in traceback.extract_tb(ei.value.__traceback__)]
    assert "flaky" in frames
    assert hooks_disarmed()
    assert our_gc_callbacks() == []
    # Hooks still work afterwards (installed once, re-armed).
    r = httpbench.measure(make_allocator(2), n=1000)
    assert r.alloc_counts["obj"] == 2000


def test_exception_during_warmup() -> None:
    def bad() -> None:
        raise KeyError("warm")

    with pytest.raises(KeyError):
        httpbench.measure(bad, n=10, warmup=3)
    assert hooks_disarmed()


def test_keyboard_interrupt_stops_promptly() -> None:
    calls = 0

    def interrupt_on_third() -> None:
        nonlocal calls
        calls += 1
        if calls == 3 + 10:  # after 10 warm-up calls
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        httpbench.measure(interrupt_on_third, n=1_000_000, warmup=10)
    assert calls == 13  # checked right after the call that raised the signal
    assert hooks_disarmed()
    assert our_gc_callbacks() == []


def test_validation_errors() -> None:
    def f() -> None:
        return None

    with pytest.raises(TypeError):
        httpbench.measure(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        httpbench.measure(f, n=0)
    with pytest.raises(TypeError):
        httpbench.measure(f, n=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        httpbench.measure(f, duration=-1)
    with pytest.raises(ValueError):
        httpbench.measure(f, n=10, warmup=-1)
    with pytest.raises(TypeError):
        httpbench.measure(f, n=10, warmup="x")  # type: ignore[arg-type]

    async def coro() -> None:
        return None

    with pytest.raises(TypeError, match="measure_async"):
        httpbench.measure(coro, n=1)

    def nested() -> None:
        httpbench.measure(f, n=1)

    with pytest.raises(RuntimeError, match="reentrant"):
        httpbench.measure(nested, n=1, warmup=0)
    assert hooks_disarmed()


def test_result_fields_and_metadata() -> None:
    r = httpbench.measure(make_allocator(1), n=1000, label="one")
    assert isinstance(r, httpbench.MeasureResult)
    assert r.label == "one"
    assert r.overhead_ns_per_call is not None and r.overhead_ns_per_call > 0
    assert r.metadata["overhead_loop_ns_per_call"] > 0
    for key in ("python", "clock_source", "cpu_model", "kernel"):
        assert key in r.metadata
    assert r.metadata["python"].startswith("3.")
    assert r.peak_rss_bytes and r.peak_rss_bytes > 1_000_000
    assert r.start_unix_ns < r.end_unix_ns
    assert r.native_alloc_count is None  # this process was not started with the preload
    assert httpbench.native_allocs() is None
    d = r.to_dict()
    back = httpbench.MeasureResult.from_dict(d)
    assert back.alloc_counts == r.alloc_counts and back.calls == r.calls
    assert httpbench.measure(make_allocator(0), n=10).label == "alloc_0"


def test_tracemalloc_interplay() -> None:
    tracemalloc.start()
    try:
        r = httpbench.measure(make_allocator(3), n=2000)
        assert r.alloc_counts["obj"] == 6000
    finally:
        tracemalloc.stop()  # restores its saved chain; our hooks get re-installed on next use
    r = httpbench.measure(make_allocator(3), n=2000)
    assert r.alloc_counts["obj"] == 6000
    assert _core._alloc_hooks_state()[2] == 1


def test_histogram_matches_calls() -> None:
    r = httpbench.measure(make_allocator(0), n=5000)
    assert isinstance(r.latency, httpbench.Histogram)
    assert r.latency.count == 5000
    assert r.latency.min > 0


def test_retained_table_grows_and_frees_are_matched() -> None:
    keep: list = []

    def retain_many() -> None:
        keep.extend([object() for _ in range(200_000)])

    r = httpbench.measure(retain_many, n=1, warmup=0)
    assert r.alloc_net_count >= 200_000  # the objects (plus list arrays)
    assert r.alloc_net_bytes >= 16 * 200_000
    keep.clear()

    def churn() -> None:
        tmp = [object() for _ in range(100_000)]
        del tmp

    r = httpbench.measure(churn, n=3, warmup=0)
    assert r.alloc_net_count == 0 and r.alloc_net_bytes == 0
    assert r.alloc_counts["obj"] >= 300_000


def test_other_threads_allocating_during_measure() -> None:
    import threading

    stop = threading.Event()

    def background() -> None:
        while not stop.is_set():
            os.getcwd()  # RAW allocations from another thread
            [object() for _ in range(50)]

    t = threading.Thread(target=background)
    t.start()
    try:
        r = httpbench.measure(make_allocator(2), n=20_000)
    finally:
        stop.set()
        t.join(10)
    # Process-wide accounting: at least fn's own allocations, hooks disarmed after.
    assert r.alloc_counts["obj"] >= 2 * r.calls
    assert hooks_disarmed()


def test_fork_during_span_child_not_armed() -> None:
    import subprocess
    import sys

    def spawn() -> None:
        subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=30)

    r = httpbench.measure(spawn, n=3, warmup=0)
    assert r.calls == 3
    assert hooks_disarmed()

    if hasattr(os, "fork"):
        def fork_child() -> None:
            pid = os.fork()
            if pid == 0:  # child: allocate freely, hooks must be disarmed here
                installed, armed, *_ = _core._alloc_hooks_state()
                os._exit(0 if armed == 0 else 3)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0

        r = httpbench.measure(fork_child, n=2, warmup=0)
        assert r.calls == 2
