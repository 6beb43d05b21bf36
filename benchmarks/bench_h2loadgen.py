"""HTTP/2 load generators side by side: httpbench (bench(http2=True)) vs h2load.

Shapes: -t1 -c16 -m10 and -t1 -c1 -m100 (connections x concurrent streams per
connection). Targets: nginx (1 worker, access_log off, a 150-byte file, HTTP/2
over TLS; benchmarks/_peers.Nginx(http2=True)) and the embedded server in its
own process, /bytes/150, over h2c (prior knowledge) and h2 (TLS). Runs are
interleaved (round-robin over target x shape x tool, `--rounds` times) so
machine noise hits both tools alike; run.py reports medians.

Figures per run: requests/s (2xx responses / measured seconds) and the
generator's CPU per request (user + sys / requests done): h2load's from wait4()
rusage of its process, httpbench's from its engine threads' own rusage
(RUSAGE_THREAD; the Python interpreter around it is not counted).
Goals (benchmarks/goals.py): httpbench CPU/request <= 0.8x h2load's and
req/s >= h2load's.

    python benchmarks/bench_h2loadgen.py [--duration 5] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

import httpbench
from httpbench import start_process

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _peers  # noqa: E402
from _peers import Nginx  # noqa: E402

SHAPES = {"c16m10": (16, 10), "c1m100": (1, 100)}

HB_RUNNER = """
import json, sys
import httpbench
r = httpbench.bench(sys.argv[1], duration=float(sys.argv[2]), concurrency=int(sys.argv[3]),
                    streams=int(sys.argv[4]), http2=True, threads=1, verify=False)
print(json.dumps({"ok": r.successes, "done": r.responses + r.errors, "errors": r.errors,
                  "duration_s": r.duration_ns / 1e9, "cpu_ns": r.cpu_user_ns + r.cpu_sys_ns}))
"""


def run_httpbench(url: str, conns: int, streams: int, dur: float) -> dict:
    p = subprocess.run([sys.executable, "-c", HB_RUNNER, url, str(dur), str(conns), str(streams)],
                       capture_output=True, text=True, timeout=dur + 60)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    d = json.loads(p.stdout.strip().splitlines()[-1])
    return {"ok": d["ok"], "done": d["done"], "duration_s": d["duration_s"],
            "cpu_s": d["cpu_ns"] / 1e9}


def run_h2load(url: str, conns: int, streams: int, dur: float) -> dict:
    argv = ["h2load", "-t1", f"-c{conns}", f"-m{streams}", "-D", f"{dur:g}", url]
    text, cpu = _peers._run_tool("h2load", argv, dur + 60)
    d = _peers.parse_h2load(text)
    if "h2" not in text.split("Application protocol:")[-1][:8]:
        raise RuntimeError(f"h2load did not negotiate h2:\n{text}")
    return {"ok": d["requests"] - d["non_2xx"] - d["errors"], "done": d["requests"],
            "duration_s": d["seconds"], "cpu_s": cpu}


TOOLS = {"httpbench": run_httpbench, "h2load": run_h2load}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2 s runs, 2 rounds")
    ap.add_argument("--targets", default="nginx-h2,embedded-h2c,embedded-h2")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--json", help="write the rows for benchmarks/run.py")
    a = ap.parse_args(argv)
    if a.quick:
        a.duration, a.rounds = 2.0, 2
    shapes = [s for s in a.shapes.split(",") if s]
    bad = [s for s in shapes if s not in SHAPES]
    if bad:
        ap.error(f"unknown shape(s) {bad}; known: {', '.join(SHAPES)}")
    if not shutil.which("h2load"):
        print("# h2load not installed (apt-get install nghttp2-client): nothing to compare",
              file=sys.stderr)
        return 1
    wanted = [t for t in a.targets.split(",") if t]
    ngx = None
    servers = []
    targets: dict[str, str] = {}
    notes: list[str] = []
    try:
        if "nginx-h2" in wanted:
            if shutil.which("nginx") or os.access("/usr/sbin/nginx", os.X_OK):
                ngx = Nginx(tls=True, http2=True).start()
                targets["nginx-h2"] = ngx.https_url + "/150b"
            else:
                notes.append("nginx not installed: its rows are missing")
        if "embedded-h2c" in wanted:
            s1 = start_process(tls=False)
            servers.append(s1)
            targets["embedded-h2c"] = s1.url + "/bytes/150"
        if "embedded-h2" in wanted:
            s2 = start_process(tls=True)
            servers.append(s2)
            targets["embedded-h2"] = s2.url + "/bytes/150"
        runs: list[dict] = []
        for rnd in range(a.rounds):
            for tname, url in targets.items():
                for shape in shapes:
                    conns, streams = SHAPES[shape]
                    for tool, fn in TOOLS.items():
                        r = fn(url, conns, streams, a.duration)
                        r.update(round=rnd, target=tname, shape=shape, tool=tool,
                                 rps=r["ok"] / r["duration_s"],
                                 cpu_us_per_req=r["cpu_s"] * 1e6 / max(r["done"], 1))
                        runs.append(r)
                        print(f"# round {rnd} {tname:13} {shape:7} {tool:9} "
                              f"{r['rps']:>10.0f} req/s {r['cpu_us_per_req']:6.2f} us/req",
                              file=sys.stderr, flush=True)
    finally:
        if ngx is not None:
            ngx.stop()
        for s in servers:
            s.stop()

    rows = []
    for tname in targets:
        for shape in shapes:
            conns, streams = SHAPES[shape]
            case = f"{tname} -t1 -c{conns} -m{streams}"
            for tool in TOOLS:
                rs = [r for r in runs if (r["target"], r["shape"], r["tool"]) ==
                      (tname, shape, tool)]
                rows.append({"case": case, "contender": tool, "metric": "req/s",
                             "unit": "req/s", "values": [r["rps"] for r in rs]})
                rows.append({"case": case, "contender": tool, "metric": "CPU/req",
                             "unit": "µs", "values": [r["cpu_us_per_req"] for r in rs]})
    print(f"\nhttpbench {httpbench.__version__} HTTP/2 load generator vs h2load; "
          f"{a.rounds} rounds x {a.duration:g} s, medians; -t1\n", file=sys.stderr)
    print("| case | tool | req/s | CPU µs/req |", file=sys.stderr)
    print("|---|---|---:|---:|", file=sys.stderr)
    for i in range(0, len(rows), 2):
        rq, cpu = rows[i], rows[i + 1]
        print(f"| {rq['case']} | {rq['contender']} | {statistics.median(rq['values']):,.0f} | "
              f"{statistics.median(cpu['values']):.2f} |", file=sys.stderr)
    _peers.write_rows(rows, notes, a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
