"""Embedded server vs nginx over HTTP/2 under the same h2load load, side by side.

    python benchmarks/bench_h2server.py [--duration 5] [--rounds 3] [--quick] [--json out.json]

h2load -t1 at two shapes, ``-c16 -m10`` (16 connections x 10 streams) and
``-c1 -m100`` (one connection, 100 streams), each over h2c (prior knowledge,
plain port) and h2 (TLS, ALPN), GET of a 150-byte body, against (a) the
embedded server in its own process (1 worker thread) and (b) nginx 1 worker
(master_process off, access_log off, keep-alive without limits, ``http2`` on
both listeners), which serves the same bytes either as a static file
(open_file_cache, ``nginx-static``) or from memory (``return 200``,
``nginx-return``); the goal compares against the cheaper of the two. Runs are
interleaved (each round: every shape and protocol, the servers in alternating
order); the table shows medians.

Per run: requests/s (h2load) and server CPU per request = (utime + stime of
the server process from /proc/<pid>/stat, delta over the run) / requests
h2load completed. The embedded server's stats must show every request as an
h2 stream (so nothing fell back to HTTP/1.1), and h2load's output must name
the protocol it negotiated (h2c / h2). Server on CPU 0, h2load on CPU 1 when
there are two CPUs (--no-pin to disable).

"floor" (h2c only) is benchmarks/floor_h2server.c, compiled on the fly: it
reads frames by their 9-byte headers only (no HPACK decoding) and answers each
request's HEADERS with a prebuilt HEADERS + DATA pair (stream id patched in);
its count of requests answered must cover h2load's. Its CPU per request is
about the least an HTTP/2 server can spend on this machine.

Goal (benchmarks/goals.py): embedded CPU/request <= 0.8x nginx's.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from httpbench import expected_bytes, start_process

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import (  # noqa: E402
    FLOOR_H2SERVER_SRC,
    build_floor,
    cpu_ns,
    free_port,
    nginx_bench_config,
    parse_h2load,
    ports_answer,
    stop_process,
    write_rows,
)

SIZE = 150
SHAPES = (("-c16 -m10", 16, 10), ("-c1 -m100", 1, 100))
PROTOCOLS = ("h2c", "h2")

# the server block of nginx_bench_config(); both listeners speak HTTP/2
NGINX_SERVER = """\
    listen 127.0.0.1:{port} http2;
    listen 127.0.0.1:{tls_port} ssl http2;
    ssl_certificate {d}/cert.pem;
    ssl_certificate_key {d}/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;
    root {d}/html;
    location = /return/{size} {{ return 200 "{body}"; }}"""


class Nginx:
    """nginx with h2c on one port and h2 (TLS) on another; both paths, static and return."""

    def __init__(self, cpu: int | None) -> None:
        openssl = shutil.which("openssl")
        if openssl is None:
            raise SystemExit("nginx TLS needs the openssl CLI: apt-get install -y openssl")
        self.dir = tempfile.mkdtemp(prefix="hb-nginx-h2-")
        os.chmod(self.dir, 0o755)
        self.port, self.tls_port = free_port(), free_port()
        os.makedirs(os.path.join(self.dir, "html", "bytes"))
        body = expected_bytes(SIZE)
        with open(os.path.join(self.dir, "html", "bytes", str(SIZE)), "wb") as f:
            f.write(body)
        subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                        os.path.join(self.dir, "key.pem"), "-out",
                        os.path.join(self.dir, "cert.pem"), "-days", "2", "-subj", "/CN=127.0.0.1"],
                       check=True, capture_output=True, timeout=30)
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            server = NGINX_SERVER.format(d=self.dir, port=self.port, tls_port=self.tls_port,
                                         size=SIZE, body=body.decode())
            f.write(nginx_bench_config(self.dir, server,
                                       http="  http2_max_concurrent_streams 128;\n"))
        nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
        if nginx is None:
            raise SystemExit("nginx not installed: apt-get install -y nginx-light")
        cmd = [nginx, "-c", conf, "-p", self.dir, "-e", os.path.join(self.dir, "error.log")]
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu), *cmd]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 10
        while not self._up():
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx failed: {self.proc.stderr.read().decode()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("nginx did not come up")
            time.sleep(0.05)

    def _up(self) -> bool:
        return ports_answer((self.port, self.tls_port))

    def stop(self) -> None:
        stop_process(self.proc)
        if self.proc.stderr:
            self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class FloorServer:
    """benchmarks/floor_h2server.c on a free port (h2c), serving the same bytes."""

    def __init__(self, exe: str, tmp: str, cpu: int | None) -> None:
        body = os.path.join(tmp, "body")
        with open(body, "wb") as f:
            f.write(expected_bytes(SIZE))
        self.port = free_port()
        cmd = [exe, str(self.port), body]
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu), *cmd]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        import socket

        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("floor_h2server did not come up") from None
                time.sleep(0.05)

    def served(self) -> int:
        """Requests answered so far."""
        assert self.proc.stdout is not None
        self.proc.send_signal(signal.SIGUSR1)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("floor_h2server exited")
        return int(line)

    def stop(self) -> None:
        stop_process(self.proc)
        if self.proc.stdout:
            self.proc.stdout.close()


def run_h2load(url: str, conns: int, streams: int, duration: float, cpu: int | None) -> dict:
    cmd = ["h2load", "-t1", f"-c{conns}", f"-m{streams}", "-D", f"{duration:g}", url]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu), *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60).stdout
    d = parse_h2load(out)
    if d["errors"] or d["non_2xx"]:
        raise RuntimeError(f"h2load saw errors:\n{out}")
    m = re.search(r"Application protocol: (\S+)", out)
    d["protocol"] = m.group(1) if m else "?"
    return d


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per h2load run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="--duration 2 --rounds 2")
    ap.add_argument("--no-pin", action="store_true", help="do not pin server and h2load to CPUs")
    ap.add_argument("--json", help="write the rows (benchmarks/run.py format) to this file")
    ap.add_argument("--no-floor", action="store_true", help="leave out the floor server")
    args = ap.parse_args(argv)
    if args.quick:
        args.duration, args.rounds = 2.0, 2
    for tool in ("h2load", "nginx"):
        if not (shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")):
            print(f"{tool} not installed", file=sys.stderr)
            return 2
    pin = not args.no_pin and (os.cpu_count() or 1) >= 2
    srv_cpu, gen_cpu = (0, 1) if pin else (None, None)
    emb = {"h2c": start_process(threads=1, cpu=srv_cpu),
           "h2": start_process(threads=1, cpu=srv_cpu, tls=True)}
    ng = None
    floor = None
    tmp = tempfile.mkdtemp(prefix="hb-h2floor-")
    runs: dict[tuple[str, str, str], list[dict]] = {}
    try:
        ng = Nginx(srv_cpu)
        exe = None if args.no_floor else build_floor(FLOOR_H2SERVER_SRC, tmp)
        if exe is not None:
            floor = FloorServer(exe, tmp, srv_cpu)

        def target(name: str, proto: str) -> tuple[int, str]:
            if name == "embedded":
                return emb[proto].pid, f"{emb[proto].url}/bytes/{SIZE}"
            if name == "floor":
                assert floor is not None
                return floor.pid, f"http://127.0.0.1:{floor.port}/bytes/{SIZE}"
            assert ng is not None
            base = (f"http://127.0.0.1:{ng.port}" if proto == "h2c"
                    else f"https://127.0.0.1:{ng.tls_port}")
            path = f"/bytes/{SIZE}" if name == "nginx-static" else f"/return/{SIZE}"
            return ng.pid, base + path

        names = ["embedded", "nginx-static", "nginx-return"] + (["floor"] if floor else [])
        for r in range(args.rounds):
            for shape, conns, streams in SHAPES:
                for proto in PROTOCOLS:
                    for name in (names if r % 2 == 0 else names[::-1]):
                        if name == "floor" and proto != "h2c":
                            continue
                        pid, url = target(name, proto)
                        st0 = emb[proto].stats() if name == "embedded" else None
                        f0 = floor.served() if name == "floor" and floor else None
                        c0 = cpu_ns(pid)
                        res = run_h2load(url, conns, streams, args.duration, gen_cpu)
                        res["cpu_us_per_req"] = (cpu_ns(pid) - c0) / 1000 / res["requests"]
                        if res["protocol"] != proto:
                            raise RuntimeError(f"{name}: h2load negotiated {res['protocol']}, "
                                               f"not {proto}")
                        if st0 is not None:
                            st1 = emb[proto].stats()
                            h2 = st1["by_protocol"]["h2"] - st0["by_protocol"]["h2"]
                            h1 = st1["by_protocol"]["http/1.1"] - st0["by_protocol"]["http/1.1"]
                            if h1 or h2 < res["requests"]:
                                raise RuntimeError(f"embedded counted {h2} h2 streams and {h1} "
                                                   f"HTTP/1.1 requests for {res['requests']}")
                        if f0 is not None and floor is not None:
                            served = floor.served() - f0
                            if served < res["requests"]:
                                raise RuntimeError(f"floor answered {served} requests, h2load "
                                                   f"counted {res['requests']}")
                        runs.setdefault((f"{shape} {proto}", name, ""), []).append(res)
                        print(f"round {r + 1} {shape:<10} {proto:<4} {name:<13} "
                              f"{res['req_per_s']:>10.0f} req/s "
                              f"{res['cpu_us_per_req']:6.2f} CPU-us/req", flush=True)
    finally:
        for p in emb.values():
            p.stop()
        if ng is not None:
            ng.stop()
        if floor is not None:
            floor.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    rows = []
    print(f"\nh2load -t1 -D {args.duration:g}, GET {SIZE} B, medians of {args.rounds} "
          f"interleaved rounds{' (server on CPU 0, h2load on CPU 1)' if pin else ''}")
    print(f"{'case':<16} {'server':<14} {'req/s':>10} {'CPU us/req':>11}")
    cases = sorted({k[0] for k in runs}, key=lambda c: [k[0] for k in runs].index(c))
    for case in cases:
        med = {}
        for name in names:
            rs = runs.get((case, name, ""))
            if not rs:
                continue
            med[name] = (statistics.median(x["cpu_us_per_req"] for x in rs),
                         statistics.median(x["req_per_s"] for x in rs))
            print(f"{case:<16} {name:<14} {med[name][1]:>10.0f} {med[name][0]:>11.2f}")
            label = f"h2load -t1 {case}, {SIZE} B"
            rows.append({"case": label, "contender": name, "metric": "CPU/req", "unit": "µs",
                         "values": [x["cpu_us_per_req"] for x in rs]})
            rows.append({"case": label, "contender": name, "metric": "req/s", "unit": "req/s",
                         "values": [x["req_per_s"] for x in rs]})
        ref = min(("nginx-static", "nginx-return"), key=lambda n: med[n][0])
        ratio = med["embedded"][0] / med[ref][0]
        print(f"{'':<16} embedded/{ref}: CPU/req x{ratio:.2f} (goal <= 0.80) "
              f"{'OK' if ratio <= 0.8 else 'MISSED'}; req/s x{med['embedded'][1] / med[ref][1]:.2f}")
    notes = [f"h2load -t1 -D {args.duration:g} s per run, {args.rounds} interleaved rounds; "
             "server CPU from /proc/<pid>/stat over the run; the embedded server's stats "
             "confirm every request was an h2 stream"]
    if args.json:
        write_rows(rows, notes, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
