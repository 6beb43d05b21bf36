"""Parser micro-benchmark: ns per ~150-byte response head.

benchmarks/bench_parse.c linked with csrc/core/http/hb_parse.c (same -O2 as
setup.py), through the parser's C contract (http/hb_parse.h): ns per response head,
request head and small chunked body. The parser has no public Python entry
point (from Python it runs inside Client, bench() and the server), so its
cost as Python sees it is part of the per-request CPU that bench_client.py and
bench_loadgen.py measure; a Python-level race against httptools would time a
private binding nobody calls.

usage: python benchmarks/bench_parse.py [--iters N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESP = (b"HTTP/1.1 200 OK\r\nServer: httpbench\r\nDate: Wed, 02 Dec 2026 15:00:00 GMT\r\n"
        b"Content-Type: text/plain\r\nContent-Length: 13\r\nConnection: keep-alive\r\n\r\n")
BODY = b"Hello, World!"


def c_bench(iters: int, repeat: int) -> dict[str, float]:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        print("C: no compiler found, skipped")
        return {}
    core = os.path.join(ROOT, "csrc", "core")
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "bench_parse")
        subprocess.run([cc, "-std=c11", "-O2", "-D_GNU_SOURCE", "-I", core,
                        os.path.join(ROOT, "benchmarks", "bench_parse.c"),
                        os.path.join(core, "http", "hb_parse.c"),
                        os.path.join(core, "base", "hb_common.c"), "-o", exe], check=True)
        best: dict[str, float] = {}
        for _ in range(repeat):
            out = subprocess.run([exe, str(iters)], capture_output=True, text=True,
                                 check=True).stdout
            for line in out.splitlines():
                name, ns = line.split()
                best[name] = min(best.get(name, float("inf")), float(ns))
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    print(f"response head: {len(RESP)} bytes, 5 headers; best of {a.repeat} runs")
    c = c_bench(a.iters * 5, a.repeat)
    for name, ns in c.items():
        print(f"  C  {name:<40} {ns:8.1f} ns/op")
    return 0


if __name__ == "__main__":
    sys.exit(main())
