"""CPU per request of the embedded HTTP/3 server (C: ngtcp2 + nghttp3 + GnuTLS) against
the aioquic listener it replaced and against the HTTP/3 clients it serves, in one run;
and the same client over HTTP/1.1, h2 and h3 to the same C server.

The server must never be the limit of a sequential client measurement: its CPU per
request has to stay well below the cheapest client's. Each client makes ``N``
sequential GETs of ``--path`` on one connection (after a warm-up); the client's figure
is this process's CPU (``time.process_time_ns``), a server's is its own CPU delta (the
C server's workers' ``cpu_ns``; the aioquic listener's thread), both divided by ``N``.
Both servers run in their own process. ``--cpu K`` pins this process and the server
process to CPU K (the same-CPU placement compare uses for sequential scenarios).

    python benchmarks/bench_h3server.py [N] [--path /bytes/150] [--cpu K] [--repeat R] [--json F]

Goal (benchmarks/goals.py): the C server's CPU/request <= 0.5x the cheapest h3 client's.
With ``--json`` the rows go to benchmarks/run.py: case "h3 sequential GET" (contenders
``c-server`` and ``aioquic-server``, each serving pycurl, and ``client <name>`` against the
C server) and case "pycurl by protocol" (``c-server <proto>`` and ``client pycurl <proto>``).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from _peers import write_rows
from httpbench._server import start_process

HERE = os.path.dirname(os.path.abspath(__file__))


def pycurl_client(url: str, ca: str, version: str = "CURL_HTTP_VERSION_3ONLY"):  # noqa: ANN201
    import pycurl

    if version.endswith("3ONLY") and not pycurl.version_info()[4] & pycurl.VERSION_HTTP3:
        return None
    c = pycurl.Curl()
    c.setopt(pycurl.HTTP_VERSION, getattr(pycurl, version))
    c.setopt(pycurl.CAINFO, ca)
    c.setopt(pycurl.URL, url)
    b = io.BytesIO()
    c.setopt(pycurl.WRITEDATA, b)

    def one() -> int:
        b.seek(0)
        b.truncate()
        c.perform()
        return len(b.getvalue())

    return one


def curl_cffi_client(url: str, ca: str, version: str = "V3ONLY"):  # noqa: ANN201
    from curl_cffi import CurlHttpVersion, requests

    s = requests.Session(http_version=getattr(CurlHttpVersion, version), verify=ca)

    def one() -> int:
        return len(s.get(url).content)

    return one


def aioquic_client(url: str, ca: str):  # noqa: ANN201
    from httpbench._adapters.aioquic_ import AioquicAdapter

    base, path = url.rsplit("/bytes", 1)
    a = AioquicAdapter()
    loop = asyncio.new_event_loop()
    loop.run_until_complete(a.asetup(base, ca, path="/bytes" + path, http3=True))

    def one() -> int:
        loop.run_until_complete(a.request())
        return len(a.last_body or b"")

    return one


def niquests_client(url: str, ca: str):  # noqa: ANN201
    from httpbench._adapters.niquests_ import NiquestsAdapter

    base, path = url.rsplit("/bytes", 1)
    a = NiquestsAdapter()
    a.setup(base, ca, path="/bytes" + path, http3=True)

    def one() -> int:
        a.request()
        return len(a.last_body or b"")

    return one


CLIENTS = {"pycurl": pycurl_client, "curl_cffi": curl_cffi_client, "aioquic": aioquic_client,
           "niquests": niquests_client}
# the same client over TCP to the same C server process, for contrast
TCP = {"pycurl": {"h2": "CURL_HTTP_VERSION_2TLS", "http/1.1": "CURL_HTTP_VERSION_1_1"}}


class AioquicServer:
    """The aioquic listener (benchmarks/h3_aioquic_server.py) in its own process."""

    def __init__(self, cpu: int | None) -> None:
        self.p = subprocess.Popen([sys.executable, os.path.join(HERE, "h3_aioquic_server.py")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if cpu is not None:
            os.sched_setaffinity(self.p.pid, {cpu})
        info = json.loads(self.p.stdout.readline())
        self.h3_url = f"https://127.0.0.1:{info['port']}"
        self.ca_file = info["ca_file"]

    def counts(self) -> tuple[int, int]:
        self.p.stdin.write("stats\n")
        self.p.stdin.flush()
        st = json.loads(self.p.stdout.readline())
        return st["requests"], st["cpu_ns"]

    def stop(self) -> None:
        self.p.stdin.write("stop\n")
        self.p.stdin.flush()
        self.p.wait(20)


def run_one(one: Any, n: int, counts: Any) -> dict[str, float]:
    for _ in range(50):
        one()
    r0, s0 = counts()
    c0, w0 = time.process_time_ns(), time.perf_counter_ns()
    got = sum(one() for _ in range(n))
    c1, w1 = time.process_time_ns(), time.perf_counter_ns()
    r1, s1 = counts()
    return {"server_requests": r1 - r0, "body_bytes": got,
            "client_cpu_us": (c1 - c0) / n / 1e3, "server_cpu_us": (s1 - s0) / n / 1e3,
            "wall_us": (w1 - w0) / n / 1e3}


def _aioquic_missing() -> bool:
    import importlib.util

    return importlib.util.find_spec("aioquic") is None


def run_py_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-repeat figures as benchmarks/run.py rows (values: one per repeat)."""
    out: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if "skipped" in r:
            continue
        if r["protocol"] == "h3":
            if r["client"] == "pycurl":
                out.setdefault(("h3 sequential GET", f"{r['server']}-server"), []).append(
                    r["server_cpu_us"])
            if r["server"] == "c":
                out.setdefault(("h3 sequential GET", f"client {r['client']}"), []).append(
                    r["client_cpu_us"])
        if r["server"] == "c" and r["client"] == "pycurl":
            p = r["protocol"]
            out.setdefault(("pycurl by protocol", f"c-server {p}"), []).append(r["server_cpu_us"])
            out.setdefault(("pycurl by protocol", f"client pycurl {p}"), []).append(
                r["client_cpu_us"])
    return [{"case": c, "contender": k, "metric": "CPU/req", "unit": "µs", "values": v}
            for (c, k), v in out.items()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int, nargs="?", default=1000)
    ap.add_argument("--path", default="/bytes/150")
    ap.add_argument("--cpu", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", help="write the rows (benchmarks/run.py format) to this file")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    rows: list[dict[str, Any]] = []
    for rep in range(args.repeat):
        with start_process(tls=True, h3=True, cpu=args.cpu) as srv:
            def c_counts(proto: str, srv: Any = srv) -> Any:
                def f() -> tuple[int, int]:
                    st = srv.stats()
                    return st["by_protocol"][proto], st["cpu_ns"]
                return f

            for name, make in CLIENTS.items():
                try:
                    one = make(srv.h3_url + args.path, srv.ca_file)
                except ImportError as exc:
                    rows.append({"server": "c", "client": name, "skipped": str(exc)})
                    continue
                if one is not None:
                    rows.append({"rep": rep, "server": "c", "client": name, "protocol": "h3",
                                 **run_one(one, args.n, c_counts("h3"))})
            for name, versions in TCP.items():
                for proto, v in versions.items():
                    one = CLIENTS[name](srv.url + args.path, srv.ca_file, v)
                    rows.append({"rep": rep, "server": "c", "client": name, "protocol": proto,
                                 **run_one(one, args.n, c_counts(proto))})
        if _aioquic_missing():
            continue
        aq = AioquicServer(args.cpu)
        try:
            for name, make in CLIENTS.items():
                try:
                    one = make(aq.h3_url + args.path, aq.ca_file)
                except ImportError:
                    continue
                if one is not None:
                    rows.append({"rep": rep, "server": "aioquic", "client": name,
                                 "protocol": "h3", **run_one(one, args.n, aq.counts)})
        finally:
            aq.stop()
    for r in rows:
        print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in r.items()}))
    if args.json:
        write_rows(run_py_rows(rows), [
            f"Sequential GETs of {args.path}, {args.n} per client per repeat, one connection "
            "each; CPU/request of the client's process and of the server's own threads. "
            "aioquic-server: benchmarks/h3_aioquic_server.py, the Python listener the C "
            "server replaced (skipped without aioquic)."], args.json)
    # the verdict: each server's median CPU/request over the cheapest h3 client's
    def med(server: str, client: str, key: str, proto: str = "h3") -> float | None:
        v = [r[key] for r in rows if r.get("server") == server and r.get("client") == client
             and r.get("protocol") == proto]
        return statistics.median(v) if v else None

    h3c = {c: med("c", c, "client_cpu_us") for c in CLIENTS}
    cheapest = min((v, c) for c, v in h3c.items() if v is not None)
    for server in ("c", "aioquic"):
        s = med(server, cheapest[1], "server_cpu_us")
        if s is not None:
            print(f"{server} server: {s:.1f} us CPU/request = {s / cheapest[0]:.2f}x the "
                  f"cheapest h3 client ({cheapest[1]}, {cheapest[0]:.1f} us)")
    for proto in ("http/1.1", "h2", "h3"):
        c, s = med("c", "pycurl", "client_cpu_us", proto), med("c", "pycurl", "server_cpu_us", proto)
        if c is not None and s is not None:
            print(f"pycurl over {proto}: client {c:.1f} us, C server {s:.1f} us CPU/request")


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
