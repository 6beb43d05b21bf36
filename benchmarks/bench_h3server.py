"""CPU per request of the embedded HTTP/3 server (C: ngtcp2 + GnuTLS, our HTTP/3 and QPACK) against
the aioquic listener it replaced and against the HTTP/3 clients it serves, in one run;
and the same client over HTTP/1.1, h2 and h3 to the same C server.

The server must never be the limit of a sequential client measurement: its CPU per
request has to stay well below the cheapest client's. Each client makes ``N``
sequential GETs of ``--path`` on one connection (after a warm-up); the client's figure
is this process's CPU (``time.process_time_ns``), a server's is its own CPU delta (the
C server's workers' ``cpu_ns``; the aioquic listener's thread), both divided by ``N``.
Both servers run in their own process. ``--cpu K`` pins this process and the server
process to CPU K (the same-CPU placement compare uses for sequential scenarios).

The floor, in the same run and placement: benchmarks/floor_exchange.c (built on the fly)
does only the kernel part of the exchange. Over UDP it repeats the h3 server's datagram
pattern with pycurl (a request datagram and the client's ACK-only one read with
epoll_wait + recvmmsg, one 264-byte reply sent with sendmsg: 2 in, 1 out), over TCP one
read and one writev of a fixed response (no TLS). The
C server's CPU/request minus the UDP floor's is what QUIC + HTTP/3 cost in user space
and in the crypto; it is the part the server's code can change.

Two controls, because the floor's client is a few hundred bytes of C while pycurl runs
~24 us of its own code per request on the same CPU, leaving the server cold caches that
the floor never sees: the same C server driven by httpbench's generator (``-c1``, a small
working set; 200 then 200 + N requests, handshakes cancelled; its server figure only), and the UDP floor under a
client that writes through a buffer between exchanges, its size the one (of 128 KiB to
2 MiB) whose floor-client CPU/request is nearest pycurl's in the same repeat.

``--callgrind N1,N2`` also serves under valgrind's callgrind (``httpbench serve --tls
--h3``), drives it with ``httpbench URL --h3 -n N1`` and then ``-n N2`` (a new connection
each, counters zeroed before and dumped after each run) and reports the server process's
instructions per request, (Ir(N2) - Ir(N1)) / (N2 - N1): exact, with the handshake
cancelled out.

    python benchmarks/bench_h3server.py [N] [--path /bytes/150] [--cpu K] [--repeat R]
        [--callgrind N1,N2] [--json F]

Goals (benchmarks/goals.py): the C server's CPU/request <= 2.5x the UDP floor's, and,
informational, <= 0.5x the cheapest h3 client's. With ``--json`` the rows go to
benchmarks/run.py: case "h3 sequential GET" (contenders ``c-server`` and
``aioquic-server``, each serving pycurl, ``client <name>`` against the C server,
``udp-floor`` and ``quic+h3 work`` = c-server - udp-floor; the controls ``c-server
(httpbench client)`` and ``udp-floor (client footprint)``), case "pycurl by protocol"
(``c-server <proto>``, ``client pycurl <proto>``, ``floor udp`` / ``floor tcp``) and case
"h3 server instructions" (``c-server``, Ir/req).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from _peers import build_floor, write_rows
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


class FloorExchange:
    """benchmarks/floor_exchange.c serving UDP and TCP on free ports, pinned like the server."""

    def __init__(self, exe: str, cpu: int | None) -> None:
        self.exe, self.cpu = exe, cpu
        self.p = subprocess.Popen([exe, "serve"], stdout=subprocess.PIPE, text=True)
        if cpu is not None:
            os.sched_setaffinity(self.p.pid, {cpu})
        self.udp, self.tcp = map(int, self.p.stdout.readline().split())

    def run(self, proto: str, n: int, touch_kib: int = 0) -> dict[str, float]:
        """n sequential exchanges (after 50 warm-up ones) by the floor's own client, which
        writes through touch_kib KiB of its own memory between exchanges."""
        port = self.udp if proto == "udp" else self.tcp
        pin = (lambda: os.sched_setaffinity(0, {self.cpu})) if self.cpu is not None else None
        p = subprocess.run([self.exe, "drive", proto, str(port), str(self.udp), str(n),
                            str(touch_kib)],
                           capture_output=True, text=True, timeout=120, preexec_fn=pin)
        if p.returncode != 0:
            raise RuntimeError(f"floor_exchange drive {proto} failed: {p.stderr.strip()}")
        d = json.loads(p.stdout)
        if d["requests"] != n:
            raise RuntimeError(f"floor_exchange: {d['requests']} exchanges served of {n}")
        return {"server_requests": d["requests"], "server_cpu_us": d["server_cpu_ns"] / n / 1e3,
                "client_cpu_us": d["client_cpu_ns"] / n / 1e3}

    def footprint(self, n: int, client_cpu_us: float) -> dict[str, float]:
        """The UDP floor under a client as busy as a real one: the touch size (of a few
        tried) whose floor-client CPU/request is nearest client_cpu_us, then n exchanges."""
        tried = {k: self.run("udp", 300, k)["client_cpu_us"] for k in TOUCH_KIB}
        k = min(tried, key=lambda t: abs(math.log(tried[t] / client_cpu_us)))
        return {"touch_kib": k, **self.run("udp", n, k)}

    def stop(self) -> None:
        self.p.terminate()
        self.p.wait(10)


# client working sets tried for the floor's footprint control (KiB written per exchange)
TOUCH_KIB = (128, 256, 512, 1024, 2048)


def generator_run(url: str, ca: str, n: int, counts: Any) -> dict[str, float]:
    """The C server driven by httpbench's own generator (-c1, one connection, in this
    process, on its placement): 200 requests, then 200 + n; the differences cancel the
    handshakes. A client with a small working set, for contrast with pycurl's."""
    import httpbench

    got = []
    for k in (50, 200, 200 + n):  # the first run only warms up
        r0, s0 = counts()
        r = httpbench.bench(url, n=k, http3=True, ca_file=ca, timeout=30)
        r1, s1 = counts()
        if r.successes != k or r.errors:
            raise RuntimeError(f"httpbench generator: {r.successes} of {k}, {r.error_counts}")
        got.append((r1 - r0, s1 - s0))
    (ra, sa), (rb, sb) = got[1:]
    return {"server_requests": rb - ra, "server_cpu_us": (sb - sa) / n / 1e3}


def callgrind_ir(n1: int, n2: int, path: str) -> dict[str, Any]:
    """The C h3 server's instructions per request under callgrind (see the module doc)."""
    import re
    import shutil

    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        return {"skipped": "valgrind (callgrind) is not installed"}
    cli = [sys.executable, "-m", "httpbench"]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        srv = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                                *cli, "serve", "--tls", "--h3", "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            url = None
            for line in srv.stdout:  # valgrind slows start-up: the URL line says it is up
                m = re.search(r"HTTP/3 on UDP port \d+: (https://\S+)", line)
                if m:
                    url = m.group(1)
                    break
            if url is None:
                raise RuntimeError("the server under callgrind did not start")

            def ctl(cmd: str) -> None:
                subprocess.run(["callgrind_control", cmd, str(srv.pid)], check=True,
                               capture_output=True, timeout=60)

            irs = []
            for k, n in enumerate((n1, n2)):
                ctl("-z")
                p = subprocess.run([*cli, url + path, "--h3", "-n", str(n), "-c", "1",
                                    "--insecure"], capture_output=True, text=True, timeout=600)
                if p.returncode != 0 or not re.search(rf"Complete requests:\s+{n}\b", p.stdout):
                    raise RuntimeError(f"httpbench --h3 -n {n} failed: {p.stderr.strip()}")
                ctl("-d")
                with open(f"{out}.{k + 1}") as f:
                    irs.append(int(re.search(r"^summary: (\d+)", f.read(), re.M).group(1)))
        finally:
            srv.terminate()
            srv.wait(60)
    return {"n1": n1, "n2": n2, "ir_per_req": (irs[1] - irs[0]) / (n2 - n1)}


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
        if "skipped" in r or "protocol" not in r:
            continue
        if r["protocol"] == "h3" and r["client"] == "httpbench":
            out.setdefault(("h3 sequential GET", "c-server (httpbench client)"), []).append(
                r["server_cpu_us"])
            continue
        if r["protocol"] == "udp-footprint":
            out.setdefault(("h3 sequential GET", "udp-floor (client footprint)"), []).append(
                r["server_cpu_us"])
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
        if r["server"] == "floor":
            p = r["protocol"]
            out.setdefault(("pycurl by protocol", f"floor {p}"), []).append(r["server_cpu_us"])
            if p == "udp":
                out.setdefault(("h3 sequential GET", "udp-floor"), []).append(r["server_cpu_us"])
                c = [x for x in rows if x.get("rep") == r["rep"] and x.get("server") == "c"
                     and x.get("client") == "pycurl" and x.get("protocol") == "h3"]
                if c:
                    out.setdefault(("h3 sequential GET", "quic+h3 work"), []).append(
                        c[0]["server_cpu_us"] - r["server_cpu_us"])
    res = [{"case": c, "contender": k, "metric": "CPU/req", "unit": "µs", "values": v}
           for (c, k), v in out.items()]
    ir = [r["ir_per_req"] for r in rows if r.get("server") == "callgrind" and "ir_per_req" in r]
    if ir:
        res.append({"case": "h3 server instructions", "contender": "c-server",
                    "metric": "Ir/req", "unit": "instr", "values": ir})
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int, nargs="?", default=1000)
    ap.add_argument("--path", default="/bytes/150")
    ap.add_argument("--cpu", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--callgrind", metavar="N1,N2",
                    help="also count the server's instructions per request under callgrind")
    ap.add_argument("--json", help="write the rows (benchmarks/run.py format) to this file")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    rows: list[dict[str, Any]] = []
    tmp = tempfile.mkdtemp(prefix="h3floor-")
    exe = build_floor(os.path.join(HERE, "floor_exchange.c"), tmp)
    floor = FloorExchange(exe, args.cpu) if exe else None
    try:
        measure(args, rows, floor)
    finally:
        if floor is not None:
            floor.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.callgrind:
        n1, n2 = map(int, args.callgrind.split(","))
        rows.append({"server": "callgrind", **callgrind_ir(n1, n2, args.path)})
    report(args, rows)


def measure(args: argparse.Namespace, rows: list[dict[str, Any]],
            floor: FloorExchange | None) -> None:
    """The repeats: the C server with every client, the floor, then the aioquic listener."""
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
            rows.append({"rep": rep, "server": "c", "client": "httpbench", "protocol": "h3",
                         **generator_run(srv.h3_url + args.path, srv.ca_file, args.n,
                                         c_counts("h3"))})
            for name, versions in TCP.items():
                for proto, v in versions.items():
                    one = CLIENTS[name](srv.url + args.path, srv.ca_file, v)
                    rows.append({"rep": rep, "server": "c", "client": name, "protocol": proto,
                                 **run_one(one, args.n, c_counts(proto))})
        if floor is not None:
            for proto in ("udp", "tcp"):
                rows.append({"rep": rep, "server": "floor", "client": "floor",
                             "protocol": proto, **floor.run(proto, args.n)})
            pc = [r["client_cpu_us"] for r in rows if r.get("rep") == rep
                  and r.get("client") == "pycurl" and r.get("protocol") == "h3"]
            if pc:
                rows.append({"rep": rep, "server": "floor", "client": "floor",
                             "protocol": "udp-footprint", **floor.footprint(args.n, pc[0])})
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


def report(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    for r in rows:
        print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in r.items()}))
    if args.json:
        write_rows(run_py_rows(rows), [
            f"Sequential GETs of {args.path}, {args.n} per client per repeat, one connection "
            "each; CPU/request of the client's process and of the server's own threads. "
            "aioquic-server: benchmarks/h3_aioquic_server.py, the Python listener the C "
            "server replaced (skipped without aioquic).",
            "udp-floor / floor udp / floor tcp: benchmarks/floor_exchange.c, the kernel part "
            "of the exchange only (UDP: the h3 server's 2 datagrams in and 1 out per request; "
            "TCP: one read, one writev, no TLS), driven by its own C client on the same "
            "placement; quic+h3 work = c-server - udp-floor, per repeat."], args.json)
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
    s, f = med("c", "pycurl", "server_cpu_us"), med("floor", "floor", "server_cpu_us", "udp")
    p = h3c.get("pycurl")
    if s is not None and f is not None and p is not None:
        print(f"C h3 server {s:.1f} us CPU/request = UDP floor {f:.1f} us + QUIC/HTTP/3 work "
              f"{s - f:.1f} us ({s / f:.2f}x the floor); pycurl {p:.1f} us (floor alone "
              f"{f / p:.2f}x pycurl)")
    g = med("c", "httpbench", "server_cpu_us")
    ff = med("floor", "floor", "server_cpu_us", "udp-footprint")
    if s is not None and f is not None and g is not None and ff is not None:
        ks = sorted({r["touch_kib"] for r in rows if r.get("protocol") == "udp-footprint"})
        print(f"control: the same C h3 server driven by httpbench's generator (a small "
              f"working set) {g:.1f} us CPU/request ({g / f:.2f}x the floor); the UDP floor "
              f"under a client as busy as pycurl (touching {'/'.join(map(str, ks))} KiB per "
              f"exchange) {ff:.1f} us: the server under pycurl {s / ff:.2f}x that floor")
    t = med("floor", "floor", "server_cpu_us", "tcp")
    if t is not None:
        print(f"TCP floor (read + writev, no TLS): {t:.1f} us CPU/request")
    for r in rows:
        if r.get("server") == "callgrind":
            print("callgrind: " + (r["skipped"] if "skipped" in r else
                                   f"C h3 server {r['ir_per_req']:.0f} instructions/request "
                                   f"(n {r['n1']} and {r['n2']})"))


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
