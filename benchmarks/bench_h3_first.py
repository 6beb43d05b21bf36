"""The native client's first HTTP/3 request (a fresh ``Client(http3=True)``: TLS trust,
QUIC + TLS handshake, one GET /bytes/150) against one load-generator connection
(``bench(keepalive=False, http3=True)``: handshake + one GET per connection), with a
full handshake (``session_resumption=False``, the like-for-like figure: certificate
checked, as a fresh Client's) and resumed (bench()'s default: no certificate).

Times: the median first get of ``--clients`` fresh Clients in one process, and the
generator's p50 at keep-alive off, each repeated ``--repeat`` times in the same run.
Instructions (callgrind, ``--toggle-collect=client_get``, so interpreter start-up and
imports are not counted): a fresh Client's first get in a process that already made
one Client (``client``), and the very first get of a process (``process``: one-time
process set-up included); the generator's per connection is the difference between two
whole-process runs of n1 and n2 connections divided by n2 - n1. The server runs in its
own process, never traced.

    python benchmarks/bench_h3_first.py [--clients 20] [--repeat 5] [--cg-repeat 5]
        [--no-callgrind] [--json out.json]
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

import httpbench
from httpbench import Client, start_process

PATH = "/bytes/150"
FRESH = "fresh Client"
PROCESS = "fresh process"
GEN_FULL = "generator connection"  # a full handshake, as a fresh Client's
GEN_RESUMED = "generator connection, resumed"  # bench()'s default: TLS session resumption

# mode "client": a first Client warms the process (through request(), not counted),
# then a fresh Client's get is what callgrind collects; "process": the first get at all
CG_RUNNER = """
import sys
import httpbench
url, ca, mode = sys.argv[1:4]
if mode == "client":
    with httpbench.Client(http3=True, ca_file=ca, timeout=30) as w:
        assert w.request("GET", url).status == 200
with httpbench.Client(http3=True, ca_file=ca, timeout=30) as c:
    r = c.get(url)
    assert r.status == 200 and r.size == 150, r.status
"""

GEN_RUNNER = """
import sys
import httpbench
url, ca, n, resume = sys.argv[1:5]
g = httpbench.bench(url, n=int(n), keepalive=False, http3=True, ca_file=ca, timeout=30,
                    session_resumption=resume == "1")
assert (g.successes, g.errors) == (int(n), 0), g.metadata["first_error"]
"""


def _callgrind(args: list[str], toggle: str | None) -> int:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        if toggle:
            cmd.append(f"--toggle-collect={toggle}")
        p = subprocess.run([*cmd, sys.executable, "-c", *args], capture_output=True, text=True,
                           timeout=1800)
        if p.returncode != 0:
            raise RuntimeError(p.stderr[-2000:])
        with open(out) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
    raise RuntimeError("no callgrind total")


def first_get_ns(url: str, ca: str, clients: int) -> list[float]:
    out = []
    for _ in range(clients):
        with Client(http3=True, ca_file=ca, timeout=10) as c:
            t0 = time.perf_counter_ns()
            r = c.get(url)
            out.append(time.perf_counter_ns() - t0)
            assert r.status == 200 and r.size == 150, r.status
    return out


def generator_p50_ns(url: str, ca: str, n: int, resume: bool) -> float:
    g = httpbench.bench(url, n=n, keepalive=False, http3=True, ca_file=ca, timeout=10,
                        session_resumption=resume)
    assert (g.successes, g.errors) == (n, 0), g.metadata["first_error"]
    return float(g.p50)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=20, help="fresh Clients per repeat")
    ap.add_argument("--conns", type=int, default=200, help="generator connections per repeat")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cg-repeat", type=int, default=5, help="callgrind runs per figure")
    ap.add_argument("--n1", type=int, default=20, help="generator connections, short run")
    ap.add_argument("--n2", type=int, default=120, help="generator connections, long run")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    if a.clients < 1 or a.conns < 1 or a.repeat < 1 or a.cg_repeat < 1 or a.n2 <= a.n1:
        ap.error("counts must be >= 1 and n2 > n1")
    case = f"first GET {PATH} over HTTP/3"
    rows: list[dict] = []
    notes: list[str] = []
    with start_process(tls=True, h3=True) as srv:
        url = srv.h3_url + PATH
        first_get_ns(url, srv.ca_file, 2)  # the process's one-time set-up, not a Client's
        us: dict[str, list[float]] = {FRESH: [], GEN_FULL: [], GEN_RESUMED: []}
        for _ in range(a.repeat):
            us[FRESH].append(statistics.median(first_get_ns(url, srv.ca_file, a.clients)) / 1e3)
            us[GEN_FULL].append(generator_p50_ns(url, srv.ca_file, a.conns, False) / 1e3)
            us[GEN_RESUMED].append(generator_p50_ns(url, srv.ca_file, a.conns, True) / 1e3)
        for label, vs in us.items():
            print(f"{label}, µs: " + " / ".join(f"{v:.0f}" for v in vs), flush=True)
            rows.append({"case": case, "contender": label, "metric": "time", "unit": "µs",
                         "values": [round(v, 1) for v in vs]})
        if a.no_callgrind or not shutil.which("valgrind"):
            notes.append("instructions not measured: " +
                         ("--no-callgrind" if a.no_callgrind else "valgrind is not installed"))
        else:
            ins: dict[str, list[int]] = {FRESH: [], PROCESS: [], GEN_FULL: [], GEN_RESUMED: []}
            for _ in range(a.cg_repeat):
                for label, mode in ((FRESH, "client"), (PROCESS, "process")):
                    ins[label].append(_callgrind([CG_RUNNER, url, srv.ca_file, mode],
                                                 "client_get"))
                for label, resume in ((GEN_FULL, "0"), (GEN_RESUMED, "1")):
                    i1 = _callgrind([GEN_RUNNER, url, srv.ca_file, str(a.n1), resume], None)
                    i2 = _callgrind([GEN_RUNNER, url, srv.ca_file, str(a.n2), resume], None)
                    ins[label].append(round((i2 - i1) / (a.n2 - a.n1)))
            for label, vs in ins.items():
                print(f"{label}, instructions: " + " / ".join(f"{v:,}" for v in vs), flush=True)
                rows.append({"case": case, "contender": label, "metric": "instr",
                             "unit": "instructions", "values": vs})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "notes": notes}, f, indent=1)


if __name__ == "__main__":
    main()
