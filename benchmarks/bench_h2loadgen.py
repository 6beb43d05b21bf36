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
(RUSAGE_THREAD; the Python interpreter around it is not counted). Wake-ups per
request: the generator process's voluntary context switches (times it slept
and was woken) / requests done, from wait4() or getrusage(); against a server
that is the bottleneck, every wake-up is one the server's send had to do.
Goals (benchmarks/goals.py): httpbench CPU/request <= 0.8x h2load's and
req/s >= h2load's.

"floor" is benchmarks/floor_h2loadgen.c, compiled on the fly: prebuilt frames
(preface and SETTINGS once, then one HEADERS frame per request with a fixed
HPACK block of static-table entries and literals, stream id patched in),
responses read by their 9-byte frame headers only (no HPACK decoding), one
send per connection per read batch; over TLS one recv() per batch into a
memory BIO that OpenSSL decrypts record by record. It checks every stream got
a HEADERS frame and ended, and this script checks the embedded server counted
every stream it opened as an h2 request (nginx keeps no count: access_log
off); its CPU per request is about the least an HTTP/2 generator can spend on
this machine ("CPU vs floor").

    python benchmarks/bench_h2loadgen.py [--duration 5] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import httpbench
from httpbench import start_process

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _peers  # noqa: E402
from _peers import Nginx  # noqa: E402

SHAPES = {"c16m10": (16, 10), "c1m100": (1, 100)}

HB_RUNNER = """
import json, resource, sys
import httpbench
r = httpbench.bench(sys.argv[1], duration=float(sys.argv[2]), concurrency=int(sys.argv[3]),
                    streams=int(sys.argv[4]), http2=True, threads=1, verify=False)
print(json.dumps({"ok": r.successes, "done": r.responses + r.errors, "errors": r.errors,
                  "duration_s": r.duration_ns / 1e9, "cpu_ns": r.cpu_user_ns + r.cpu_sys_ns,
                  "wakeups": resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw}))
"""


def run_httpbench(url: str, conns: int, streams: int, dur: float) -> dict:
    return _peers.run_bench_script(HB_RUNNER, [url, str(dur), str(conns), str(streams)], dur)


def run_h2load(url: str, conns: int, streams: int, dur: float) -> dict:
    argv = ["h2load", "-t1", f"-c{conns}", f"-m{streams}", "-D", f"{dur:g}", url]
    text, cpu, wakeups = _peers._run_tool("h2load", argv, dur + 60)
    d = _peers.parse_h2load(text)
    if "h2" not in text.split("Application protocol:")[-1][:8]:
        raise RuntimeError(f"h2load did not negotiate h2:\n{text}")
    return {"ok": d["requests"] - d["non_2xx"] - d["errors"], "done": d["requests"],
            "duration_s": d["seconds"], "cpu_s": cpu, "wakeups": wakeups}


FLOOR_EXE: str | None = None
FLOOR_SERVERS: dict[str, object] = {}  # url prefix -> embedded server whose h2 count checks the floor


def run_floor(url: str, conns: int, streams: int, dur: float) -> dict:
    if FLOOR_EXE is None:
        raise RuntimeError("floor_h2loadgen is not built")
    m = re.match(r"(https?)://([\d.]+):(\d+)(/.*)$", url)
    if not m:
        raise RuntimeError(f"floor cannot run {url} (an IPv4 address only)")
    server = next((s for pre, s in FLOOR_SERVERS.items() if url.startswith(pre)), None)
    before = server.stats()["by_protocol"]["h2"] if server else 0
    argv = [FLOOR_EXE, m.group(2), m.group(3), m.group(4), str(conns), str(streams), f"{dur:g}"]
    if m.group(1) == "https":
        argv.append("tls")
    p = subprocess.run(argv, capture_output=True, text=True, timeout=dur + 60)
    if p.returncode != 0:
        raise RuntimeError(f"floor_h2loadgen failed: {p.stderr.strip()}")
    d = json.loads(p.stdout)
    # nginx keeps no count (access_log off): there the floor's own checks stand
    served = server.stats()["by_protocol"]["h2"] - before if server else d["requests"]
    if not (d["sent"] == d["requests"] == served):
        raise RuntimeError(f"floor_h2loadgen: {d['sent']} streams opened, {d['requests']} "
                           f"ended with a response, the server counted {served} h2 requests")
    return {"ok": d["ok"], "done": d["requests"], "duration_s": d["seconds"],
            "cpu_s": d["cpu_user_s"] + d["cpu_sys_s"], "wakeups": d["wakeups"]}


TOOLS = {"httpbench": run_httpbench, "h2load": run_h2load, "floor": run_floor}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2 s runs, 2 rounds")
    ap.add_argument("--targets", default="nginx-h2,embedded-h2c,embedded-h2")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--tools", default=",".join(TOOLS))
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
    tools = [t for t in a.tools.split(",") if t]
    if [t for t in tools if t not in TOOLS]:
        ap.error(f"unknown tool(s); known: {', '.join(TOOLS)}")
    global FLOOR_EXE
    notes: list[str] = []
    tmp = tempfile.mkdtemp(prefix="hb-h2floor-")
    if "floor" in tools:
        FLOOR_EXE = _peers.build_floor(_peers.FLOOR_H2LOADGEN_SRC, tmp, ["-lssl", "-lcrypto"])
        if FLOOR_EXE is None:
            tools.remove("floor")
            notes.append("floor_h2loadgen could not be built: its rows are missing")
    ngx = None
    servers = []
    targets: dict[str, str] = {}
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
            FLOOR_SERVERS[s1.url] = s1
            targets["embedded-h2c"] = s1.url + "/bytes/150"
        if "embedded-h2" in wanted:
            s2 = start_process(tls=True)
            servers.append(s2)
            FLOOR_SERVERS[s2.url] = s2
            targets["embedded-h2"] = s2.url + "/bytes/150"

        def run(tool: str, c: dict) -> dict | None:
            return TOOLS[tool](targets[c["target"]], *SHAPES[c["shape"]], a.duration)

        cases = [(f"{tname:13} {shape:7}", {"target": tname, "shape": shape})
                 for tname in targets for shape in shapes]
        runs = _peers.round_robin(a.rounds, cases, tools, run)
    finally:
        if ngx is not None:
            ngx.stop()
        for s in servers:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    rows = []
    for tname in targets:
        for shape in shapes:
            conns, streams = SHAPES[shape]
            case = f"{tname} -t1 -c{conns} -m{streams}"
            for tool in tools:
                rs = [r for r in runs if (r["target"], r["shape"], r["tool"]) ==
                      (tname, shape, tool)]
                if not rs:
                    continue
                rows.append({"case": case, "contender": tool, "metric": "req/s",
                             "unit": "req/s", "values": [r["rps"] for r in rs]})
                rows.append({"case": case, "contender": tool, "metric": "CPU/req",
                             "unit": "µs", "values": [r["cpu_us_per_req"] for r in rs]})
                rows.append({"case": case, "contender": tool, "metric": "wake-ups/req",
                             "unit": "", "values": [r["wakeups"] / max(r["done"], 1)
                                                    for r in rs]})
    print(f"\nhttpbench {httpbench.__version__} HTTP/2 load generator vs h2load; "
          f"{a.rounds} rounds x {a.duration:g} s, medians; -t1\n", file=sys.stderr)
    print("| case | tool | req/s | CPU µs/req | wake-ups/req |", file=sys.stderr)
    print("|---|---|---:|---:|---:|", file=sys.stderr)
    for i in range(0, len(rows), 3):
        rq, cpu, wk = rows[i], rows[i + 1], rows[i + 2]
        print(f"| {rq['case']} | {rq['contender']} | {statistics.median(rq['values']):,.0f} | "
              f"{statistics.median(cpu['values']):.2f} | {statistics.median(wk['values']):.3f} |",
              file=sys.stderr)
    _peers.write_rows(rows, notes, a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
