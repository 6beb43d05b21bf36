"""Where HTTP/3 spends its instructions, per function: callgrind on the C server and
on the load generator, each at two request counts n1 < n2, every function's own
instructions (exclusive) at n2 minus those at n1, divided by n2 - n1, so start-up,
connection set-up and handshakes cancel out and what is left is per request.

Shapes: -c1 -m1 and -c4 -m10, /bytes/150. The server runs under callgrind
(``httpbench serve --tls --h3``, counters zeroed before and dumped after each run) and
is driven by the generator outside valgrind; the generator runs under callgrind
(``python -c`` running bench() once) against the server in its own process.

    python benchmarks/profile_h3.py [--side server|generator|both] [--n1 300] [--n2 1300]
        [--top 15] [--json out.json]

Prints one table per side and shape: function, its library, instructions/request,
share of the total.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any

SHAPES = {"c1m1": (1, 1), "c4m10": (4, 10)}
LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S.*?)\s*$")
TOTAL = re.compile(r"^\s*([\d,]+)\s.*PROGRAM TOTALS")
RUNNER = """
import sys
import httpbench
url, n, c, m = sys.argv[1:5]
r = httpbench.bench(url, n=int(n), concurrency=int(c), streams=int(m), verify=False,
                    timeout=30, http3=True)
assert r.successes == int(n) and r.errors == 0, (r.error_counts, r.metadata["first_error"])
"""


def per_function(path: str) -> dict[str, int]:
    """Exclusive instructions per function of a callgrind output file."""
    p = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", "--auto=no",
                        path], capture_output=True, text=True, check=True, timeout=600)
    out: dict[str, int] = {}
    started = False
    for line in p.stdout.splitlines():
        t = TOTAL.match(line)
        if t:
            out["TOTAL"] = int(t.group(1).replace(",", ""))
            continue
        if "file:function" in line:
            started = True
            continue
        if not started or line.startswith("---"):
            continue
        if not line.strip():  # the table ends
            break
        m = LINE.match(line)
        if m:
            name = m.group(2)
            out[name] = out.get(name, 0) + int(m.group(1).replace(",", ""))
    return out


def diff(a: dict[str, int], b: dict[str, int], n: int) -> dict[str, float]:
    return {k: (b.get(k, 0) - a.get(k, 0)) / n for k in set(a) | set(b)}


def server(n1: int, n2: int) -> dict[str, dict[str, float]]:
    cli = [sys.executable, "-m", "httpbench"]
    res: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        srv = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                                *cli, "serve", "--tls", "--h3", "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            url = None
            assert srv.stdout is not None
            for line in srv.stdout:
                m = re.search(r"HTTP/3 on UDP port \d+: (https://\S+)", line)
                if m:
                    url = m.group(1)
                    break
            if url is None:
                raise RuntimeError("the server under callgrind did not start")
            k = 0
            for shape, (c, m) in SHAPES.items():
                got = []
                for n in (n1, n2):
                    subprocess.run(["callgrind_control", "-z", str(srv.pid)], check=True,
                                   capture_output=True, timeout=60)
                    p = subprocess.run([*cli, url + "/bytes/150", "--h3", "-n", str(n), "-c",
                                        str(c), "-m", str(m), "--insecure"],
                                       capture_output=True, text=True, timeout=900)
                    if p.returncode != 0:
                        raise RuntimeError(p.stderr[-2000:])
                    subprocess.run(["callgrind_control", "-d", str(srv.pid)], check=True,
                                   capture_output=True, timeout=60)
                    k += 1
                    got.append(per_function(f"{out}.{k}"))
                res[shape] = diff(got[0], got[1], n2 - n1)
        finally:
            srv.terminate()
            srv.wait(60)
    return res


def generator(n1: int, n2: int) -> dict[str, dict[str, float]]:
    from httpbench import start_process

    res: dict[str, dict[str, float]] = {}
    with start_process(tls=True, h3=True) as srv, tempfile.TemporaryDirectory() as tmp:
        url = srv.h3_url + "/bytes/150"
        for shape, (c, m) in SHAPES.items():
            got = []
            for n in (n1, n2):
                out = os.path.join(tmp, f"g-{shape}-{n}.out")
                p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                                    sys.executable, "-c", RUNNER, url, str(n), str(c), str(m)],
                                   capture_output=True, text=True, timeout=1800,
                                   env=dict(os.environ, PYTHONHASHSEED="0"))
                if p.returncode != 0:
                    raise RuntimeError(p.stderr[-2000:])
                got.append(per_function(out))
            res[shape] = diff(got[0], got[1], n2 - n1)
    return res


def table(title: str, d: dict[str, float], top: int) -> str:
    """The top functions (the interpreter's own left out: the generator's Python thread
    only waits, and its start-up differs run to run in ways that cancel only in sum)."""
    total = d.get("TOTAL", 0.0)
    fns = [(k, v) for k, v in d.items() if k != "TOTAL" and "libpython" not in k
           and "start_thread" not in k and "clone.S" not in k]  # those two: whole threads
    libs: dict[str, float] = {}
    for name, v in fns:
        m = re.search(r"\[(?:\S*/)?([^/\]]+?)(?:\.so[\d.]*|\.cpython\S*)?\]$", name)
        lib = m.group(1) if m else "?"
        lib = {"libnettle": "crypto", "libhogweed": "crypto", "libgmp": "crypto",
               "libgnutls": "crypto", "_core": "httpbench"}.get(lib, lib)
        libs[lib] = libs.get(lib, 0.0) + v
    rows = sorted(fns, key=lambda kv: -kv[1])[:top]
    lines = [f"{title}: {total:,.0f} instructions/request",
             "by library: " + ", ".join(f"{k} {v:,.0f}" for k, v in
                                       sorted(libs.items(), key=lambda kv: -kv[1]) if v >= 50),
             f"{'instr/req':>10} {'share':>6}  function"]
    for name, v in rows:
        name = re.sub(r"^\S*/(csrc/\S+)", r"\1", name)
        name = re.sub(r"\[/\S*/([^/\]]+)\]$", r"[\1]", name)
        lines.append(f"{v:>10,.0f} {v / total:>6.1%}  {name}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--side", choices=("server", "generator", "both", "none"), default="both")
    ap.add_argument("--n1", type=int, default=300)
    ap.add_argument("--n2", type=int, default=1300)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json")
    ap.add_argument("--load", help="print the tables of an earlier --json instead of measuring")
    a = ap.parse_args()
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        sys.exit("valgrind (callgrind) is not installed")
    out: dict[str, Any] = {}
    if a.load:
        a.side = "none"
    if a.side in ("server", "both"):
        out["server"] = server(a.n1, a.n2)
    if a.side in ("generator", "both"):
        out["generator"] = generator(a.n1, a.n2)
    if a.load:
        with open(a.load) as f:
            out = json.load(f)
    for side, shapes in out.items():
        for shape, d in shapes.items():
            print(table(f"{side} {shape}", d, a.top))
            print()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
