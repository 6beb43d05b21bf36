#!/usr/bin/env python3
"""Embedded server memory under idle HTTP/3 connections.

The server runs in its own process (one worker, TLS + HTTP/3). ``--conns``
QUIC connections (default 500; aioquic's sans-I/O client, one UDP socket
each) complete their handshake, make one GET /bytes/10 each and then stay
idle. The server's RSS is read before, with all of them open, and once they
have all closed (CONNECTION_CLOSE from each); ``--waves`` repeats that.
Goals: at most 32 KiB of RSS per idle connection, and RSS after close within
10 % of the baseline.

``--attribute`` runs the server with ``HB_H3_MEMSTAT`` (the HTTP/3 server's
allocator counts ngtcp2's live blocks by requested size and reports them, with
their resident pages, when a wave's connections start to close) and prints
where an idle connection's bytes are: ngtcp2's blocks (labelled by their sizes
in ngtcp2 0.12 on x86-64), the rest of malloc's heap (GnuTLS's packet
protection contexts, the connection's own struct, the CID table) and what the
endpoint keeps for later (free blocks, cached mappings, free stream slots).

Run::

    python benchmarks/bench_h3_idle_mem.py                 # 500 idle connections, 2 waves
    python benchmarks/bench_h3_idle_mem.py --conns 200 --json out.json
    python benchmarks/bench_h3_idle_mem.py --conns 200 --waves 1 --attribute
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import ssl
import sys
import tempfile
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


# ngtcp2 0.12's allocations of an idle server connection, by requested size (x86-64)
NGTCP2_SIZES = {
    8352: "ngtcp2_conn",
    4248: "key-sorted list arena, 8-byte keys (sent packets, ACK ranges, CRYPTO to send)",
    8216: "key-sorted list arena, range keys (gaps: packet numbers, stream IDs, CID seq)",
    12184: "key-sorted list arena, CID keys (our connection IDs)",
    11288: "stream objects arena (64)",
    7192: "frame chain / sent packet entry arenas (64 each)",
    2048: "decrypt buffer",
    1048: "ACK tracker entries arena (32)",
    512: "ACK ring (32)",
    384: "stream map buckets",
    344: "peer's transport parameters",
    256: "header protection scratch",
    216: "ACK frame scratch",
    168: "CUBIC state",
    124: "packet protection keys (secret + IV)",
    64: "our connection IDs",
    32: "retired CID queue",
}


def read_memstat(path: str) -> list[dict[str, Any]]:
    """The HB_H3_MEMSTAT reports in the file, in order."""
    reports: list[dict[str, Any]] = []
    cur: dict[str, Any] = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "memstat" or w[0] == "pool_free_blocks":
                cur.update({w[i]: int(w[i + 1]) for i in range(1 - (w[0] != "memstat"),
                                                                 len(w) - 1, 2)
                            if w[i + 1].isdigit()})
                cur.setdefault("sizes", {})
            elif w[0] == "size":
                cur["sizes"][int(w[1])] = {"kind": w[2], "live": int(w[4]),
                                           "held": int(w[8]), "resident": int(w[10])}
            elif w[0] == "end":
                reports.append(cur)
                cur = {}
    return reports


def attribution(warm_r: dict[str, Any], peak: dict[str, Any]) -> list[tuple[str, float, str]]:
    """(component, bytes per idle connection, how measured), from the warm-up's report
    (one connection) and a wave's (all of them open)."""
    n = peak["conns"] - warm_r["conns"]
    rows: list[tuple[str, float, str]] = []
    ng_heap = 0.0
    for size in sorted(set(peak["sizes"]) | set(warm_r["sizes"]), reverse=True):
        a, b = warm_r["sizes"].get(size), peak["sizes"].get(size)
        res = ((b["resident"] if b else 0) - (a["resident"] if a else 0)) / n
        live = ((b["live"] if b else 0) - (a["live"] if a else 0)) / n
        if abs(res) < 8:
            continue
        kind = (b or a)["kind"]
        if kind != "pages":
            ng_heap += res
        rows.append((f"ngtcp2 {size} B x{live:.2f}: {NGTCP2_SIZES.get(size, '?')}", res,
                     "pages: mincore" if kind == "pages" else f"{kind}: block bytes"))
    heap = (peak["malloc_inuse"] - warm_r["malloc_inuse"]) / n
    pool = (peak["pool_free_blocks"] - warm_r["pool_free_blocks"]) / n
    cid = (peak["cid_table"] - warm_r["cid_table"]) / n
    rows.append((f"our connection struct (h3conn, {peak['h3conn']} B)", peak["h3conn"],
                 "sizeof"))
    rows.append(("CID table (endpoint, grows with connections)", cid, "table bytes"))
    rows.append(("other malloc: GnuTLS AEAD/HP contexts, malloc overhead", heap - ng_heap - pool
                 - cid - peak["h3conn"], "mallinfo2 in-use delta minus the rows above"))
    rows.append(("endpoint: allocator's free blocks", pool, "block bytes"))
    rows.append(("endpoint: cached mappings", (peak["cached_resident"]
                                               - warm_r["cached_resident"]) / n, "mincore"))
    rows.append(("endpoint: free stream slots", (peak["free_slots_resident"]
                                                 + peak["free_hbuf_resident"]
                                                 - warm_r["free_slots_resident"]
                                                 - warm_r["free_hbuf_resident"]) / n, "mincore"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--conns", type=int, default=500)
    ap.add_argument("--waves", type=int, default=2)
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--attribute", action="store_true",
                    help="print where an idle connection's bytes are (HB_H3_MEMSTAT)")
    a = ap.parse_args()
    out: dict[str, Any] = {"conns": a.conns, "waves": []}
    stat = None
    if a.attribute:
        fd, stat = tempfile.mkstemp(prefix="h3memstat")
        os.close(fd)
        os.environ["HB_H3_MEMSTAT"] = stat
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
            if stat:
                reps = read_memstat(stat)
                peaks = [r for r in reps if r["conns"] == a.conns]
                if reps and peaks:
                    rows = attribution(reps[0], peaks[-1])
                    total = sum(r[1] for r in rows)
                    print(f"  where an idle connection's bytes are ({total / 1024:.1f} KiB "
                          f"accounted of {per:.1f} KiB RSS):")
                    for name, b, how in rows:
                        print(f"  {b:>8.0f}  {name}  [{how}]")
                    out["waves"][-1]["attribution"] = [
                        {"component": r[0], "bytes": round(r[1]), "how": r[2]} for r in rows]
    if stat:
        os.unlink(stat)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    ok = all(w["kib_per_conn"] <= GOAL_KIB_PER_CONN and
             w["after_kib"] - base <= base * GOAL_AFTER_CLOSE for w in out["waves"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
