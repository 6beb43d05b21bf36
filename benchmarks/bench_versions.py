"""Cold and warm cost of a two-spec ``httpbench compare --quick`` (versions side by side).

Cold: a fresh, empty ``XDG_CACHE_HOME`` (the httpbench wheel is built and both
environments are made from the index); warm: the same command again with that
cache (both environments reused). Each is one ``python -m httpbench compare``
process timed from outside; its JSON output splits the wall time into making
the environments, the measured run itself, and the rest (the wheel build,
start-up, the embedded server). Needs the package index (PyPI) for the cold runs.

usage: python benchmarks/bench_versions.py [--rounds 1] [--smoke] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import machine_metadata  # noqa: E402

CLIENTS = "urllib3==1.26.20,urllib3==2.2.3"


def one(cache: str, clients: str, smoke: bool) -> dict[str, float]:
    """Wall, environment and run seconds of one compare with ``cache`` as XDG_CACHE_HOME."""
    args = ["--scenarios", "get-150b", "--n", "50", "--repeat", "1"] if smoke else ["--quick"]
    cmd = [sys.executable, "-m", "httpbench", "compare", "--clients", clients, *args,
           "--no-out", "--no-plots", "-q", "--json"]
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800, check=False)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"compare failed ({p.returncode}): {p.stderr.strip()[-600:]}")
    md = json.loads(p.stdout)["record"]["metadata"]
    specs = (md.get("versions") or {}).get("specs") or {}
    envs = sum(s.get("env_seconds") or 0.0 for s in specs.values())
    made = sum(1 for s in specs.values() if s.get("env_created"))
    run = float(md.get("duration_s") or 0.0)
    return {"wall": wall, "envs": envs, "run": run, "other": max(0.0, wall - envs - run),
            "made": float(made)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1, help="cold+warm pairs (default 1)")
    ap.add_argument("--clients", default=CLIENTS, help=f"the two specs (default {CLIENTS})")
    ap.add_argument("--smoke", action="store_true",
                    help="one short round on get-150b instead of --quick")
    ap.add_argument("--json", metavar="FILE", help="write {rows, notes} here")
    a = ap.parse_args(argv)
    got: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
    for _ in range(a.rounds):
        cache = tempfile.mkdtemp(prefix="httpbench-bench-versions-")
        try:
            got["cold"].append(one(cache, a.clients, a.smoke))
            got["warm"].append(one(cache, a.clients, a.smoke))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    mode = "one short round of get-150b" if a.smoke else "--quick"
    case = f"two-spec compare {mode} ({a.clients.replace(',', ' vs ')})"
    rows = []
    for kind, runs in got.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{kind}: {med['wall']:.1f} s wall = {med['envs']:.1f} s environments "
              f"({med['made']:.0f} made) + {med['run']:.1f} s run + {med['other']:.1f} s other "
              f"(wheel build, start-up); {len(runs)} round(s)")
        for metric in ("wall", "envs", "run", "other"):
            rows.append({"case": case, "contender": kind, "metric": metric, "unit": "s",
                         "values": [r[metric] for r in runs]})
    notes = ["cold = an empty XDG_CACHE_HOME (wheel build + both environments from the index); "
             "warm = the same command again with that cache",
             "other = wall − environments − run: the httpbench wheel build (cold only), "
             "interpreter start-up, the embedded server"]
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "notes": notes, "machine": machine_metadata()}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
