"""measure() overhead, side by side in one run (interleaved rounds, medians).

1. Loop overhead per call on a no-op: httpbench.measure's C loop vs a plain
   Python loop timing each call with time.perf_counter_ns() (goal <= 0.5x).
2. Slow-down of a real client call (urllib3 GET against the embedded server,
   run in its own process) with allocation+GC accounting on vs off
   (goal <= 1.10x), and tracemalloc's factor on the same call in the same run.

usage: python benchmarks/bench_measure.py [--rounds 7] [--noop-n 300000]
                                           [--get-n 600] [--get-rounds 21] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable

import httpbench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import machine_metadata  # noqa: E402


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


def _churn() -> None:
    for _ in range(1000):
        object()  # one OBJ allocation and its free


def bench_hook_cost(rounds: int) -> dict[str, float]:
    """Thread-CPU cost of the allocation hooks per allocation+free pair (min of rounds:
    the least disturbed run of each mode), from 1000 object() per call."""
    res: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(rounds):
        for m in ("off", "on"):
            on = m == "on"
            r = httpbench.measure(_churn, n=300, warmup=5, alloc=on, gc=on, calibrate=False)
            res[m].append(r.cpu_thread_ns / r.calls)
    best = {m: min(v) for m, v in res.items()}
    return {"hook_ns_per_alloc_free": (best["on"] - best["off"]) / 1000,
            "churn_off_ns_per_call": best["off"], "churn_on_ns_per_call": best["on"]}


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

        def paired(m: str, base: dict[str, list[float]]) -> float:
            # Median of per-round ratios: each round's modes ran back to back,
            # so machine-load drift between rounds cancels out.
            return statistics.median(a / b for a, b in zip(base[m], base["off"], strict=True))

        return {
            "get_off_ns_per_call": med["off"],
            "get_on_ns_per_call": med["on"],
            "get_tracemalloc_ns_per_call": med["tracemalloc"],
            "factor_accounting": paired("on", per_call),
            "factor_tracemalloc": paired("tracemalloc", per_call),
            "factor_accounting_of_medians": med["on"] / med["off"],
            "factor_tracemalloc_of_medians": med["tracemalloc"] / med["off"],
            "cpu_factor_accounting": paired("on", cpu),
            "cpu_factor_tracemalloc": paired("tracemalloc", cpu),
            "get_off_cpu_ns": statistics.median(cpu["off"]),
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
    ap.add_argument("--get-n", type=int, default=600)
    ap.add_argument("--get-rounds", type=int, default=21,
                    help="interleaved rounds of the urllib3 case (default 21; 0: --rounds)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    meta = machine_metadata()
    print(f"python {meta['python']}, clock source {meta['clock_source']}, "
          f"cpu {meta['cpu_model']} x{meta['cpus']}, kernel {meta['kernel']}")
    loop = bench_loop(a.rounds, a.noop_n)
    print(f"no-op loop, ns/call (median of {a.rounds} interleaved rounds of {a.noop_n}):")
    print(f"  python for-loop + perf_counter_ns : {loop['python_loop_ns_per_call']:8.1f}")
    print(f"  measure() C loop                  : {loop['c_loop_ns_per_call']:8.1f}"
          f"   ratio {loop['ratio_c_vs_python']:.2f}x (goal <= 0.5x)")
    print(f"  measure() C loop + alloc/gc       : {loop['c_loop_accounting_ns_per_call']:8.1f}"
          f"   ratio {loop['ratio_c_accounting_vs_python']:.2f}x")
    get = bench_urllib3(a.get_rounds or a.rounds, a.get_n)
    a.get_rounds = a.get_rounds or a.rounds
    print(f"urllib3 GET /bytes/100 vs embedded server (own process), ns/call: median of "
          f"{a.get_rounds} interleaved rounds of {a.get_n}; factors: median of per-round ratios")
    print(f"  accounting off                    : {get['get_off_ns_per_call']:10.0f}")
    print(f"  alloc+GC accounting on            : {get['get_on_ns_per_call']:10.0f}"
          f"   factor {get['factor_accounting']:.3f}x (goal <= 1.10x), "
          f"CPU factor {get['cpu_factor_accounting']:.3f}x")
    print(f"  tracemalloc                       : {get['get_tracemalloc_ns_per_call']:10.0f}"
          f"   factor {get['factor_tracemalloc']:.3f}x, "
          f"CPU factor {get['cpu_factor_tracemalloc']:.3f}x")
    print(f"  Python allocations per GET: {get['python_allocs_per_get']:.1f}, "
          f"GC collections per 10k GETs: {get['gc_per_10k_gets']:.1f}")
    hook = bench_hook_cost(a.rounds * 3)
    est = 1 + get["python_allocs_per_get"] * hook["hook_ns_per_alloc_free"] / get["get_off_cpu_ns"]
    get["factor_accounting_estimated"] = est
    print(f"  hook cost per allocation+free: {hook['hook_ns_per_alloc_free']:.1f} ns "
          f"(min of {a.rounds * 3} rounds) -> estimated factor for this GET "
          f"{est:.3f}x ({get['python_allocs_per_get']:.0f} allocs, "
          f"{get['get_off_cpu_ns'] / 1000:.0f} us CPU each)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"metadata": meta, "loop": loop, "urllib3": get, "hooks": hook}, f,
                      indent=2)


if __name__ == "__main__":
    main()
