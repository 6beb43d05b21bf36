"""How repeatable ``compare``'s figures are, with the current defaults and older ones.

For ``trials`` runs, interleaved, ``compare(clients, ["get-150b"])`` runs with
each configuration: "new defaults" (rounds taken in slices, odd repeats, a
minimum request count per round, disturbed or short rounds re-run), "unsliced"
(the same, each round in one piece: the defaults before slices) and "old
defaults" (the defaults before that: 2 repeats under ``--quick``,
``min_requests=1``, ``reruns=0``, one piece). For each client and run it takes
the repeat-to-repeat CV (stdev/mean over the rounds of the cell) of client CPU
per request and of p50; rows hold one CV per run, and "all clients" pools them.
A control client, ``fixed-work`` (a fixed pure-Python loop per call, no I/O),
runs in the same rounds: its CV is the machine's own drift, the floor no
harness setting removes (it is not pooled into "all clients"). Then, unless
``--wall none``, it times one default ``compare()`` (every installed client,
every scenario; ``--wall quick``: ``quick=True``).

usage: python benchmarks/bench_compare_cv.py [--trials 3] [--quick] [--scale F]
        [--clients native,pycurl,requests,httpx] [--configs new,unsliced,old]
        [--wall full|quick|none] [--json out]
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


CONFIGS = {"new": "new defaults", "unsliced": "unsliced", "old": "old defaults"}
CONTROL = "_fixed_work:FixedWork"


def _config(name: str, quick: bool) -> dict:
    if name == "new defaults":
        return {}
    if name == "unsliced":
        return {"slices": 1}
    return {"repeat": 2 if quick else 3, "min_requests": 1, "reruns": 0, "slices": 1}


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
    ap.add_argument("--configs", default="new,unsliced,old",
                    help="configurations to compare: " + ", ".join(CONFIGS))
    ap.add_argument("--no-control", action="store_true", help="without the fixed-work client")
    ap.add_argument("--wall", choices=("full", "quick", "none"), default="full")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    clients = [c for c in a.clients.split(",") if c]
    missing = [c for c in clients if not _installed(c)]
    notes = [f"{c} skipped: not installed" for c in missing]
    clients = [c for c in clients if c not in missing]
    configs = tuple(CONFIGS[c] for c in a.configs.split(",") if c)
    here = os.path.dirname(os.path.abspath(__file__))
    measured = list(clients)
    if not a.no_control:
        # the workers import the control adapter from this directory
        old_path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = here + (os.pathsep + old_path if old_path else "")
        measured.append(CONTROL)
    cvs: dict[tuple[str, str, str], list[float]] = {}
    noise: dict[str, list[float]] = {c: [] for c in configs}
    took: dict[str, list[float]] = {c: [] for c in configs}
    for t in range(a.trials):
        # alternate which configuration goes first so drift hits both alike
        for cfg in configs if t % 2 == 0 else configs[::-1]:
            t0 = time.perf_counter()
            rs = httpbench.compare(measured, [SCENARIO], quick=a.quick, scale=a.scale,
                                   out=None, plots=False, **_config(cfg, a.quick))
            took[cfg].append(time.perf_counter() - t0)
            other = _noise(rs).get("other_median")
            if other is not None:
                noise[cfg].append(other * 100)
            for c in measured:
                reps = [r for r in rs.repeats(c, SCENARIO)
                        if isinstance(r, httpbench.MeasureResult)]
                case = "fixed-work" if c == CONTROL else c
                for metric, vals in (("CPU/req CV", [r.cpu_ns_per_call for r in reps]),
                                     ("p50 CV", [r.p50 for r in reps])):
                    cvs.setdefault((case, cfg, metric), []).append(_cv(vals))
                    if c != CONTROL:
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
    if not a.no_control:
        notes.append("fixed-work: a control client (a fixed CPU loop per call, no I/O) in the "
                     "same rounds; its CV is the machine's drift, not the harness's")
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
