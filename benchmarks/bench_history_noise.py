"""The noise a history must see through: run-to-run CV per scenario on this machine.

Runs the same ``compare`` RUNS times (default: 5 runs, clients native, http.client,
requests, httpx-async, aiohttp; scenarios get-150b, get-12k, https-get-150b,
get-150b-new-conn and the concurrent get-150b-concurrent), each recorded in one
history, then reads the series back and prints, per (client, scenario), the CV
(stdev / mean over the runs) of CPU per request and of the p50, with each run's
speed index and working-set probe, as Markdown (docs/history.md shows a run).

usage: python benchmarks/bench_history_noise.py [--runs 5] [--history PATH] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import machine_metadata  # noqa: E402

CLIENTS = ["native", "http.client", "requests", "httpx-async", "aiohttp"]
SCENARIOS = ["get-150b", "get-12k", "https-get-150b", "get-150b-new-conn", "get-150b-concurrent"]


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) * 100 if len(values) > 1 else 0.0


def main(argv: list[str] | None = None) -> int:
    import httpbench

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--quick", action="store_true", help="compare --quick (fewer requests)")
    ap.add_argument("--history", help="record into this store (default: a temporary file)")
    ap.add_argument("--json", metavar="FILE", help="write {rows, notes} here")
    a = ap.parse_args(argv)
    target = a.history or os.path.join(tempfile.mkdtemp(prefix="hb-noise-"), "history.db")
    clients, scenarios = a.clients.split(","), a.scenarios.split(",")
    t0 = time.time()
    for i in range(a.runs):
        httpbench.compare(clients=clients, scenarios=scenarios, quick=a.quick, history=target)
        print(f"run {i + 1}/{a.runs} recorded ({time.time() - t0:.0f} s)", file=sys.stderr)
    h = httpbench.history(target)
    runs = h.runs(last=a.runs)
    ids = {r["id"] for r in runs}
    rows: list[dict[str, Any]] = []
    table = ["| client | scenario | CPU/req median | CPU/req CV | p50 median | p50 CV |",
             "|---|---|---:|---:|---:|---:|"]
    for sc in scenarios:
        for c in clients:
            got: dict[str, list[float]] = {}
            for metric in ("cpu_ns_per_request", "p50_ns"):
                found = h.store.series(subject=c, scenario=sc, metric=metric)
                if not found:
                    continue
                (s,) = h.series(c, sc, metric, found[0][4])
                got[metric] = [p.value for p in s.points if p.run_id in ids]
            if len(got.get("cpu_ns_per_request", [])) < 2:
                continue
            cpu, p50 = got["cpu_ns_per_request"], got.get("p50_ns", [])
            table.append(f"| {c} | {sc} | {statistics.median(cpu) / 1e3:.1f} µs | "
                         f"{cv(cpu):.1f} % | {statistics.median(p50) / 1e3:.1f} µs | "
                         f"{cv(p50):.1f} % |")
            for metric, vals in got.items():
                rows.append({"case": f"{c} {sc}", "contender": metric, "metric": "CV",
                             "unit": "%", "values": [cv(vals)]})
    speeds = [r["speed_ns"] / 1e3 for r in runs if r["speed_ns"]]
    probes = [r["meta"].get("working_set_ns") for r in runs if r["meta"]]
    runs_line = ("speed index per run (µs per unit of fixed work): "
                 + ", ".join(f"{v:.1f}" for v in speeds)
                 + f" (CV {cv(speeds):.1f} %); working-set probe (4 MiB, ns/step): "
                 + ", ".join(f"{v:.0f}" for v in probes if v)
                 + (f" (CV {cv([v for v in probes if v]):.1f} %)" if all(probes) else ""))
    print("\n".join(table))
    print(f"\n{len(runs)} runs of compare --clients {a.clients} --scenarios {a.scenarios}"
          f"{' --quick' if a.quick else ''}, {time.time() - t0:.0f} s; {runs_line}")
    print(f"history: {target}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "notes": [runs_line], "machine": machine_metadata()}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
