"""Distributed runs on Dask vs one process, side by side in one run (interleaved rounds).

Against the embedded server in another process, the same total load two ways:
``bench(threads=2)`` in this process, and ``bench(threads=2, cluster=...)`` on a
LocalCluster of 2 worker processes (1 engine thread each). Goals: req/s >= 0.9x
and generator CPU/request <= 1.1x the one-process run; the fixed overhead of a
distributed run (attach to the scheduler, version check, clock offsets, start
barrier, gathering and merging the shards) <= 1 s: wall time of the call minus
the measured run span, attaching by address each time.

usage: python benchmarks/bench_distributed.py [--duration 5] [--rounds 3]
                                               [--concurrency 16] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

import httpbench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import machine_metadata  # noqa: E402

ONE = "one process"
DASK = "dask-local 2"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--path", default="/bytes/150")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)

    import distributed

    server = httpbench.start_process(threads=1)
    t0 = time.monotonic()
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None,
                                       silence_logs=logging.ERROR)
    cluster_start = time.monotonic() - t0
    url = server.url + a.path
    case = f"-c{a.concurrency} -t2"
    vals: dict[tuple[str, str], list[float]] = {}

    def add(who: str, metric: str, v: float) -> None:
        vals.setdefault((who, metric), []).append(v)

    try:
        kw = dict(duration=a.duration, concurrency=a.concurrency, threads=2, warmup=0.5)
        for rnd in range(a.rounds):
            order = (ONE, DASK) if rnd % 2 == 0 else (DASK, ONE)
            for who in order:
                t = time.monotonic()
                if who == ONE:
                    r = httpbench.bench(url, **kw)
                else:
                    r = httpbench.bench(url, cluster=cluster.scheduler_address, **kw)
                wall = time.monotonic() - t
                add(who, "req/s", r.rps)
                add(who, "CPU/req", r.cpu_ns_per_request / 1e3)
                if who == DASK:
                    # the shards' own warm-up and measured span are the run; the rest is fixed cost
                    add(who, "overhead", wall - a.duration - 0.5)
                    md = r.metadata["distributed"]
                    add(who, "barrier lead", md["lead_s"])
                print(f"round {rnd} {who:<14} {r.rps:>10.0f} req/s "
                      f"{r.cpu_ns_per_request / 1e3:6.2f} µs/req  wall {wall:.2f} s", flush=True)
    finally:
        cluster.close()
        server.stop()

    units = {"req/s": "req/s", "CPU/req": "µs", "overhead": "s", "barrier lead": "s"}
    rows = [{"case": case, "contender": who, "metric": m, "unit": units[m], "values": v}
            for (who, m), v in vals.items()]
    notes = [f"embedded server (1 thread) in another process; {a.rounds} interleaved rounds of "
             f"{a.duration:g} s (+0.5 s warm-up) each; LocalCluster start "
             f"{cluster_start:.2f} s (not in the overhead)",
             "overhead = wall time of bench(cluster=address) minus warm-up and duration: "
             "attach, version check, clock offsets, barrier lead (included), connection "
             "setup, gather and merge"]
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"metadata": machine_metadata(), "rows": rows, "notes": notes}, f, indent=1)
    for r in rows:
        vs = sorted(r["values"])
        print(f"{r['contender']:<14} {r['metric']:<13} median {vs[len(vs) // 2]:.3f} "
              f"{r['unit']}  ({', '.join(f'{x:.3f}' for x in r['values'])})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
