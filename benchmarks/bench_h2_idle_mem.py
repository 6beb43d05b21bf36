#!/usr/bin/env python3
"""Embedded server memory under idle HTTP/2 connections and under an h2 soak.

1. Idle connections: the server runs in its own process (one worker);
   ``--conns`` h2c connections (default 10,000) each send the preface and
   SETTINGS, ACK the server's SETTINGS and then stay idle. The server's RSS is
   read before, with all of them open, and once they have all closed; then a
   second wave does the same. Goals: at most 20 KiB of RSS per idle
   connection, and RSS after close within 10 % of the baseline.
2. Soak (``--soak SECONDS``): the load generator (h2, -c16 -m10) runs against
   the server for that long in slices of ``--slice`` seconds; the server's RSS
   after each slice is the series. Goal: flat within 1 MB after the first
   slice (warm-up).

Run::

    python benchmarks/bench_h2_idle_mem.py                 # 10,000 idle connections, 2 waves
    python benchmarks/bench_h2_idle_mem.py --conns 2000 --soak 60 --json out.json
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import sys
import time
from typing import Any

import httpbench

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
SETTINGS_ACK = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"
GOAL_KIB_PER_CONN = 20.0
GOAL_AFTER_CLOSE = 0.10  # of the baseline
GOAL_SOAK_GROWTH = 1 << 20


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def wait_for(cond, timeout: float = 60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def settle(pid: int, seconds: float = 0.5) -> int:
    """RSS once the worker's idle sweep has run (every 50 ms while it has connections)."""
    time.sleep(seconds)
    return rss_kib(pid)


def idle_wave(p: Any, n: int) -> tuple[int, int]:
    """Open n idle h2c connections; (RSS KiB with them open, RSS KiB after they closed)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", p.port), timeout=20)
            s.sendall(PREFACE + SETTINGS)
            socks.append(s)
        for s in socks:  # the server's SETTINGS (and the ACK of ours): then ours back
            got = b""
            while len(got) < 18:
                chunk = s.recv(4096)
                if not chunk:
                    raise RuntimeError("the server closed an idle connection")
                got += chunk
            s.sendall(SETTINGS_ACK)
        if not wait_for(lambda: p.stats()["connections_active"] == n):
            raise RuntimeError(f"{p.stats()['connections_active']} of {n} connections open")
        peak = settle(p.pid)
    finally:
        for s in socks:
            s.close()
    if not wait_for(lambda: p.stats()["connections_active"] == 0):
        raise RuntimeError("connections did not close")
    return peak, settle(p.pid)


def soak(p: Any, seconds: float, slice_s: float) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{p.port}/bytes/150"
    series = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        r = httpbench.bench(url, duration=slice_s, concurrency=16, streams=10, http2=True)
        wait_for(lambda: p.stats()["connections_active"] == 0)  # idle: comparable slices
        series.append({"t": round(time.monotonic() - t0, 1), "rss_kib": settle(p.pid, 0.3),
                       "responses": r.responses, "rps": round(r.rps)})
        print(f"  soak t={series[-1]['t']:7.1f} s  RSS {series[-1]['rss_kib']} KiB  "
              f"{series[-1]['rps']:,} req/s", flush=True)
    return series


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--conns", type=int, default=10_000)
    ap.add_argument("--waves", type=int, default=2)
    ap.add_argument("--soak", type=float, default=0.0, help="soak seconds (0: none)")
    ap.add_argument("--slice", type=float, default=10.0, help="soak slice seconds")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = a.conns + 256
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            sys.exit(f"RLIMIT_NOFILE hard limit {hard} < {need}: lower --conns")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    out: dict[str, Any] = {"conns": a.conns, "waves": []}
    with httpbench.start_process(threads=1) as p:
        base = settle(p.pid)
        out["baseline_kib"] = base
        print(f"server RSS baseline {base} KiB")
        for w in range(a.waves):
            peak, after = idle_wave(p, a.conns)
            per = (peak - base) * 1024 / a.conns / 1024
            out["waves"].append({"peak_kib": peak, "after_kib": after, "kib_per_conn": per})
            print(f"wave {w + 1}: {a.conns} idle h2c connections {peak} KiB "
                  f"({per:.1f} KiB each; goal <= {GOAL_KIB_PER_CONN}), after close {after} KiB "
                  f"({(after - base) / base:+.1%} of baseline; goal within "
                  f"{GOAL_AFTER_CLOSE:.0%})")
        if a.soak:
            out["soak"] = soak(p, a.soak, a.slice)
            s = out["soak"]
            if len(s) > 1:
                rest = [x["rss_kib"] for x in s[1:]]
                growth = (max(rest) - min(rest)) * 1024
                out["soak_growth_bytes"] = growth
                print(f"soak: RSS after warm-up {min(rest)}..{max(rest)} KiB "
                      f"(spread {growth / 1024:.0f} KiB; goal < {GOAL_SOAK_GROWTH >> 10} KiB)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
