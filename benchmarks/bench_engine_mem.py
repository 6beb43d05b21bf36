#!/usr/bin/env python3
"""Load generator memory: heap allocations per request, and RSS growth with run length.

1. Allocations: ``httpbench.bench()`` runs in a fresh Python process started
   with the package's malloc-counting preload library
   (``native_alloc_preload_path()``, LD_PRELOAD), which counts every
   malloc/calloc/realloc/memalign of the process (all threads, Python's own
   raw allocations included). After a warm-up run the counter is read around
   one short and, in another process, one long run; ``(long - short) /
   (extra requests)`` is the number of heap allocations per request. Goal: 0
   over plain HTTP. Over HTTPS the same figure is printed for information: it
   includes OpenSSL's own record-layer allocations, which httpbench does not
   control.
2. RSS: separate processes run ``bench(n=SMALL)`` and ``bench(n=LARGE)``
   (default 10^5 and 10^7) and report peak and current RSS after the run.
   Goal: growth < 1 MB. ``--quick`` uses 10^5 vs 3*10^6 requests (and says so).

The target is the embedded server in its own process (``--server nginx`` for
nginx, 1 worker). Run::

    python benchmarks/bench_engine_mem.py            # 10^5 vs 10^7 (~2 min at ~100k req/s)
    python benchmarks/bench_engine_mem.py --quick    # 10^5 vs 3*10^6
    python benchmarks/bench_engine_mem.py --large 30000000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _peers import Nginx, machine_metadata  # noqa: E402
from httpbench import native_alloc_preload_path, start_process  # noqa: E402

GOAL_ALLOCS_PER_REQ = 0.0
GOAL_RSS_GROWTH_BYTES = 1_000_000

ALLOC_WORKER = textwrap.dedent(
    """
    import json, sys
    import httpbench
    from httpbench import native_allocs
    url, n, conc, threads, ca = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    kw = {"ca_file": ca} if ca != "-" else {}
    if native_allocs() is None:
        sys.exit("the malloc counter is not preloaded")
    httpbench.bench(url, n=min(2000, n), concurrency=conc, threads=threads, **kw)  # warm-up
    a0 = native_allocs()
    r = httpbench.bench(url, n=n, concurrency=conc, threads=threads, **kw)
    a1 = native_allocs()
    print(json.dumps({"n": n, "ok": r.successes, "errors": r.errors,
                      "allocs": a1["count"] - a0["count"], "bytes": a1["bytes"] - a0["bytes"],
                      "frees": a1["frees"] - a0["frees"], "req_per_s": r.rps}))
    """
)

RSS_WORKER = textwrap.dedent(
    """
    import json, sys
    import httpbench

    def status():
        out = {}
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0]) * 1024
        return out

    url, n, conc, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    before = status()
    r = httpbench.bench(url, n=n, concurrency=conc, threads=threads)
    after = status()
    print(json.dumps({"n": n, "ok": r.successes, "errors": r.errors,
                      "rss_before": before["VmRSS"], "rss_after": after["VmRSS"],
                      "peak_rss": after["VmHWM"], "seconds": r.duration_ns / 1e9,
                      "req_per_s": r.rps}))
    """
)


def _worker(code: str, args: list[Any], env: dict[str, str] | None, timeout: float) -> dict:
    p = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env,
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"worker failed ({p.returncode}):\n{p.stderr.strip()}")
    d = json.loads(p.stdout.strip().splitlines()[-1])
    if d["errors"] or d["ok"] != d["n"]:
        raise RuntimeError(f"worker run had errors: {d}")
    return d


def alloc_check(url: str, short: int, long: int, conc: int, threads: int,
                ca: str | None = None) -> dict[str, Any]:
    """Heap allocations per request of bench(): (long - short) / (long - short requests)."""
    env = dict(os.environ, LD_PRELOAD=native_alloc_preload_path())
    args = [conc, threads, ca or "-"]
    s = _worker(ALLOC_WORKER, [url, short, *args], env, 300)
    lg = _worker(ALLOC_WORKER, [url, long, *args], env, 900)
    extra = lg["n"] - s["n"]
    return {
        "url": url, "concurrency": conc, "threads": threads, "short": s, "long": lg,
        "extra_allocs": lg["allocs"] - s["allocs"],
        "extra_bytes": lg["bytes"] - s["bytes"],
        "allocs_per_request": (lg["allocs"] - s["allocs"]) / extra,
        "bytes_per_request": (lg["bytes"] - s["bytes"]) / extra,
    }


def rss_check(url: str, small: int, large: int, conc: int, threads: int) -> dict[str, Any]:
    """Peak/current RSS after bench(n=small) vs bench(n=large), each in a fresh process."""
    s = _worker(RSS_WORKER, [url, small, conc, threads], None, 600)
    timeout = max(900.0, large / 10_000)  # generous: 10k req/s would still finish
    lg = _worker(RSS_WORKER, [url, large, conc, threads], None, timeout)
    return {
        "url": url, "concurrency": conc, "threads": threads, "small": s, "large": lg,
        "peak_rss_growth": lg["peak_rss"] - s["peak_rss"],
        "rss_growth": lg["rss_after"] - s["rss_after"],
    }


def _mb(b: float) -> str:
    return f"{b / 1e6:+.3f} MB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="RSS 10^5 vs 3*10^6 requests; allocations 2,000 vs 20,000")
    ap.add_argument("--small", type=int, default=None, help="requests of the small RSS run")
    ap.add_argument("--large", type=int, default=None,
                    help="requests of the large RSS run (default 10^7; --quick 3*10^6)")
    ap.add_argument("--alloc-short", type=int, default=None)
    ap.add_argument("--alloc-long", type=int, default=None)
    ap.add_argument("-c", "--concurrency", type=int, default=16)
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("--server", choices=["embedded", "nginx"], default="embedded")
    ap.add_argument("--no-tls", action="store_true", help="skip the HTTPS allocation check")
    ap.add_argument("--skip-rss", action="store_true")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args(argv)
    small = a.small or 100_000
    large = a.large or (3_000_000 if a.quick else 10_000_000)
    ashort = a.alloc_short or 2_000
    along = a.alloc_long or (20_000 if a.quick else 100_000)
    if large <= small or along <= ashort:
        ap.error("the large/long run must have more requests than the small/short one")

    out: dict[str, Any] = {"benchmark": "engine_mem", "quick": a.quick, "server": a.server,
                           "metadata": machine_metadata(),
                           "goals": {"allocs_per_request": GOAL_ALLOCS_PER_REQ,
                                     "rss_growth_bytes_lt": GOAL_RSS_GROWTH_BYTES}}
    if a.quick:
        print(f"QUICK MODE: RSS compared after {small:,} vs {large:,} requests "
              f"(the goal is stated for 10^5 vs 10^7; run without --quick for it)")
    t0 = time.monotonic()
    ng = None
    srv = None
    try:
        if a.server == "nginx":
            ng = Nginx(tls=not a.no_tls).start()
            http_url = ng.url + "/150b"
            https_url, ca = (ng.https_url + "/150b", ng.ca_file) if not a.no_tls else (None, None)
        else:
            srv = start_process(threads=1)
            http_url = srv.url.rstrip("/") + "/bytes/150"
            https_url, ca = None, None
        tls_srv = None
        if a.server == "embedded" and not a.no_tls:
            tls_srv = start_process(tls=True, threads=1)
            https_url, ca = tls_srv.url.rstrip("/") + "/bytes/150", tls_srv.ca_file
        try:
            al = alloc_check(http_url, ashort, along, a.concurrency, a.threads)
            out["allocs_http"] = al
            print(f"heap allocations, HTTP  ({a.concurrency} conns, {a.threads} thread(s)): "
                  f"{al['short']['allocs']} in {ashort:,} requests, {al['long']['allocs']} in "
                  f"{along:,} -> {al['allocs_per_request']:.6f} per request "
                  f"({al['bytes_per_request']:.3f} bytes/request); goal 0: "
                  f"{'PASS' if al['extra_allocs'] <= 0 else 'MISS'}")
            if https_url:
                at = alloc_check(https_url, ashort, along, a.concurrency, a.threads, ca)
                out["allocs_https"] = at
                print(f"heap allocations, HTTPS: {at['short']['allocs']} in {ashort:,}, "
                      f"{at['long']['allocs']} in {along:,} -> {at['allocs_per_request']:.3f} "
                      "per request (info: includes OpenSSL's record-layer allocations)")
        finally:
            if tls_srv is not None:
                tls_srv.stop()
        if not a.skip_rss:
            rs = rss_check(http_url, small, large, a.concurrency, a.threads)
            out["rss"] = rs
            s, lg = rs["small"], rs["large"]
            print(f"RSS after {small:,} requests: peak {s['peak_rss'] / 1e6:.2f} MB, current "
                  f"{s['rss_after'] / 1e6:.2f} MB ({s['req_per_s']:,.0f} req/s)")
            print(f"RSS after {large:,} requests: peak {lg['peak_rss'] / 1e6:.2f} MB, current "
                  f"{lg['rss_after'] / 1e6:.2f} MB ({lg['req_per_s']:,.0f} req/s, "
                  f"{lg['seconds']:.0f} s)")
            print(f"RSS growth: peak {_mb(rs['peak_rss_growth'])}, current "
                  f"{_mb(rs['rss_growth'])}; goal < 1 MB: "
                  f"{'PASS' if rs['peak_rss_growth'] < GOAL_RSS_GROWTH_BYTES else 'MISS'}")
    finally:
        if srv is not None:
            srv.stop()
        if ng is not None:
            ng.stop()
    out["rss_small"], out["rss_large"] = small, large
    out["alloc_short"], out["alloc_long"] = ashort, along
    out["seconds"] = time.monotonic() - t0
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
