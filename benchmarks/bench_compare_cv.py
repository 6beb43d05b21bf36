"""How repeatable ``compare``'s figures are, with the current defaults and the old ones.

For ``trials`` runs, interleaved, ``compare(clients, ["get-150b"])`` runs twice:
with the defaults (odd repeats, a minimum request count per round, disturbed
or short rounds re-run) and with the old ones (2 repeats under ``--quick``,
``min_requests=1``, ``reruns=0``). For each client and run it takes the
repeat-to-repeat CV (stdev/mean over the rounds of the cell) of client CPU per
request and of p50; rows hold one CV per run, and "all clients" pools them.
Then, unless ``--wall none``, it times one default ``compare()`` (every
installed client, every scenario; ``--wall quick``: ``quick=True``).

usage: python benchmarks/bench_compare_cv.py [--trials 3] [--quick] [--scale F]
        [--clients native,pycurl,requests,httpx] [--wall full|quick|none] [--json out]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time

import httpbench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import write_rows  # noqa: E402

SCENARIO = "get-150b"


def _cv(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    if len(xs) < 2 or not statistics.mean(xs):
        return float("nan")
    return statistics.stdev(xs) / statistics.mean(xs) * 100


def _config(name: str, quick: bool) -> dict:
    if name == "new defaults":
        return {}
    return {"repeat": 2 if quick else 3, "min_requests": 1, "reruns": 0}


def _noise(rs: httpbench.ResultSet) -> dict:
    return (rs.metadata.get("noise") or {}).get(SCENARIO) or {}



def _installed(client: str) -> bool:
    """Whether the client's library imports (native and http.client always do)."""
    module = {"native": "httpbench", "http.client": "http.client"}.get(client, client)
    return importlib.util.find_spec(module) is not None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="compare(quick=True) rounds")
    ap.add_argument("--scale", type=float, default=None, help="factor on round durations")
    ap.add_argument("--clients", default="native,pycurl,requests,httpx")
    ap.add_argument("--wall", choices=("full", "quick", "none"), default="full")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    clients = [c for c in a.clients.split(",") if c]
    missing = [c for c in clients if not _installed(c)]
    notes = [f"{c} skipped: not installed" for c in missing]
    clients = [c for c in clients if c not in missing]
    configs = ("new defaults", "old defaults")
    cvs: dict[tuple[str, str, str], list[float]] = {}
    noise: dict[str, list[float]] = {c: [] for c in configs}
    took: dict[str, list[float]] = {c: [] for c in configs}
    for t in range(a.trials):
        # alternate which configuration goes first so drift hits both alike
        for cfg in configs if t % 2 == 0 else configs[::-1]:
            t0 = time.perf_counter()
            rs = httpbench.compare(clients, [SCENARIO], quick=a.quick, scale=a.scale,
                                   out=None, plots=False, **_config(cfg, a.quick))
            took[cfg].append(time.perf_counter() - t0)
            other = _noise(rs).get("other_median")
            if other is not None:
                noise[cfg].append(other * 100)
            for c in clients:
                reps = [r for r in rs.repeats(c, SCENARIO)
                        if isinstance(r, httpbench.MeasureResult)]
                for metric, vals in (("CPU/req CV", [r.cpu_ns_per_call for r in reps]),
                                     ("p50 CV", [r.p50 for r in reps])):
                    cvs.setdefault((c, cfg, metric), []).append(_cv(vals))
                    cvs.setdefault(("all clients", cfg, metric), []).append(_cv(vals))
            print(f"trial {t + 1}/{a.trials} {cfg}: {took[cfg][-1]:.1f} s", file=sys.stderr)
    rows = []
    for (case, cfg, metric), vals in cvs.items():
        rows.append({"case": case, "contender": cfg, "metric": metric, "unit": "%",
                     "values": [v for v in vals if v == v]})
    for cfg in configs:
        rows.append({"case": "all clients", "contender": cfg, "metric": "other processes",
                     "unit": "%", "values": noise[cfg]})
        rows.append({"case": "all clients", "contender": cfg, "metric": "compare time",
                     "unit": "s", "values": took[cfg]})
    if a.wall != "none":
        quick = a.wall == "quick"
        t0 = time.perf_counter()
        rs = httpbench.compare(quick=quick, out=None, plots=False)
        wall = time.perf_counter() - t0
        rows.append({"case": "default compare" + (" --quick" if quick else ""),
                     "contender": "compare()", "metric": "time", "unit": "s", "values": [wall]})
        notes.append(f"default compare{' --quick' if quick else ''}: {len(rs.clients)} clients, "
                     f"{len(rs.scenarios)} scenarios, {wall:.0f} s")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    notes.append(f"load average at the end: {load:.1f} on {os.cpu_count()} CPUs"
                 + ("; the machine was busy: the CVs are not an idle machine's" if load > 0.5 else ""))
    for r in rows:
        if r["values"]:
            print(f"{r['case']:>16} | {r['contender']:<12} | {r['metric']:<15} | median "
                  f"{statistics.median(r['values']):.2f} {r['unit']} (n={len(r['values'])})",
                  file=sys.stderr)
    write_rows(rows, notes, a.json)


if __name__ == "__main__":
    main()
