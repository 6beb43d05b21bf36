"""measure()'s CPU figure is the client's: an in-process server's threads are not in it."""

from __future__ import annotations

import http.client

import httpbench
import pytest
from httpbench import _server


def _client_cpu(url: str) -> tuple[float, dict]:
    host, port = url.split("//", 1)[1].rstrip("/").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)

    def get() -> None:
        conn.request("GET", "/bytes/150")
        conn.getresponse().read()

    try:
        r = httpbench.measure(get, n=4000, warmup=200, alloc=False, gc=False)
    finally:
        conn.close()
    return r.cpu_ns_per_call, r.metadata


@pytest.mark.slow
def test_same_client_cpu_in_and_out_of_process():
    with httpbench.Server() as srv:
        inproc, md = _client_cpu(srv.url)
    assert md["in_process_server_cpu_ns"] > 0
    assert md["process_cpu_ns"] >= md["in_process_server_cpu_ns"]
    proc = _server.start_process()
    try:
        outproc, md2 = _client_cpu(proc.url)
    finally:
        proc.stop()
    assert md2.get("in_process_server_cpu_ns", 0) == 0  # the stopped server used none
    ratio = inproc / outproc
    assert 0.6 < ratio < 1.6, (inproc, outproc)
    # the process figure, which is what measure() reported before, includes the server
    process_per_call = md["process_cpu_ns"] / 4000
    assert process_per_call > inproc
    print(f"client {inproc:.0f} / {outproc:.0f} ns per call; process {process_per_call:.0f}")
