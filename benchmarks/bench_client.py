#!/usr/bin/env python3
"""httpbench.Client side by side with pycurl, http.client and urllib3.

1. Sequential keep-alive GETs of a 150 B and a 12 KiB body: requests/s and
   process CPU microseconds per request (the server runs in another process,
   so this process's CPU is the client's). The clients are interleaved in
   rounds (native, pycurl, http.client, urllib3, native, ...) so background
   load hits them alike; totals are summed over the rounds.
2. A 30 MB download to disk: httpbench.Client.download vs the curl CLI,
   pycurl (WRITEDATA=file) and http.client (shutil.copyfileobj), interleaved,
   best and median MB/s of the repeats.

Goals (issue 5): native CPU/request <= 0.5x pycurl's; download MB/s >= 1.2x
http.client's. Run:

    python benchmarks/bench_client.py                 # embedded server (separate process)
    python benchmarks/bench_client.py --server nginx  # nginx, 1 worker, sendfile on
    python benchmarks/bench_client.py -n 20000 --rounds 5 --json out.json
    python benchmarks/bench_client.py --tls           # the same over verified HTTPS
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

import httpbench

SIZES = {"150B": 150, "12KiB": 12 * 1024}
DL_SIZE = 30 * 1024 * 1024


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
            from httpbench._server import start_process

            self.handle = start_process(threads=1, tls=tls)
            self.ca_file = self.handle.ca_file
            self.base = self.handle.url.rstrip("/")
            self.paths = {k: f"/bytes/{n}" for k, n in SIZES.items()}
            self.dl_path = f"/bytes/{DL_SIZE}"
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
                    "  keepalive_timeout 300s;\n"
                    f"  server {{ listen 127.0.0.1:{port}; root {www}; }} }}\n"
                )
            self.proc = subprocess.Popen([nginx, "-c", conf, "-p", tmp])
            self.base = f"http://127.0.0.1:{port}"
            self.paths = {k: f"/{k}" for k in SIZES}
            self.dl_path = "/dl"
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


def http_client_factory(url: str, ca: str | None):
    u = urllib.parse.urlsplit(url)
    if ca:
        import ssl

        ctx = ssl.create_default_context(cafile=ca)
        conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=10, context=ctx)
    else:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    path = u.path

    def get() -> bytes:
        conn.request("GET", path)
        return conn.getresponse().read()

    return get, conn.close


def urllib3_factory(url: str, ca: str | None):
    import urllib3

    u = urllib.parse.urlsplit(url)
    if ca:
        pool = urllib3.HTTPSConnectionPool(u.hostname, u.port, maxsize=1, retries=False,
                                           timeout=10, ca_certs=ca)
    else:
        pool = urllib3.HTTPConnectionPool(u.hostname, u.port, maxsize=1, retries=False,
                                          timeout=10)
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


def bench_gets(server: Server, n: int, rounds: int, warmup: int) -> dict:
    out: dict = {}
    per_round = max(1, n // rounds)
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
            for _ in range(warmup):
                get()
            clients[name] = (get, close, [0.0, 0.0, 0])
        order = list(clients.values())
        for rnd in range(rounds):
            # Rotate who goes first so drifting background load hits all alike.
            for get, _close, acc in order[rnd % len(order):] + order[: rnd % len(order)]:
                c0, t0 = time.process_time(), time.perf_counter()
                for _ in range(per_round):
                    get()
                t1, c1 = time.perf_counter(), time.process_time()
                acc[0] += t1 - t0
                acc[1] += c1 - c0
                acc[2] += per_round
        res = {}
        for name, (_get, close, (wall, cpu, count)) in clients.items():
            close()
            res[name] = {
                "requests": count,
                "req_per_s": count / wall,
                "cpu_us_per_req": cpu / count * 1e6,
            }
        out[size] = res
    return out


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
    if ca:
        import ssl

        ctx = ssl.create_default_context(cafile=ca)
        conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=60, context=ctx)
    else:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
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
    for _ in range(repeats):
        for name, fn in DL_CLIENTS.items():
            if os.path.exists(path):
                os.unlink(path)
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
               "repeats": len(ts)}
        for name, ts in times.items() if ts
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", choices=["embedded", "nginx"], default=None,
                    help="target (default: embedded if available, else nginx)")
    ap.add_argument("-n", type=int, default=20000, help="GETs per client and size")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--dl-repeats", type=int, default=5)
    ap.add_argument("--skip-download", action="store_true")
    ap.add_argument("--tls", action="store_true", help="HTTPS (embedded server, verified)")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args(argv)
    kind = a.server
    if kind is None:
        try:
            from httpbench._server import start_process  # noqa: F401

            kind = "embedded"
        except ImportError:
            kind = "nginx"
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(kind, tmp, tls=a.tls)
        try:
            print(f"server: {kind} at {server.base}; {a.n} sequential keep-alive GETs per client "
                  f"and size, {a.rounds} interleaved rounds")
            gets = bench_gets(server, a.n, a.rounds, a.warmup)
            for size, res in gets.items():
                print(f"\nGET {size}:")
                print(f"  {'client':<26}{'req/s':>10}{'CPU us/req':>12}{'CPU vs pycurl':>15}")
                ref = res.get("pycurl", {}).get("cpu_us_per_req")
                for name, r in res.items():
                    ratio = f"{r['cpu_us_per_req'] / ref:.2f}x" if ref else "-"
                    print(f"  {name:<26}{r['req_per_s']:>10.0f}{r['cpu_us_per_req']:>12.1f}"
                          f"{ratio:>15}")
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
            json.dump({"server": kind, "tls": a.tls, "n": a.n, "rounds": a.rounds, "get": gets,
                       "download": dl}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
