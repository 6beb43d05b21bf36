"""The embedded server gives memory back: idle HTTP/2 connections cost a few
pages each (the output queue is taken only while there is output), RSS
returns to its baseline once they close, wave after wave, and an h2 soak's
RSS stays flat after warm-up."""

from __future__ import annotations

import os
import socket
import sys
import time

import httpbench
import pytest
from _raw import open_files

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
from bench_h2_idle_mem import idle_wave, settle  # noqa: E402


@pytest.mark.slow
@pytest.mark.h2_server
def test_idle_h2_connections_cost_little_and_are_given_back():
    n = 3000
    with open_files(n + 256):
        with httpbench.start_process(threads=1) as p:
            base = settle(p.pid)
            for _ in range(2):  # a second wave must not pile onto the first
                peak, after = idle_wave(p, n)
                assert p.stats()["connections_by_protocol"]["h2"] >= n
                per_conn_kib = (peak - base) / n
                print(f"server RSS KiB: baseline {base}, {n} idle h2c {peak} "
                      f"({per_conn_kib:.1f} each), after close {after}")
                assert per_conn_kib <= 20.5, (base, peak)  # 20.0 measured at 10,000
                assert after - base <= base * 0.10, (base, peak, after)


@pytest.mark.slow
@pytest.mark.h2_server
def test_h2_soak_rss_is_flat_after_warm_up():
    with httpbench.start_process(threads=1) as p:
        url = f"http://127.0.0.1:{p.port}/bytes/150"
        series = []
        for _ in range(6):
            r = httpbench.bench(url, duration=2, concurrency=16, streams=10, http2=True)
            assert r.errors == 0 and r.responses > 0
            # measured idle (the worker gives pooled memory back then), so slices compare
            deadline = time.monotonic() + 10
            while p.stats()["connections_active"] and time.monotonic() < deadline:
                time.sleep(0.02)
            series.append(settle(p.pid, 0.3))
        print(f"server RSS KiB after each 2 s slice: {series}")
    rest = series[1:]
    assert max(rest) - min(rest) < 1024, series


@pytest.mark.slow
@pytest.mark.h2_server
def test_output_arenas_are_returned_when_a_busy_worker_goes_idle():
    """Many h2 connections with output at once take many arenas; once all have
    closed the worker unmaps them (and its pooled connection structs)."""
    with httpbench.start_process(threads=1) as p:
        base = settle(p.pid)
        url = f"http://127.0.0.1:{p.port}/bytes/200000"
        r = httpbench.bench(url, n=2000, concurrency=100, streams=4, http2=True, timeout=60)
        assert r.errors == 0, r.error_counts
        deadline = time.monotonic() + 10
        while p.stats()["connections_active"] and time.monotonic() < deadline:
            time.sleep(0.02)
        after = settle(p.pid)
        print(f"server RSS KiB: baseline {base}, after 100 busy h2 connections closed {after}")
        assert after - base <= base * 0.10, (base, after)
        # and it still serves
        with socket.create_connection(("127.0.0.1", p.port), timeout=5) as s:
            s.sendall(b"GET /bytes/3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200 ")
