#!/usr/bin/env python3
"""httpbench.Client side by side with pycurl, http.client and urllib3.

1. Sequential keep-alive GETs of a 150 B and a 12 KiB body: requests/s and
   process CPU microseconds per request (the server runs in another process,
   so this process's CPU is the client's). The clients are interleaved in
   rounds (native, pycurl, http.client, urllib3, native, ...) so background
   load hits them alike; totals are summed over the rounds.
   Per client also the per-call latency p50/p99 (perf_counter_ns around
   each call, over all rounds), the per-round figures (--json:
   cpu_us_per_req_rounds, req_per_s_rounds) and new_connections: connections
   the server accepted during the client's timed requests (read from the
   server's counters between rounds; 0 = keep-alive held throughout).
2. Sequential keep-alive POSTs of a 300 KB (300 * 1024 B) body streamed from a
   file written once into the temp dir (native Client with a path body -
   sendfile on plain HTTP; pycurl READDATA + POSTFIELDSIZE_LARGE, no
   "Expect: 100-continue"; http.client and urllib3 with the open file and
   Content-Length), same rounds, latency and CPU figures as the GETs; every
   response's status must be 200. Before timing, each client sends 3 POSTs
   that must take exactly one connection; the embedded server's /sink
   answers the byte count and CRC32 of each body, which must match the file.
   nginx (`location = /sink { return 200 "ok"; }`) discards the body, so
   there the check is 200 + keep-alive (a short or long body would break the
   framing of the next request on the connection).
   "floor" (GETs only) is benchmarks/floor_loadgen.c at one connection,
   interleaved with the clients (--floor-seconds per round): a C client that
   does one send() and one recv() per request and nothing else - what the
   kernel's loopback path and the wake-ups of a sequential client cost on
   this machine, the least any client can spend. A CPU goal below
   floor/pycurl is out of reach here.
3. A 30 MB download to disk: httpbench.Client.download vs the curl CLI,
   pycurl (WRITEDATA=file) and http.client (shutil.copyfileobj), interleaved
   (who goes first rotates; sync(2) before each, outside the timing), best
   and median MB/s of the repeats.

Goals (benchmarks/goals.py): native CPU/request <= 0.5x pycurl's (GET and
POST); download MB/s >= 1.2x http.client's. benchmarks/run.py reads the --json
output. Run:

    python benchmarks/bench_client.py                 # embedded server (separate process)
    python benchmarks/bench_client.py --server nginx  # nginx, 1 worker, sendfile on
    python benchmarks/bench_client.py -n 20000 --rounds 5 --json out.json  # 5000 POSTs
    python benchmarks/bench_client.py --tls           # the same over verified HTTPS
"""

from __future__ import annotations

import argparse
import array
import http.client
import io
import json
import math
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import zlib

import httpbench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import (  # noqa: E402
    FLOOR_LOADGEN_SRC,
    build_floor,
    children,
    pin_process,
    run_floor,
)

SIZES = {"150B": 150, "12KiB": 12 * 1024}
DL_SIZE = 30 * 1024 * 1024
POST_SIZE = 300 * 1024


class Server:
    """A target server in another process with base URL and payload paths."""

    def __init__(self, kind: str, tmp: str, tls: bool = False) -> None:
        self.kind = kind
        self.proc = None
        self.handle = None
        self.ca_file = None
        if tls and kind != "embedded":
            raise SystemExit("--tls needs --server embedded")
        if kind == "embedded":
            self.handle = httpbench.start_process(threads=1, tls=tls)
            self.ca_file = self.handle.ca_file
            self.base = self.handle.url.rstrip("/")
            self.paths = {k: f"/bytes/{n}" for k, n in SIZES.items()}
            self.dl_path = f"/bytes/{DL_SIZE}"
            self.sink_path = "/sink"
        elif kind == "nginx":
            nginx = shutil.which("nginx") or "/usr/sbin/nginx"
            www = os.path.join(tmp, "www")
            os.chmod(tmp, 0o755)  # nginx workers run unprivileged
            os.makedirs(www)
            os.makedirs(os.path.join(tmp, "logs"))
            for k, n in SIZES.items():
                with open(os.path.join(www, k), "wb") as f:
                    f.write(os.urandom(n))
            with open(os.path.join(www, "dl"), "wb") as f:
                f.write(os.urandom(DL_SIZE))
            import socket

            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            conf = os.path.join(tmp, "nginx.conf")
            with open(conf, "w") as f:
                f.write(
                    f"worker_processes 1; daemon off; pid {tmp}/nginx.pid;\n"
                    f"error_log {tmp}/logs/e.log;\n"
                    "events { worker_connections 1024; }\n"
                    "http { access_log off; sendfile on; keepalive_requests 10000000;\n"
                    "  keepalive_timeout 300s; client_max_body_size 10m;\n"
                    "  client_body_buffer_size 1m;\n"
                    f"  server {{ listen 127.0.0.1:{port}; root {www};\n"
                    '    location = /sink { return 200 "ok"; }\n'
                    "    location = /nginx_status { stub_status; } } }\n"
                )
            self.proc = subprocess.Popen([nginx, "-c", conf, "-p", tmp])
            self.base = f"http://127.0.0.1:{port}"
            self.paths = {k: f"/{k}" for k in SIZES}
            self.dl_path = "/dl"
            self.sink_path = "/sink"
            deadline = time.monotonic() + 10
            while True:
                try:
                    with httpbench.Client(timeout=1) as c:
                        c.get(self.base + self.paths["150B"])
                    break
                except httpbench.HttpbenchError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        else:
            raise SystemExit(f"unknown server {kind!r}")

    def accepts(self) -> int:
        """Connections the server has accepted so far (not counting our own probe)."""
        if self.handle is not None:
            return int(self.handle.stats()["connections_accepted"])
        conn = http.client.HTTPConnection("127.0.0.1", int(self.base.rsplit(":", 1)[1]),
                                          timeout=5)
        try:
            conn.request("GET", "/nginx_status", headers={"Connection": "close"})
            text = conn.getresponse().read().decode()
        finally:
            conn.close()
        # "Active connections: 1\nserver accepts handled requests\n 5 5 9\n...";
        # the count includes every probe so far, this one too.
        self._probes += 1
        return int(text.splitlines()[2].split()[0]) - self._probes

    _probes = 0

    def pids(self) -> list[int]:
        """The server's processes (nginx: master and workers)."""
        root = self.handle.pid if self.handle is not None else self.proc.pid
        return [root, *children(root)]

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.stop()
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)


# ------------------------------------------------------------------ GET clients
# Each factory returns (get, close): get() performs one GET and returns the body.


def native_factory(url: str, ca: str | None, stale_check: bool = True):
    c = httpbench.Client(timeout=10, stale_check=stale_check, ca_file=ca)
    return (lambda: c.get(url).body), c.close


def native_nostale_factory(url: str, ca: str | None):
    return native_factory(url, ca, stale_check=False)


def pycurl_factory(url: str, ca: str | None):
    import pycurl

    h = pycurl.Curl()
    h.setopt(pycurl.URL, url)
    if ca:
        h.setopt(pycurl.CAINFO, ca)

    def get() -> bytes:
        b = io.BytesIO()
        h.setopt(pycurl.WRITEDATA, b)
        h.perform()
        return b.getvalue()

    return get, h.close


def _http_client_conn(u: urllib.parse.SplitResult, ca: str | None,
                      timeout: float) -> http.client.HTTPConnection:
    """An http.client connection to u's host; HTTPS verified against ca when given."""
    if ca:
        import ssl

        ctx = ssl.create_default_context(cafile=ca)
        return http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout, context=ctx)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)


def _urllib3_pool(u: urllib.parse.SplitResult, ca: str | None):
    """A one-connection urllib3 pool to u's host, no retries; HTTPS verified against ca."""
    import urllib3

    kw = {"maxsize": 1, "retries": False, "timeout": 10}
    if ca:
        return urllib3.HTTPSConnectionPool(u.hostname, u.port, ca_certs=ca, **kw)
    return urllib3.HTTPConnectionPool(u.hostname, u.port, **kw)


def http_client_factory(url: str, ca: str | None):
    u = urllib.parse.urlsplit(url)
    conn = _http_client_conn(u, ca, 10)
    path = u.path

    def get() -> bytes:
        conn.request("GET", path)
        return conn.getresponse().read()

    return get, conn.close


def urllib3_factory(url: str, ca: str | None):
    u = urllib.parse.urlsplit(url)
    pool = _urllib3_pool(u, ca)
    path = u.path

    def get() -> bytes:
        return pool.request("GET", path).data

    return get, pool.close


GET_CLIENTS = {
    "native": native_factory,
    "native (no stale check)": native_nostale_factory,
    "pycurl": pycurl_factory,
    "http.client": http_client_factory,
    "urllib3": urllib3_factory,
}


def _percentile(sorted_ns: list[int], q: float) -> float:
    """Nearest-rank percentile of sorted samples, in microseconds."""
    if not sorted_ns:
        return float("nan")
    k = max(0, min(len(sorted_ns) - 1, math.ceil(q / 100 * len(sorted_ns)) - 1))
    return sorted_ns[k] / 1000


def run_interleaved(clients: dict, n: int, rounds: int, warmup: int,
                    accepts=None, extra: dict | None = None) -> dict:
    """Time ``clients`` ({name: (call, close)}) in interleaved rounds.

    Per client: totals (req/s, process CPU µs/request), the same per round,
    and per-call latency p50/p99 (perf_counter_ns around each call, over all
    rounds). ``accepts()`` (the server's accepted-connection count, read
    outside the timed loops) gives ``new_connections``: connections the client
    opened during its timed requests - 0 when keep-alive held. Every client
    is closed afterwards. ``extra`` ({name: run_round}) are contenders timed
    by themselves (a subprocess): run_round() -> (requests, wall s, CPU s);
    they take their turn in the rotation and get the same figures but latency.
    """
    per_round = max(1, n // rounds)
    state = {}
    for name, (call, close) in clients.items():
        for _ in range(warmup):
            call()
        state[name] = {"call": call, "close": close, "wall": [], "cpu": [],
                       "lat": array.array("q", bytes(8 * per_round * rounds)), "k": 0,
                       "conns": 0}
    extra = extra or {}
    ext = {name: {"n": [], "wall": [], "cpu": []} for name in extra}
    names = list(state) + list(extra)
    pc = time.perf_counter_ns
    for rnd in range(rounds):
        # Rotate who goes first so drifting background load hits all alike.
        for name in names[rnd % len(names):] + names[: rnd % len(names)]:
            if name in extra:
                k, w, c = extra[name]()
                ext[name]["n"].append(k)
                ext[name]["wall"].append(w)
                ext[name]["cpu"].append(c)
                continue
            st = state[name]
            call, lat, k = st["call"], st["lat"], st["k"]
            a0 = accepts() if accepts else 0
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(per_round):
                s0 = pc()
                call()
                lat[k] = pc() - s0
                k += 1
            t1, c1 = time.perf_counter(), time.process_time()
            st["conns"] += (accepts() - a0) if accepts else 0
            st["k"] = k
            st["wall"].append(t1 - t0)
            st["cpu"].append(c1 - c0)
    res = {}
    for name, st in state.items():
        st["close"]()
        count = per_round * rounds
        lat = sorted(st["lat"][: st["k"]])
        res[name] = {
            "requests": count,
            "req_per_s": count / sum(st["wall"]),
            "cpu_us_per_req": sum(st["cpu"]) / count * 1e6,
            "req_per_s_rounds": [per_round / w for w in st["wall"]],
            "cpu_us_per_req_rounds": [c / per_round * 1e6 for c in st["cpu"]],
            "latency_us_p50": _percentile(lat, 50),
            "latency_us_p99": _percentile(lat, 99),
        }
        if accepts:
            res[name]["new_connections"] = st["conns"]
            if st["conns"]:
                print(f"  warning: {name} opened {st['conns']} new connections during its "
                      f"{count} timed requests (keep-alive broken?)", file=sys.stderr)
    for name, e in ext.items():
        res[name] = {
            "requests": sum(e["n"]),
            "req_per_s": sum(e["n"]) / sum(e["wall"]),
            "cpu_us_per_req": sum(e["cpu"]) / sum(e["n"]) * 1e6,
            "req_per_s_rounds": [k / w for k, w in zip(e["n"], e["wall"], strict=True)],
            "cpu_us_per_req_rounds": [c / k * 1e6 for k, c in zip(e["n"], e["cpu"], strict=True)],
        }
    return res


FLOOR_EXE: str | None = None


def floor_round(url: str, seconds: float):
    """A run_interleaved extra: floor_loadgen -c1 for ``seconds`` against url."""
    def run() -> tuple[int, float, float]:
        assert FLOOR_EXE is not None
        r = run_floor(FLOOR_EXE, url, 1, seconds)
        return r["done"], r["duration_s"], r["cpu_s"]
    return run


def bench_gets(server: Server, n: int, rounds: int, warmup: int,
               floor_seconds: float = 0) -> dict:
    out: dict = {}
    for size, path in server.paths.items():
        url = server.base + path
        clients = {}
        for name, factory in GET_CLIENTS.items():
            try:
                get, close = factory(url, server.ca_file)
            except ImportError as e:
                print(f"  skipping {name}: {e}", file=sys.stderr)
                continue
            body = get()
            if len(body) != SIZES[size]:
                raise SystemExit(f"{name}: GET {url} returned {len(body)} bytes, "
                                 f"expected {SIZES[size]}")
            clients[name] = (get, close)
        extra = {}
        if floor_seconds > 0 and FLOOR_EXE:
            extra["floor"] = floor_round(url, floor_seconds)
        out[size] = run_interleaved(clients, n, rounds, warmup, server.accepts, extra)
    return out


# ------------------------------------------------------------------ POST clients
# Each factory gets (url, body file path, size, ca) and returns (post, close):
# post() sends the file as the body of one keep-alive POST and returns
# (status, response body). The file is streamed by every client, never read
# into memory first.


def native_post_factory(url: str, path: str, size: int, ca: str | None):
    c = httpbench.Client(timeout=10, ca_file=ca)
    body = pathlib.Path(path)  # a path body: opened per request, sendfile on plain HTTP

    def post():
        r = c.request("POST", url, body=body)
        return r.status, r.body

    return post, c.close


def pycurl_post_factory(url: str, path: str, size: int, ca: str | None):
    import pycurl

    h = pycurl.Curl()
    h.setopt(pycurl.URL, url)
    h.setopt(pycurl.POST, 1)
    h.setopt(pycurl.POSTFIELDSIZE_LARGE, size)
    # libcurl would send "Expect: 100-continue" and wait for the interim answer.
    h.setopt(pycurl.HTTPHEADER, ["Expect:", "Content-Type: application/octet-stream"])
    if ca:
        h.setopt(pycurl.CAINFO, ca)
    f = open(path, "rb")  # noqa: SIM115 - closed by close()

    def post():
        f.seek(0)
        b = io.BytesIO()
        h.setopt(pycurl.READDATA, f)
        h.setopt(pycurl.WRITEDATA, b)
        h.perform()
        return h.getinfo(pycurl.RESPONSE_CODE), b.getvalue()

    def close():
        h.close()
        f.close()

    return post, close


def http_client_post_factory(url: str, path: str, size: int, ca: str | None):
    u = urllib.parse.urlsplit(url)
    conn = _http_client_conn(u, ca, 10)
    f = open(path, "rb")  # noqa: SIM115 - closed by close()
    hdrs = {"Content-Length": str(size), "Content-Type": "application/octet-stream"}

    def post():
        f.seek(0)
        conn.request("POST", u.path, body=f, headers=hdrs)
        r = conn.getresponse()
        return r.status, r.read()

    def close():
        conn.close()
        f.close()

    return post, close


def urllib3_post_factory(url: str, path: str, size: int, ca: str | None):
    u = urllib.parse.urlsplit(url)
    pool = _urllib3_pool(u, ca)
    f = open(path, "rb")  # noqa: SIM115 - closed by close()
    hdrs = {"Content-Length": str(size), "Content-Type": "application/octet-stream"}

    def post():
        f.seek(0)
        r = pool.request("POST", u.path, body=f, headers=hdrs)
        return r.status, r.data

    def close():
        pool.close()
        f.close()

    return post, close


POST_CLIENTS = {
    "native": native_post_factory,
    "pycurl": pycurl_post_factory,
    "http.client": http_client_post_factory,
    "urllib3": urllib3_post_factory,
}


def bench_posts(server: Server, n: int, rounds: int, warmup: int, tmp: str) -> dict:
    """POST_SIZE bytes from a file to the server's sink, every client checked first."""
    path = os.path.join(tmp, "post-body.bin")
    data = bytes(range(256)) * (POST_SIZE // 256) + bytes(POST_SIZE % 256)
    with open(path, "wb") as f:
        f.write(data)
    want_crc = f"{zlib.crc32(data):08x}"
    url = server.base + server.sink_path
    clients = {}
    for name, factory in POST_CLIENTS.items():
        try:
            post, close = factory(url, path, POST_SIZE, server.ca_file)
        except ImportError as e:
            print(f"  skipping {name}: {e}", file=sys.stderr)
            continue
        a0 = server.accepts()
        for _ in range(3):
            status, body = post()
            if status != 200:
                raise SystemExit(f"{name}: POST {url} answered {status}")
            if server.kind == "embedded":
                got = json.loads(body)
                if got != {"bytes": POST_SIZE, "crc32": want_crc}:
                    raise SystemExit(f"{name}: the sink received {got}, expected {POST_SIZE} "
                                     f"bytes with CRC {want_crc}")
        if server.accepts() - a0 != 1:
            raise SystemExit(f"{name}: 3 POSTs took {server.accepts() - a0} connections, "
                             "expected 1 (keep-alive)")

        def checked(post=post, name=name):
            status, _ = post()
            if status != 200:
                raise SystemExit(f"{name}: POST answered {status}")

        clients[name] = (checked, close)
    label = f"{POST_SIZE // 1024}KB"
    return {label: run_interleaved(clients, n, rounds, warmup, server.accepts)}


def pin(server: Server) -> str:
    """Server (every thread of its processes) on CPU 0, this process - and the
    curl/floor children it starts - on CPU 1: unpinned, the two sometimes
    share a core and a round runs at half speed (downloads read ~350 or
    ~1,500 MB/s by where the scheduler put them)."""
    if (os.cpu_count() or 1) < 2 or not hasattr(os, "sched_setaffinity"):
        return "not pinned (fewer than 2 CPUs)"
    for pid in server.pids():
        pin_process(pid, {0})
    pin_process(os.getpid(), {1})
    return "server on CPU 0, clients on CPU 1"


# ------------------------------------------------------------------ downloads


def dl_native(url: str, path: str, ca: str | None) -> None:
    with httpbench.Client(timeout=60, ca_file=ca) as c:
        r = c.download(url, path)
        assert r.status == 200


def dl_curl(url: str, path: str, ca: str | None) -> None:
    extra = ["--cacert", ca] if ca else []
    subprocess.run(["curl", "-s", "-f", *extra, "-o", path, url], check=True)


def dl_pycurl(url: str, path: str, ca: str | None) -> None:
    import pycurl

    h = pycurl.Curl()
    with open(path, "wb") as f:
        h.setopt(pycurl.URL, url)
        if ca:
            h.setopt(pycurl.CAINFO, ca)
        h.setopt(pycurl.WRITEDATA, f)
        h.perform()
    h.close()


def dl_http_client(url: str, path: str, ca: str | None) -> None:
    u = urllib.parse.urlsplit(url)
    conn = _http_client_conn(u, ca, 60)
    conn.request("GET", u.path)
    r = conn.getresponse()
    with open(path, "wb") as f:
        shutil.copyfileobj(r, f)
    conn.close()


DL_CLIENTS = {"native": dl_native, "curl CLI": dl_curl, "pycurl": dl_pycurl,
              "http.client": dl_http_client}


def bench_download(server: Server, repeats: int, tmp: str) -> dict:
    url = server.base + server.dl_path
    path = os.path.join(tmp, "download.bin")
    times: dict[str, list[float]] = {k: [] for k in DL_CLIENTS}
    names = list(DL_CLIENTS)
    for rep in range(repeats):
        # Rotate who goes first, and start each download with no dirty pages
        # of the previous one still being written back (the one after a 30 MB
        # write otherwise pays for it: native, always first, read 270-1500 MB/s).
        for name in names[rep % len(names):] + names[: rep % len(names)]:
            fn = DL_CLIENTS[name]
            if os.path.exists(path):
                os.unlink(path)
            os.sync()
            t0 = time.perf_counter()
            try:
                fn(url, path, server.ca_file)
            except (ImportError, FileNotFoundError) as e:
                print(f"  skipping {name}: {e}", file=sys.stderr)
                times[name] = []
                continue
            times[name].append(time.perf_counter() - t0)
            assert os.path.getsize(path) == DL_SIZE, name
    mb = DL_SIZE / 1e6
    return {
        name: {"best_MB_per_s": mb / min(ts), "median_MB_per_s": mb / statistics.median(ts),
               "repeats": len(ts), "MB_per_s_repeats": [mb / t for t in ts]}
        for name, ts in times.items() if ts
    }


def print_table(title: str, res: dict) -> None:
    print(f"\n{title}:")
    print(f"  {'client':<26}{'req/s':>10}{'CPU us/req':>12}{'CPU vs pycurl':>15}"
          f"{'p50 us':>9}{'p99 us':>9}")
    ref = res.get("pycurl", {}).get("cpu_us_per_req")
    for name, r in res.items():
        ratio = f"{r['cpu_us_per_req'] / ref:.2f}x" if ref else "-"
        lat = (f"{r['latency_us_p50']:>9.1f}{r['latency_us_p99']:>9.1f}"
               if "latency_us_p50" in r else f"{'-':>9}{'-':>9}")
        print(f"  {name:<26}{r['req_per_s']:>10.0f}{r['cpu_us_per_req']:>12.1f}{ratio:>15}{lat}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", choices=["embedded", "nginx"], default=None,
                    help="target (default: embedded)")
    ap.add_argument("-n", type=int, default=20000, help="GETs per client and size")
    ap.add_argument("--post-n", type=int, default=None,
                    help="300 KB POSTs per client (default: n / 4; 0: skip)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--dl-repeats", type=int, default=9)
    ap.add_argument("--floor-seconds", type=float, default=0.5,
                    help="floor_loadgen -c1 per GET round (0: no floor)")
    ap.add_argument("--skip-download", action="store_true")
    ap.add_argument("--tls", action="store_true", help="HTTPS (embedded server, verified)")
    ap.add_argument("--no-pin", action="store_true",
                    help="do not pin the server to CPU 0 and the clients to CPU 1")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args(argv)
    global FLOOR_EXE
    if a.post_n is None:
        a.post_n = max(1, a.n // 4)
    kind = a.server or "embedded"
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(kind, tmp, tls=a.tls)
        try:
            pinning = "not pinned" if a.no_pin else pin(server)
            print(f"server: {kind} at {server.base}; {a.n} sequential keep-alive GETs per client "
                  f"and size, {a.rounds} interleaved rounds; {pinning}")
            if a.floor_seconds > 0 and kind == "embedded":
                FLOOR_EXE = build_floor(FLOOR_LOADGEN_SRC, tmp, ["-lssl", "-lcrypto"])
            gets = bench_gets(server, a.n, a.rounds, a.warmup, a.floor_seconds)
            for size, res in gets.items():
                print_table(f"GET {size}", res)
            posts = {}
            if a.post_n > 0:
                posts = bench_posts(server, a.post_n, a.rounds, min(a.warmup, a.post_n), tmp)
                for label, res in posts.items():
                    print_table(f"POST {label} from a file ({a.post_n} per client)", res)
            dl = {}
            if not a.skip_download:
                dl = bench_download(server, a.dl_repeats, tmp)
                print(f"\n30 MB download to disk ({a.dl_repeats} interleaved repeats):")
                ref = dl.get("http.client", {}).get("median_MB_per_s")
                print(f"  {'client':<26}{'best MB/s':>10}{'median MB/s':>13}{'vs http.client':>16}")
                for name, r in dl.items():
                    ratio = f"{r['median_MB_per_s'] / ref:.2f}x" if ref else "-"
                    print(f"  {name:<26}{r['best_MB_per_s']:>10.0f}{r['median_MB_per_s']:>13.0f}"
                          f"{ratio:>16}")
        finally:
            server.stop()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"server": kind, "tls": a.tls, "pinning": pinning, "n": a.n,
                       "post_n": a.post_n,
                       "rounds": a.rounds, "get": gets, "post": posts, "download": dl}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
