"""Instructions per request of the C load generator and the embedded server, per protocol,
under callgrind: the figure a refactoring of the C core must keep (within 1 %).

Each figure is (Ir(n2) - Ir(n1)) / (n2 - n1), so start-up, connection set-up and the
handshakes cancel out, and only the C threads are counted (``--toggle-collect``): the
generator's engine threads (``thread_main``), the server's workers (``worker_main``); the
Python thread around them polls on a timer and would add noise.

Generator: ``python -c RUNNER`` (bench() once) traced; the target is the embedded server in
its own process, untraced, /bytes/150. Configurations: HTTP/1.1 -c1 and -c4, h2c and h2 over
TLS, h3 (-m: streams per connection). Server: ``httpbench serve`` traced, counters zeroed
before and dumped after each run of the untraced CLI generator (-c1).

    python benchmarks/bench_callgrind.py [--n1 300] [--n2 1300] [--only 'gen h2,server h3']

-c4 and -m10 depend a little on timing (how many responses one read finds): repeat runs
differ by up to ~0.5 %; -c1 -m1 figures repeat to a few instructions.
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

RUNNER = """
import sys, httpbench
url, n, c, m, proto, ca = sys.argv[1:7]
kw = {"h3": {"http3": True}, "h2": {"http2": True}}.get(proto, {})
if proto in ("h2", "h3"):
    kw["streams"] = int(m)
r = httpbench.bench(url, n=int(n), concurrency=int(c), ca_file=ca, timeout=30, **kw)
assert r.successes == int(n) and r.errors == 0, (r.error_counts, r.metadata["first_error"])
"""

# name: (target: "plain" or "tls", connections, streams, protocol, url attribute)
GENERATOR = {
    "gen h1 -c1": ("plain", 1, 1, "h1", "url"),
    "gen h1 -c4": ("plain", 4, 1, "h1", "url"),
    "gen h2c -c1 -m1": ("plain", 1, 1, "h2", "url"),
    "gen h2c -c1 -m10": ("plain", 1, 10, "h2", "url"),
    "gen h2 TLS -c1 -m1": ("tls", 1, 1, "h2", "url"),
    "gen h3 -c1 -m1": ("tls", 1, 1, "h3", "h3_url"),
    "gen h3 -c1 -m10": ("tls", 1, 10, "h3", "h3_url"),
}
SERVER = {  # serve options, generator options
    "server h1": (["--no-h2"], []),
    "server h2c": ([], ["--h2"]),
    "server h3": (["--tls", "--h3"], ["--h3", "--insecure"]),
}


def _total(path: str) -> int:
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no instruction total in {path}")


def generator_ir(url: str, n: int, c: int, m: int, proto: str, ca: str, tries: int = 3) -> int:
    err = ""
    for _ in range(tries):  # a run on a loaded machine can miss; a good run's count is exact
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "cg.out")
            p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                                "--toggle-collect=thread_main", sys.executable, "-c", RUNNER,
                                url, str(n), str(c), str(m), proto, ca],
                               capture_output=True, text=True, timeout=1800)
            if p.returncode == 0:
                return _total(out)
            err = p.stderr[-2000:]
    raise RuntimeError(err)


def server_ir(serve: list[str], flags: list[str], n1: int, n2: int,
              path: str = "/bytes/150") -> float:
    cli = [sys.executable, "-m", "httpbench"]
    h3 = "--h3" in serve
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        srv = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                                "--toggle-collect=worker_main", *cli, "serve", *serve,
                                "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            url = None
            pat = r"HTTP/3 on UDP port \d+: (https://\S+)" if h3 else r"(https?://127\S+)"
            for line in srv.stdout:  # valgrind slows start-up: the URL line says it is up
                mo = re.search(pat, line)
                if mo:
                    url = mo.group(1).rstrip("/")
                    break
            if url is None:
                raise RuntimeError("the server under callgrind did not start")
            irs = []
            for k, n in enumerate((n1, n2)):
                subprocess.run(["callgrind_control", "-z", str(srv.pid)], check=True,
                               capture_output=True, timeout=60)
                p = subprocess.run([*cli, url + path, *flags, "-n", str(n), "-c", "1"],
                                   capture_output=True, text=True, timeout=900)
                if p.returncode != 0 or not re.search(rf"Complete requests:\s+{n}\b", p.stdout):
                    raise RuntimeError(f"the generator failed: {p.stdout}{p.stderr}")
                subprocess.run(["callgrind_control", "-d", str(srv.pid)], check=True,
                               capture_output=True, timeout=60)
                irs.append(_total(f"{out}.{k + 1}"))
        finally:
            srv.terminate()
            srv.wait(60)
    return (irs[1] - irs[0]) / (n2 - n1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n1", type=int, default=300)
    ap.add_argument("--n2", type=int, default=1300)
    ap.add_argument("--only", default="", help="comma-separated parts of the names to run")
    ap.add_argument("--json", help="write {name: instructions/request} here")
    a = ap.parse_args()
    only = [w.strip() for w in a.only.split(",") if w.strip()]

    def wanted(name: str) -> bool:
        return not only or any(w in name for w in only)

    rows: dict[str, int] = {}
    with start_process(tls=True, h3=True) as tls, start_process() as plain:
        for name, (target, c, m, proto, attr) in GENERATOR.items():
            if not wanted(name):
                continue
            srv = tls if target == "tls" else plain
            url = getattr(srv, attr).rstrip("/") + "/bytes/150"
            i1 = generator_ir(url, a.n1, c, m, proto, tls.ca_file)
            i2 = generator_ir(url, a.n2, c, m, proto, tls.ca_file)
            rows[name] = round((i2 - i1) / (a.n2 - a.n1))
            print(f"{name:<22} {rows[name]:>8} instructions/request", flush=True)
    for name, (serve, flags) in SERVER.items():
        if wanted(name):
            rows[name] = round(server_ir(serve, flags, a.n1, a.n2))
            print(f"{name:<22} {rows[name]:>8} instructions/request", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"n1": a.n1, "n2": a.n2, "instructions_per_request": rows}, f, indent=1)


if __name__ == "__main__":
    main()
