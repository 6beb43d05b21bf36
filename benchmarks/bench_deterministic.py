"""Deterministic counts: how repeatable instructions/request are, and what they cost.

1. For each client (native, requests, httpx; a missing one is skipped), ``runs``
   runs of ``measure(GET 150 B, n=calls, instructions=True)`` against the
   embedded server in its own process: the CV of instructions/request across
   runs beside the CV of CPU time/request (the in-process timing run of the same
   measure() calls).
2. Cost: wall time of one 200-call instruction measurement of a requests GET
   (child start-up under valgrind included).

usage: python benchmarks/bench_deterministic.py [--runs 5] [--calls 200]
                                                [--clients native,requests,httpx] [--json out]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import httpbench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import write_rows  # noqa: E402


class Get:
    """One GET through a client adapter, set up lazily (in the counting child too)."""

    def __init__(self, client: str, base: str, path: str) -> None:
        self.client, self.base, self.path = client, base, path
        self.adapter = None

    def __getstate__(self) -> dict:
        return {"client": self.client, "base": self.base, "path": self.path, "adapter": None}

    def __call__(self) -> None:
        if self.adapter is None:
            from httpbench._adapters import load_adapter

            self.adapter = load_adapter(self.client)()
            self.adapter.setup(self.base, None, path=self.path)
        self.adapter.request()


def _get(client: str, base: str) -> Get:
    # The counting child imports the callable by module name: use this file as a
    # module, not as __main__.
    import bench_deterministic as mod

    return mod.Get(client, base, "/bytes/150")


def _cv(xs: list[float]) -> float:
    return statistics.pstdev(xs) / statistics.mean(xs) * 100 if len(xs) > 1 else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--clients", default="native,requests,httpx")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    from httpbench._adapters import AdapterUnavailable, load_adapter

    rows, notes = [], []
    with httpbench.start_process() as srv:
        for client in a.clients.split(","):
            try:
                load_adapter(client)
            except AdapterUnavailable as e:
                notes.append(f"{client} skipped: {e}")
                continue
            fn = _get(client, srv.url)
            instr, cpu = [], []
            for _ in range(a.runs):
                r = httpbench.measure(fn, n=a.calls, instructions=True, alloc=False, gc=False)
                instr.append(r.instructions_per_call)
                cpu.append(r.thread_cpu_ns_per_call)
            case = f"{client} GET 150 B"
            rows += [
                {"case": case, "contender": "instructions", "metric": "CV", "unit": "%",
                 "values": [_cv(instr)]},
                {"case": case, "contender": "CPU time", "metric": "CV", "unit": "%",
                 "values": [_cv(cpu)]},
                {"case": case, "contender": "instructions", "metric": "per request",
                 "unit": "", "values": instr},
            ]
            print(f"{case}: instructions/req {statistics.mean(instr):,.0f} "
                  f"(CV {_cv(instr):.4f} %), CPU/req CV {_cv(cpu):.2f} %", file=sys.stderr)
        if "requests" in a.clients.split(","):
            try:
                load_adapter("requests")
            except AdapterUnavailable:
                pass
            else:
                fn = _get("requests", srv.url)
                from httpbench._measure import deterministic_counts

                t0 = time.perf_counter()
                deterministic_counts(fn, n=200, syscalls=False)
                took = time.perf_counter() - t0
                rows.append({"case": "requests GET 150 B, 200 calls", "contender": "callgrind",
                             "metric": "time", "unit": "s", "values": [took]})
                print(f"200-call requests instruction count: {took:.1f} s", file=sys.stderr)
    write_rows(rows, notes, a.json)


if __name__ == "__main__":
    main()
