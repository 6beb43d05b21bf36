"""The load generator over HTTP/3 vs over HTTP/2 with TLS, by exact counts: user-space
instructions per request (callgrind) and syscalls per request (strace -c -f), each the
difference between two runs of n1 and n2 requests divided by n2 - n1, so interpreter
start-up, connection set-up and the handshakes cancel out.

Shapes: -c1 -m1 and -c4 -m10. Target: the embedded server in its own process (never
traced): /bytes/150, HTTP/3 on its UDP listener, HTTP/2 over TLS on its TCP port. The
traced process is `python -c RUNNER` running bench() once; callgrind counts every
thread of it (the engine's included, the kernel not).

    python benchmarks/bench_h3loadgen.py [--n1 300] [--n2 1300] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from httpbench import start_process

SHAPES = {"c1m1": (1, 1), "c4m10": (4, 10)}

RUNNER = """
import sys
import httpbench
url, n, c, m, proto, ca = sys.argv[1:7]
kw = {"http3": True} if proto == "h3" else {"http2": True}
r = httpbench.bench(url, n=int(n), concurrency=int(c), streams=int(m), ca_file=ca, timeout=30,
                    **kw)
assert r.successes == int(n) and r.errors == 0, (r.error_counts, r.metadata["first_error"])
"""


def _cmd(url: str, n: int, c: int, m: int, proto: str, ca: str) -> list[str]:
    return [sys.executable, "-c", RUNNER, url, str(n), str(c), str(m), proto, ca]


def instructions(url: str, n: int, c: int, m: int, proto: str, ca: str) -> int:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                            *_cmd(url, n, c, m, proto, ca)], capture_output=True, text=True,
                           timeout=1800)
        if p.returncode != 0:
            raise RuntimeError(p.stderr[-2000:])
        with open(out) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
    raise RuntimeError("no callgrind total")


def syscalls(url: str, n: int, c: int, m: int, proto: str, ca: str) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "st.txt")
        p = subprocess.run(["strace", "-f", "-c", "-o", out, *_cmd(url, n, c, m, proto, ca)],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError(p.stderr[-2000:])
        calls: dict[str, int] = {}
        with open(out) as f:
            for line in f:
                mo = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
                if mo and mo.group(2) != "total":
                    calls[mo.group(2)] = int(mo.group(1))
        return calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n1", type=int, default=300)
    ap.add_argument("--n2", type=int, default=1300)
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    dn = a.n2 - a.n1
    rows = []
    with start_process(tls=True, h3=True) as srv:
        targets = {"h3": srv.h3_url + "/bytes/150", "h2": srv.url + "/bytes/150"}
        for shape, (c, m) in SHAPES.items():
            for proto, url in targets.items():
                i1 = instructions(url, a.n1, c, m, proto, srv.ca_file)
                i2 = instructions(url, a.n2, c, m, proto, srv.ca_file)
                s1 = syscalls(url, a.n1, c, m, proto, srv.ca_file)
                s2 = syscalls(url, a.n2, c, m, proto, srv.ca_file)
                per = {k: (s2.get(k, 0) - s1.get(k, 0)) / dn for k in set(s1) | set(s2)}
                top = {k: round(v, 2) for k, v in sorted(per.items(), key=lambda kv: -kv[1])
                       if v >= 0.05}
                row = {"shape": shape, "protocol": proto, "instructions_per_request":
                       round((i2 - i1) / dn), "syscalls_per_request": round(sum(per.values()), 2),
                       "syscalls_by_name": top}
                rows.append(row)
                print(json.dumps(row), flush=True)
    if a.json:
        # benchmarks/run.py's rows: one contender's figure in one case
        names = {"h3": "httpbench h3", "h2": "httpbench h2 (TLS)"}
        out = []
        for r in rows:
            case = f"GET /bytes/150 {r['shape']}"
            out.append({"case": case, "contender": names[r["protocol"]], "metric": "instr/req",
                        "unit": "instructions", "values": [r["instructions_per_request"]]})
            out.append({"case": case, "contender": names[r["protocol"]],
                        "metric": "syscalls/req", "unit": "syscalls",
                        "values": [r["syscalls_per_request"]]})
        with open(a.json, "w") as f:
            json.dump({"n1": a.n1, "n2": a.n2, "runs": rows, "rows": out, "notes": []}, f,
                      indent=1)


if __name__ == "__main__":
    main()
