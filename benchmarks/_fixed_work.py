"""A control for bench_compare_cv: a "client" whose call is a fixed piece of
CPU work and no I/O. Its round-to-round CV of CPU per call is the machine's
own (CPU speed drifting, other guests on the host) under the same rounds."""

from __future__ import annotations

import http.client

import httpbench


class FixedWork(httpbench.Adapter):
    """Each call: the same pure-Python loop (~0.1 ms); the body read once at set-up."""

    name = "fixed-work"

    def _setup(self) -> None:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request("GET", self.path)
            r = conn.getresponse()
            self.last_body, self.last_status = r.read(), r.status
        finally:
            conn.close()

    def request(self) -> None:
        x = 0
        for i in range(1500):
            x += i * i
        self.table = {i: x for i in range(64)}

    def close(self) -> None:
        pass
