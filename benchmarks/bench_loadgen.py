"""Load generators side by side: httpbench vs wrk vs h2load (and a floor).

Targets: nginx (1 worker, access_log off, a 150-byte file; HTTP and HTTPS on a
temporary config, benchmarks/_peers.Nginx) and the embedded server (its own
process, /bytes/150). Configurations: -t1 -c16 and -t1 -c1, each over HTTP
and HTTPS. Runs are interleaved (round-robin over target x config x tool,
`--rounds` times) so machine noise hits every tool alike; the table shows
medians.

"floor" is benchmarks/floor_loadgen.c, compiled on the fly: a C client that
does nothing per request but one send() of a prebuilt request and one recv()
counted against the known response length (no parsing, no per-request clock,
no histograms). Its CPU per request is the kernel's loopback cost plus almost
nothing, i.e. the least any generator can spend on this machine; "CPU vs
floor" shows how much httpbench adds to it.

Figures per run: requests/s (successful responses / measured seconds) and the
generator's CPU per request (user + sys / requests): for wrk and h2load from
wait4() rusage of their process, for httpbench from the engine threads' own
rusage (RUSAGE_THREAD; the Python interpreter around it is not counted).
Goals (benchmarks/goals.py): httpbench CPU/request <= 0.8x wrk's and req/s >= wrk's.

    python benchmarks/bench_loadgen.py [--duration 5] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

import httpbench
from httpbench import start_process

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _peers  # noqa: E402
from _peers import FLOOR_LOADGEN_SRC, Nginx, build_floor  # noqa: E402

HB_RUNNER = """
import json, sys
import httpbench
r = httpbench.bench(sys.argv[1], duration=float(sys.argv[2]), concurrency=int(sys.argv[3]),
                    threads=1, verify=False)
print(json.dumps({"ok": r.successes, "done": r.responses + r.errors, "errors": r.errors,
                  "non2xx": r.non_2xx, "duration_s": r.duration_ns / 1e9,
                  "cpu_ns": r.cpu_user_ns + r.cpu_sys_ns}))
"""


def _tool_run(r: _peers.LoadResult, failed: int = 0) -> dict:
    """A wrk/h2load run of _peers in this script's record shape (ok: 2xx responses)."""
    return {"ok": r.requests - r.non_2xx - failed, "done": r.requests,
            "duration_s": r.seconds, "cpu_s": r.cpu_s}


def run_wrk(url: str, conns: int, dur: float) -> dict:
    return _tool_run(_peers.run_wrk(url, connections=conns, duration=dur, latency=False))


def run_h2load(url: str, conns: int, dur: float) -> dict:
    r = _peers.run_h2load(url, connections=conns, duration=dur)
    return _tool_run(r, failed=r.errors)  # h2load's done includes errored requests


def run_httpbench(url: str, conns: int, dur: float) -> dict:
    return _peers.run_bench_script(HB_RUNNER, [url, str(dur), str(conns)], dur)




def run_floor(url: str, conns: int, dur: float) -> dict:
    if FLOOR_EXE is None:
        raise RuntimeError("floor_loadgen is not built")
    return _peers.run_floor(FLOOR_EXE, url, conns, dur)


FLOOR_EXE: str | None = None


TOOLS = {"httpbench": run_httpbench, "wrk": run_wrk, "h2load": run_h2load, "floor": run_floor}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tools", default="httpbench,wrk,h2load,floor")
    ap.add_argument("--targets", default="nginx,embedded")
    ap.add_argument("--configs", default="http:16,https:16,http:1,https:1",
                    help="scheme:connections pairs to run (default: all four)")
    ap.add_argument("--json", help="write all runs as JSON")
    a = ap.parse_args(argv)
    try:
        configs = [(sc, int(cn)) for sc, cn in (c.split(":") for c in a.configs.split(",") if c)]
    except ValueError:
        ap.error(f"--configs: expected scheme:connections pairs, got {a.configs!r}")
    if not configs or any(sc not in ("http", "https") or cn < 1 for sc, cn in configs):
        ap.error(f"--configs: schemes are http/https and connections >= 1, got {a.configs!r}")
    tools = [t for t in a.tools.split(",") if t]
    unknown = [t for t in tools if t not in TOOLS]
    if unknown:
        ap.error(f"unknown tool(s): {', '.join(unknown)} (known: {', '.join(TOOLS)})")
    for t in tools:
        if t in ("wrk", "h2load") and not shutil.which(t):
            print(f"# {t} not installed; skipped", file=sys.stderr)
    tools = [t for t in tools if t not in ("wrk", "h2load") or shutil.which(t)]

    tmp = tempfile.mkdtemp(prefix="hb-loadgen-")
    global FLOOR_EXE
    if "floor" in tools:
        FLOOR_EXE = build_floor(FLOOR_LOADGEN_SRC, tmp, ["-lssl", "-lcrypto"])
        if FLOOR_EXE is None:
            tools.remove("floor")
    ngx = None
    servers = []
    targets: dict[str, dict[str, str]] = {}
    try:
        if "nginx" in a.targets and shutil.which("nginx"):
            ngx = Nginx(tls=True).start()
            targets["nginx"] = {"http": ngx.url + "/150b", "https": ngx.https_url + "/150b"}
        if "embedded" in a.targets:
            s1 = start_process(tls=False)
            s2 = start_process(tls=True)
            servers += [s1, s2]
            targets["embedded"] = {"http": s1.url + "/bytes/150", "https": s2.url + "/bytes/150"}
        cases = [(f"{tname:8} {scheme:5} c{conns:<3}",
                  {"target": tname, "scheme": scheme, "conns": conns})
                 for tname in targets for scheme, conns in configs]
        runs = _peers.round_robin(a.rounds, cases, tools, lambda tool, c: TOOLS[tool](
            targets[c["target"]][c["scheme"]], c["conns"], a.duration))
    finally:
        if ngx is not None:
            ngx.stop()
        for s in servers:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nhttpbench {httpbench.__version__} load generator vs wrk/h2load; "
          f"{a.rounds} rounds x {a.duration:g} s, medians; -t1\n")
    print("| target | scheme | conns | tool | req/s | CPU µs/req | req/s vs wrk | CPU vs wrk "
          "| CPU vs floor |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    for tname in targets:
        for scheme, conns in configs:
            med = {}
            for tool in tools:
                rs = [r for r in runs if (r["target"], r["scheme"], r["conns"], r["tool"]) ==
                      (tname, scheme, conns, tool)]
                med[tool] = (statistics.median(r["rps"] for r in rs),
                             statistics.median(r["cpu_us_per_req"] for r in rs))
            for tool in tools:
                rps, cpu = med[tool]
                if "wrk" in med:
                    rr = f"{rps / med['wrk'][0]:.2f}x"
                    cr = f"{cpu / med['wrk'][1]:.2f}x"
                else:
                    rr = cr = "-"
                fr = f"{cpu / med['floor'][1]:.2f}x" if "floor" in med else "-"
                print(f"| {tname} | {scheme} | {conns} | {tool} | {rps:,.0f} | {cpu:.2f} | "
                      f"{rr} | {cr} | {fr} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
