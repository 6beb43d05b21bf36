"""Import time of ``import httpbench``: median over fresh interpreters.

Each round starts a new ``python -c`` that times the import itself with
perf_counter (interpreter start-up excluded; ``python -X importtime -c
"import httpbench"`` shows where the time goes). Also reports how many modules the import loads and whether the heavy ones
(asyncio, argparse, ssl, json, matplotlib) stayed out.

usage: python benchmarks/bench_import.py [--rounds 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import machine_metadata  # noqa: E402

HEAVY = ("asyncio", "argparse", "ssl", "json", "matplotlib", "dask", "numpy", "pandas")

PROBE = """
import sys, time
n0 = len(sys.modules)
t = time.perf_counter()
import {module}
dt = time.perf_counter() - t
print(dt * 1e3, len(sys.modules) - n0, ",".join(m for m in {heavy!r} if m in sys.modules))
"""


def one(module: str) -> tuple[float, int, str]:
    """(import ms, modules added, heavy modules loaded) in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", PROBE.format(module=module, heavy=HEAVY)],
                         check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1]), out[2] if len(out) > 2 else ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json", metavar="FILE", help="write {rows, notes} here")
    a = ap.parse_args(argv)
    ms: list[float] = []
    added = 0
    heavy = ""
    for _ in range(a.rounds):
        t, added, heavy = one("httpbench")
        ms.append(t)
    print(f"import httpbench: median {statistics.median(ms):.1f} ms "
          f"(min {min(ms):.1f}, max {max(ms):.1f}) over {a.rounds} fresh interpreters; "
          f"{added} modules loaded; heavy modules loaded: {heavy or 'none'}")
    if a.json:
        rows = [{"case": "import httpbench", "contender": "httpbench", "metric": "import",
                 "unit": "ms", "values": ms},
                {"case": "import httpbench", "contender": "modules loaded", "metric": "modules",
                 "unit": "", "values": [float(added)]}]
        notes = [f"heavy modules loaded by the import: {heavy or 'none'}"]
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "notes": notes, "machine": machine_metadata()}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
