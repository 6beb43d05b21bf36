#!/usr/bin/env python3
"""Embedded server memory under idle HTTP/3 connections.

The server runs in its own process (one worker, TLS + HTTP/3). ``--conns``
QUIC connections (default 500; aioquic's sans-I/O client, one UDP socket
each) complete their handshake, make one GET /bytes/10 each and then stay
idle. The server's RSS is read before, with all of them open, and once they
have all closed (CONNECTION_CLOSE from each); ``--waves`` repeats that.
Goals: at most 32 KiB of RSS per idle connection, and RSS after close within
10 % of the baseline.

Run::

    python benchmarks/bench_h3_idle_mem.py                 # 500 idle connections, 2 waves
    python benchmarks/bench_h3_idle_mem.py --conns 200 --json out.json
"""

from __future__ import annotations

import argparse
import json
import socket
import ssl
import sys
import time
from typing import Any

import httpbench

GOAL_KIB_PER_CONN = 32.0
GOAL_AFTER_CLOSE = 0.10  # of the baseline
HOST = "127.0.0.1"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def wait_for(cond: Any, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return bool(cond())


class _Idle:
    """One QUIC connection that makes one request and then stays idle."""

    def __init__(self, port: int) -> None:
        from aioquic.h3.connection import H3_ALPN, H3Connection
        from aioquic.quic.configuration import QuicConfiguration
        from aioquic.quic.connection import QuicConnection

        cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost",
                                idle_timeout=300.0)
        cfg.verify_mode = ssl.CERT_NONE
        self.addr = (HOST, port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((HOST, 0))
        self.sock.setblocking(False)
        self.q = QuicConnection(configuration=cfg)
        self.q.connect(self.addr, now=time.monotonic())
        self._h3cls = H3Connection
        self.h3: Any = None
        self.done = False

    def flush(self) -> None:
        for d, _ in self.q.datagrams_to_send(now=time.monotonic()):
            self.sock.sendto(d, self.addr)

    def poll(self) -> None:
        from aioquic.h3.events import DataReceived, HeadersReceived

        while True:
            try:
                d, _ = self.sock.recvfrom(65536)
            except BlockingIOError:
                break
            self.q.receive_datagram(d, self.addr, now=time.monotonic())
        t = self.q.get_timer()
        if t is not None and t <= time.monotonic():
            self.q.handle_timer(now=time.monotonic())
        while (e := self.q.next_event()) is not None:
            if self.h3 is None and self.q._handshake_complete:
                self.h3 = self._h3cls(self.q)
                sid = self.q.get_next_available_stream_id()
                self.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                           (b":authority", b"localhost"),
                                           (b":path", b"/bytes/10")], end_stream=True)
            if self.h3 is not None:
                for he in self.h3.handle_event(e):
                    if isinstance(he, (HeadersReceived, DataReceived)) and he.stream_ended:
                        self.done = True
        self.flush()

    def close(self) -> None:
        try:
            self.q.close()
            self.flush()
        finally:
            self.sock.close()


def _pump(peers: list[_Idle], seconds: float, until: Any = None) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for p in peers:
            p.poll()
        if until is not None and until():
            return
        time.sleep(0.002)


def idle_wave(p: Any, n: int, batch: int = 25) -> tuple[int, int, list[Any]]:
    """Open n idle h3 connections (each answered one GET); (RSS KiB with them open,
    RSS KiB after they closed, [stats with them open, stats after])."""
    peers: list[_Idle] = []
    try:
        for i in range(0, n, batch):
            group = [_Idle(p.h3_port) for _ in range(min(batch, n - i))]
            for q in group:
                q.flush()
            peers += group
            _pump(group, 10.0, until=lambda g=group: all(q.done for q in g))
            if not all(q.done for q in group):
                raise RuntimeError(f"{sum(not q.done for q in group)} of a group unanswered")
        _pump(peers, 0.3)  # the last ACKs both ways: then nothing moves
        st_open = p.stats()
        peak = settle(p.pid)
    finally:
        for q in peers:
            q.close()
    closed0 = st_open["h3"]["connections_closed"]
    if not wait_for(lambda: p.stats()["h3"]["connections_closed"] >= closed0 + n):
        raise RuntimeError("connections did not close")
    return peak, settle(p.pid), [st_open, p.stats()]


def settle(pid: int, seconds: float = 0.5) -> int:
    time.sleep(seconds)
    return rss_kib(pid)


def warm(p: Any) -> None:
    """One connection opened and closed: the libraries' one-time state is in the baseline."""
    idle_wave(p, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--conns", type=int, default=500)
    ap.add_argument("--waves", type=int, default=2)
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    out: dict[str, Any] = {"conns": a.conns, "waves": []}
    with httpbench.start_process(tls=True, h3=True, threads=1) as p:
        warm(p)
        base = settle(p.pid)
        out["baseline_kib"] = base
        print(f"server RSS baseline {base} KiB")
        for w in range(a.waves):
            peak, after, _ = idle_wave(p, a.conns)
            per = (peak - base) / a.conns
            out["waves"].append({"peak_kib": peak, "after_kib": after, "kib_per_conn": per})
            print(f"wave {w + 1}: {a.conns} idle h3 connections {peak} KiB "
                  f"({per:.1f} KiB each; goal <= {GOAL_KIB_PER_CONN}), after close {after} KiB "
                  f"({(after - base) / base:+.1%} of baseline; goal within "
                  f"{GOAL_AFTER_CLOSE:.0%})", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    ok = all(w["kib_per_conn"] <= GOAL_KIB_PER_CONN and
             w["after_kib"] - base <= base * GOAL_AFTER_CLOSE for w in out["waves"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
