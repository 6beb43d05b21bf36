"""Parser micro-benchmark: ns per ~150-byte response head.

Two levels, side by side in one run (ratios, not absolute thresholds):

* C: benchmarks/bench_parse.c linked with csrc/core/hb_parse.c (same -O2 as
  setup.py); ns per response head, request head and small chunked body.
* Python: httpbench._core.parse_response_head (returns a dict with the header
  list) vs httptools' llhttp-based HttpResponseParser and h11, when installed,
  each parsing the same response and collecting its headers.

usage: python benchmarks/bench_parse.py [--iters N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

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
                        os.path.join(core, "hb_parse.c"), os.path.join(core, "hb_common.c"),
                        "-o", exe], check=True)
        best: dict[str, float] = {}
        for _ in range(repeat):
            out = subprocess.run([exe, str(iters)], capture_output=True, text=True,
                                 check=True).stdout
            for line in out.splitlines():
                name, ns = line.split()
                best[name] = min(best.get(name, float("inf")), float(ns))
    return best


def py_bench(iters: int, repeat: int) -> dict[str, float]:
    from httpbench import _core

    def ours() -> None:
        parse = _core.parse_response_head
        for _ in range(iters):
            parse(RESP)

    results = {"httpbench._core.parse_response_head": ours}

    try:
        import httptools
    except ImportError:
        print("httptools not installed: pip install httptools to compare")
    else:
        class Proto:
            __slots__ = ("headers", "done")

            def __init__(self) -> None:
                self.headers: list[tuple[bytes, bytes]] = []
                self.done = 0

            def on_header(self, name: bytes, value: bytes) -> None:
                self.headers.append((name, value))

            def on_headers_complete(self) -> None:
                self.done += 1

        def llhttp() -> None:
            proto = Proto()
            p = httptools.HttpResponseParser(proto)
            msg = RESP + BODY  # one keep-alive connection, many responses
            for _ in range(iters):
                proto.headers = []
                p.feed_data(msg)
            assert proto.done == iters

        results["httptools.HttpResponseParser (llhttp)"] = llhttp

    try:
        import h11
    except ImportError:
        pass
    else:
        def h11_bench() -> None:
            n = iters // 20 or 1  # pure Python: fewer iterations, same per-op figure
            for _ in range(n):
                c = h11.Connection(h11.CLIENT)
                c.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
                c.send(h11.EndOfMessage())
                c.receive_data(RESP)
                c.next_event()
            h11_bench.n = n  # type: ignore[attr-defined]

        results["h11 (pure Python, incl. connection setup)"] = h11_bench

    out: dict[str, float] = {}
    for name, fn in results.items():
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter_ns()
            fn()
            dt = time.perf_counter_ns() - t0
            n = getattr(fn, "n", iters)
            best = min(best, dt / n)
        out[name] = best
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    print(f"response head: {len(RESP)} bytes, 5 headers; best of {a.repeat} runs")
    c = c_bench(a.iters * 5, a.repeat)
    for name, ns in c.items():
        print(f"  C  {name:<40} {ns:8.1f} ns/op")
    py = py_bench(a.iters, a.repeat)
    base = py["httpbench._core.parse_response_head"]
    for name, ns in py.items():
        print(f"  Py {name:<40} {ns:8.1f} ns/op  x{ns / base:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
