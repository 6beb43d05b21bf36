"""Embedded server vs nginx under the same wrk load, side by side.

    python benchmarks/bench_server.py [--duration 10] [--rounds 3] [--json out.json]

wrk -t1 -c16 -d{duration}s against (a) the embedded server in its own process
(1 worker thread, /bytes/150 and /bytes/12288) and (b) nginx (1 worker,
master_process off, access_log off, keepalive_requests unlimited) serving the
same deterministic 150-byte and 12 KiB payloads from a temporary config on
127.0.0.1. Runs are interleaved (for each round: every payload, both servers,
the order alternating) so machine noise hits both alike; the table shows
medians. nginx serves the payloads either as static files (``--nginx static``:
open_file_cache + sendfile, the usual deployment) or from memory
(``--nginx return``: ``return 200 "..."``, its cheapest path, for payloads up
to nginx's 4 KiB config token limit; larger ones stay files); ``--nginx both``
runs both and compares against the cheaper one.

Per run: requests/s (wrk) and server CPU per request = (utime + stime of the
server process from /proc/<pid>/stat, delta over the run) / requests wrk
completed. For the embedded server the workers' own thread CPU (the server's
stats) is printed too. wrk and the server are pinned to different CPUs when
there are at least two (--no-pin to disable).

"floor" (--floor, on by default when a C compiler is found) is
benchmarks/floor_server.c built on the fly: a server that does nothing per
request but find the blank line of the request head and write the same
prebuilt response bytes. Its CPU per request is the kernel's loopback cost
plus almost nothing - the least any server can spend here - so it shows
whether a ratio to nginx is reachable at all and how much the embedded server
adds to the floor.

Goals (benchmarks/goals.py): embedded CPU/request <= 0.8x nginx's and req/s >= nginx's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from httpbench import expected_bytes, start_process

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _peers  # noqa: E402
from _peers import (  # noqa: E402
    FLOOR_SERVER_SRC,
    build_floor,
    free_port,
    nginx_bench_config,
    stop_process,
)

PAYLOADS = (150, 12288)


class Nginx:
    def __init__(self, mode: str, cpu: int | None) -> None:
        self.dir = tempfile.mkdtemp(prefix="hb-nginx-")
        self.port = free_port()
        os.makedirs(os.path.join(self.dir, "html", "bytes"))
        locs = []
        for n in PAYLOADS:
            body = expected_bytes(n)
            with open(os.path.join(self.dir, "html", "bytes", str(n)), "wb") as f:
                f.write(body)
            # alphabet bytes only: nothing to escape; nginx config tokens are
            # limited to 4 KiB, so larger payloads stay static files
            if mode == "return" and n <= 4000:
                locs.append(f'    location = /bytes/{n} {{ return 200 "{body.decode()}"; }}')
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_bench_config(self.dir, f"    listen 127.0.0.1:{self.port} reuseport;\n"
                                       f"    root {self.dir}/html;\n" + "\n".join(locs)))
        cmd = ["nginx", "-c", conf, "-p", self.dir, "-e", os.path.join(self.dir, "error.log")]
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu)] + cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.pid = self.proc.pid
        self.url = f"http://127.0.0.1:{self.port}"
        for _ in range(100):
            try:
                import urllib.request

                body = urllib.request.urlopen(self.url + "/bytes/150", timeout=1).read()
                assert body == expected_bytes(150), "nginx serves the wrong bytes"
                break
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"nginx failed: {self.proc.stderr.read().decode()}") from None
                time.sleep(0.05)
        else:
            raise RuntimeError("nginx did not come up")

    def cpu_ns(self) -> int:
        return _peers.cpu_ns(self.pid)

    def stop(self) -> None:
        stop_process(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


class Embedded:
    def __init__(self, cpu: int | None) -> None:
        self.p = start_process(threads=1, cpu=cpu)
        self.pid = self.p.pid
        self.url = self.p.url

    def cpu_ns(self) -> int:
        return _peers.cpu_ns(self.pid)

    def thread_cpu_ns(self) -> int:
        return int(self.p.stats()["cpu_ns"])

    def stop(self) -> None:
        self.p.stop()


class Floor:
    """benchmarks/floor_server.c, one process per payload size, pinned like the others."""

    def __init__(self, exe: str, cpu: int | None) -> None:
        self.procs: dict[int, subprocess.Popen] = {}
        self.ports: dict[int, int] = {}
        self.cur = PAYLOADS[0]
        for n in PAYLOADS:
            port = free_port()
            cmd = [exe, str(port), str(n)]
            if cpu is not None:
                cmd = ["taskset", "-c", str(cpu)] + cmd
            self.procs[n] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.PIPE)
            self.ports[n] = port
        import urllib.request

        for n, port in self.ports.items():
            for _ in range(100):
                try:
                    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/bytes/{n}",
                                                  timeout=1).read()
                    if body != expected_bytes(n):
                        raise RuntimeError("floor_server serves the wrong bytes")
                    break
                except OSError:
                    if self.procs[n].poll() is not None:
                        raise RuntimeError("floor_server failed: " +
                                           self.procs[n].stderr.read().decode()) from None
                    time.sleep(0.05)
            else:
                raise RuntimeError("floor_server did not come up")

    def url_for(self, n: int) -> str:
        self.cur = n
        return f"http://127.0.0.1:{self.ports[n]}"

    def cpu_ns(self) -> int:
        return _peers.cpu_ns(self.procs[self.cur].pid)

    def stop(self) -> None:
        for p in self.procs.values():
            stop_process(p)


def run_wrk(url: str, duration: float, cpu: int | None) -> tuple[int, float]:
    cmd = ["wrk", "-t1", "-c16", f"-d{duration:g}s", url]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60).stdout
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m or not rps:
        raise RuntimeError(f"cannot parse wrk output:\n{out}")
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw errors:\n{out}")
    return int(m.group(1)), float(rps.group(1))


def measure(server, path: str, duration: float, cpu: int | None) -> dict:
    base = server.url_for(int(path.rsplit("/", 1)[1])) if isinstance(server, Floor) else server.url
    c0 = server.cpu_ns()
    t0 = server.thread_cpu_ns() if isinstance(server, Embedded) else None
    n, rps = run_wrk(base + path, duration, cpu)
    c1 = server.cpu_ns()
    res = {"requests": n, "rps": rps, "cpu_us_per_req": (c1 - c0) / 1000 / n}
    if t0 is not None:
        res["thread_cpu_us_per_req"] = (server.thread_cpu_ns() - t0) / 1000 / n
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per wrk run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nginx", choices=("static", "return", "both"), default="both")
    ap.add_argument("--no-pin", action="store_true", help="do not pin server and wrk to CPUs")
    ap.add_argument("--no-floor", action="store_true", help="do not run floor_server.c")
    ap.add_argument("--json", help="write all runs to this file")
    args = ap.parse_args(argv)
    for tool in ("wrk", "nginx"):
        if not shutil.which(tool):
            print(f"{tool} not installed", file=sys.stderr)
            return 2
    pin = not args.no_pin and (os.cpu_count() or 1) >= 2
    srv_cpu, wrk_cpu = (0, 1) if pin else (None, None)
    modes = ["static", "return"] if args.nginx == "both" else [args.nginx]
    servers: dict[str, object] = {"embedded": Embedded(srv_cpu)}
    tmp = tempfile.mkdtemp(prefix="hb-floor-")
    try:
        for m in modes:
            servers[f"nginx-{m}"] = Nginx(m, srv_cpu)
        exe = None if args.no_floor else build_floor(FLOOR_SERVER_SRC, tmp)
        if exe:
            servers["floor"] = Floor(exe, srv_cpu)
        runs: dict[tuple[str, int], list[dict]] = {}
        names = list(servers)
        for r in range(args.rounds):
            for n in PAYLOADS:
                order = names if r % 2 == 0 else names[::-1]
                for name in order:
                    res = measure(servers[name], f"/bytes/{n}", args.duration, wrk_cpu)
                    runs.setdefault((name, n), []).append(res)
                    print(f"round {r + 1} {n:>6} B {name:<13} {res['rps']:>10.0f} req/s "
                          f"{res['cpu_us_per_req']:6.2f} CPU-us/req", flush=True)
    finally:
        for s in servers.values():
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    def med(name: str, n: int, key: str) -> float:
        return statistics.median(x[key] for x in runs[(name, n)])

    print(f"\nwrk -t1 -c16 -d{args.duration:g}s, medians of {args.rounds} interleaved rounds"
          f"{' (server on CPU 0, wrk on CPU 1)' if pin else ''}")
    print(f"{'payload':>8} {'server':<14} {'req/s':>10} {'CPU us/req':>11}")
    summary = {}
    for n in PAYLOADS:
        for name in servers:
            extra = ""
            if name == "embedded":
                extra = f"   (worker threads: {med(name, n, 'thread_cpu_us_per_req'):.2f})"
            print(f"{n:>7}B {name:<14} {med(name, n, 'rps'):>10.0f} "
                  f"{med(name, n, 'cpu_us_per_req'):>11.2f}{extra}")
        ref = min((k for k in servers if k.startswith("nginx")),
                  key=lambda k: med(k, n, "cpu_us_per_req"))
        cpu_ratio = med("embedded", n, "cpu_us_per_req") / med(ref, n, "cpu_us_per_req")
        rps_ratio = med("embedded", n, "rps") / med(ref, n, "rps")
        ok = cpu_ratio <= 0.8 and rps_ratio >= 1.0
        print(f"{'':>8} embedded/{ref}: CPU/req x{cpu_ratio:.2f} (goal <= 0.80), "
              f"req/s x{rps_ratio:.2f} (goal >= 1.00) {'OK' if ok else 'MISSED'}")
        summary[n] = {"reference": ref, "cpu_ratio": cpu_ratio, "rps_ratio": rps_ratio}
        if "floor" in servers:
            fl = med("floor", n, "cpu_us_per_req")
            summary[n]["floor_vs_nginx"] = fl / med(ref, n, "cpu_us_per_req")
            summary[n]["embedded_vs_floor"] = med("embedded", n, "cpu_us_per_req") / fl
            print(f"{'':>8} floor/{ref}: CPU/req x{summary[n]['floor_vs_nginx']:.2f}; "
                  f"embedded/floor: x{summary[n]['embedded_vs_floor']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": {f"{k[0]}/{k[1]}": v for k, v in runs.items()},
                       "summary": summary}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
