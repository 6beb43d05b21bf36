"""measure() overhead, side by side in one run (interleaved rounds, medians).

1. Loop overhead per call on a no-op: httpbench.measure's C loop vs a plain
   Python loop timing each call with time.perf_counter_ns() (goal <= 0.5x).
2. Slow-down of a real client call (urllib3 GET against the embedded server,
   run in its own process) with allocation+GC accounting on vs off
   (goal <= 1.10x), and tracemalloc's factor on the same call in the same run.

usage: python benchmarks/bench_measure.py [--rounds 7] [--noop-n 300000]
                                           [--get-n 1500] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable

import httpbench


def python_loop(fn: Callable[[], object], n: int) -> float:
    """ns per iteration of the obvious Python harness: time each call, keep the samples."""
    pc = time.perf_counter_ns
    samples: list[int] = []
    ap = samples.append
    t = pc()
    for _ in range(n):
        t0 = pc()
        fn()
        ap(pc() - t0)
    return (pc() - t) / n


def c_loop(fn: Callable[[], object], n: int, accounting: bool) -> float:
    r = httpbench.measure(fn, n=n, warmup=100, alloc=accounting, gc=accounting, calibrate=False)
    return r.wall_ns / r.calls


def noop() -> None:
    return None


def bench_loop(rounds: int, n: int) -> dict[str, float]:
    res: dict[str, list[float]] = {"python": [], "c": [], "c_accounting": []}
    for _ in range(rounds):
        order = list(res)
        random.shuffle(order)
        for k in order:
            if k == "python":
                res[k].append(python_loop(noop, n))
            else:
                res[k].append(c_loop(noop, n, k == "c_accounting"))
    med = {k: statistics.median(v) for k, v in res.items()}
    return {
        "python_loop_ns_per_call": med["python"],
        "c_loop_ns_per_call": med["c"],
        "c_loop_accounting_ns_per_call": med["c_accounting"],
        "ratio_c_vs_python": med["c"] / med["python"],
        "ratio_c_accounting_vs_python": med["c_accounting"] / med["python"],
        "rounds": res,
    }


def bench_urllib3(rounds: int, n: int) -> dict[str, float]:
    import urllib3

    srv = httpbench.start_process()
    try:
        pool = urllib3.HTTPConnectionPool("127.0.0.1", srv.port, maxsize=1)

        def get() -> None:
            _ = pool.request("GET", "/bytes/100").data

        for _ in range(200):
            get()
        modes = ("off", "on", "tracemalloc")
        per_call: dict[str, list[float]] = {m: [] for m in modes}
        cpu: dict[str, list[float]] = {m: [] for m in modes}
        allocs = gcs = 0.0
        for _ in range(rounds):
            order = list(modes)
            random.shuffle(order)
            for m in order:
                gc.collect()
                if m == "tracemalloc":
                    tracemalloc.start()
                try:
                    on = m == "on"
                    r = httpbench.measure(get, n=n, warmup=20, alloc=on, gc=on, calibrate=False)
                finally:
                    if m == "tracemalloc":
                        tracemalloc.stop()
                per_call[m].append(r.wall_ns / r.calls)
                cpu[m].append(r.cpu_thread_ns / r.calls)
                if on:
                    allocs = r.allocs_per_call
                    gcs = r.gc_per_10k
        med = {m: statistics.median(v) for m, v in per_call.items()}
        cmed = {m: statistics.median(v) for m, v in cpu.items()}
        return {
            "get_off_ns_per_call": med["off"],
            "get_on_ns_per_call": med["on"],
            "get_tracemalloc_ns_per_call": med["tracemalloc"],
            "factor_accounting": med["on"] / med["off"],
            "factor_tracemalloc": med["tracemalloc"] / med["off"],
            "cpu_factor_accounting": cmed["on"] / cmed["off"],
            "cpu_factor_tracemalloc": cmed["tracemalloc"] / cmed["off"],
            "python_allocs_per_get": allocs,
            "gc_per_10k_gets": gcs,
            "rounds": per_call,
            "cpu_rounds": cpu,
        }
    finally:
        srv.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--noop-n", type=int, default=300_000)
    ap.add_argument("--get-n", type=int, default=1500)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    meta = httpbench._measure.system_metadata()
    print(f"python {meta['python']}, clock source {meta['clock_source']}, "
          f"cpu {meta['cpu_model']} x{meta['cpu_count']}, kernel {meta['kernel']}")
    loop = bench_loop(a.rounds, a.noop_n)
    print(f"no-op loop, ns/call (median of {a.rounds} interleaved rounds of {a.noop_n}):")
    print(f"  python for-loop + perf_counter_ns : {loop['python_loop_ns_per_call']:8.1f}")
    print(f"  measure() C loop                  : {loop['c_loop_ns_per_call']:8.1f}"
          f"   ratio {loop['ratio_c_vs_python']:.2f}x (goal <= 0.5x)")
    print(f"  measure() C loop + alloc/gc       : {loop['c_loop_accounting_ns_per_call']:8.1f}"
          f"   ratio {loop['ratio_c_accounting_vs_python']:.2f}x")
    get = bench_urllib3(a.rounds, a.get_n)
    print(f"urllib3 GET /bytes/100 vs embedded server (own process), ns/call "
          f"(median of {a.rounds} interleaved rounds of {a.get_n}):")
    print(f"  accounting off                    : {get['get_off_ns_per_call']:10.0f}")
    print(f"  alloc+GC accounting on            : {get['get_on_ns_per_call']:10.0f}"
          f"   factor {get['factor_accounting']:.3f}x (goal <= 1.10x), "
          f"CPU factor {get['cpu_factor_accounting']:.3f}x")
    print(f"  tracemalloc                       : {get['get_tracemalloc_ns_per_call']:10.0f}"
          f"   factor {get['factor_tracemalloc']:.3f}x, "
          f"CPU factor {get['cpu_factor_tracemalloc']:.3f}x")
    print(f"  Python allocations per GET: {get['python_allocs_per_get']:.1f}, "
          f"GC collections per 10k GETs: {get['gc_per_10k_gets']:.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"metadata": meta, "loop": loop, "urllib3": get}, f, indent=2)


if __name__ == "__main__":
    main()
