"""Fixed statements for bench_placement's harness-tax case: the same call timed
through ``compare`` (as a custom adapter) and by a plain loop (``loop_main``).

Each adapter's ``request()`` is one statement of its library, set up once:
a prepared ``requests`` request sent on one Session, ``urllib3.PoolManager.urlopen``
and a reused pycurl handle.
"""

from __future__ import annotations

import gc
import io
import json
import os
import sys
import time

import httpbench


class RequestsSend(httpbench.Adapter):
    """``Session.send(prepared)``: requests without re-preparing the request."""

    name = "requests-send"

    def _setup(self) -> None:
        import requests

        self.session = requests.Session()
        self.prepared = self.session.prepare_request(requests.Request("GET", self.url))

    def request(self) -> None:
        r = self.session.send(self.prepared)
        self.last_body, self.last_status = r.content, r.status_code

    def close(self) -> None:
        self.session.close()


class Urllib3Open(httpbench.Adapter):
    """``PoolManager.urlopen("GET", url)``."""

    name = "urllib3-urlopen"

    def _setup(self) -> None:
        import urllib3

        self.pm = urllib3.PoolManager()

    def request(self) -> None:
        r = self.pm.urlopen("GET", self.url)
        self.last_body, self.last_status = r.data, r.status

    def close(self) -> None:
        self.pm.clear()


class PycurlReused(httpbench.Adapter):
    """One pycurl handle, ``perform()`` into a reused buffer."""

    name = "pycurl-reused"

    def _setup(self) -> None:
        import pycurl

        self.buf = io.BytesIO()
        self.c = pycurl.Curl()
        self.c.setopt(pycurl.URL, self.url)
        self.c.setopt(pycurl.WRITEDATA, self.buf)
        self._code = pycurl.RESPONSE_CODE

    def request(self) -> None:
        self.buf.seek(0)
        self.buf.truncate()
        self.c.perform()
        self.last_body, self.last_status = self.buf.getvalue(), self.c.getinfo(self._code)

    def close(self) -> None:
        self.c.close()


STATEMENTS = {"requests": RequestsSend, "urllib3": Urllib3Open, "pycurl": PycurlReused}


def loop_main(argv: list[str]) -> int:
    """``python _tax_adapters.py loop|measure CPU URL SECONDS NAME...``: per name, calls
    per second and CPU µs per call of ``request()`` on CPU, in a plain ``for`` loop (gc
    on, as measure() runs) or through ``httpbench.measure()`` directly."""
    mode, cpu, url, secs, names = argv[0], int(argv[1]), argv[2], float(argv[3]), argv[4:]
    os.sched_setaffinity(0, {cpu})
    out = {}
    for name in names:
        a = STATEMENTS[name]()
        a.setup(url, path="/bytes/150")
        for _ in range(200):
            a.request()
        t_end = time.perf_counter() + 0.05
        n = 0
        while time.perf_counter() < t_end:  # size the loop: ~secs of calls
            a.request()
            n += 1
        if mode == "measure":
            m = httpbench.measure(a.request, duration=secs, placement="unpinned")
            out[name] = [m.calls_per_s, m.cpu_ns_per_call / 1e3]
        else:
            k = max(1, int(n * secs / 0.05))
            gc.enable()
            c0, t0 = time.process_time_ns(), time.perf_counter_ns()
            for _ in range(k):
                a.request()
            t1, c1 = time.perf_counter_ns(), time.process_time_ns()
            out[name] = [k / ((t1 - t0) / 1e9), (c1 - c0) / k / 1e3]
        a.close()
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(loop_main(sys.argv[1:]))
