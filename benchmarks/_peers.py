"""Shared helpers for the benchmark scripts: peers, nginx, wrk/h2load, CPU time, metadata.

Import it from a script in ``benchmarks/`` (the directory is on ``sys.path``
when the script runs)::

    from _peers import (Nginx, find_peer, require_peers, run_wrk, run_h2load,
                        CpuMeter, SystemCpu, machine_metadata, summarize, interleave)

Peers
    ``find_peer(name) -> Peer | None`` locates wrk, nginx, h2load, curl
    (Debian packages) or pycurl (PyPI); ``Peer.version`` is its version text.
    ``require_peers(names)`` returns the found peers and raises
    :class:`MissingPeer` (a ``SystemExit`` subclass whose message lists the
    install commands) if any is missing; ``install_hint(name)`` gives the one
    command. ``peer_versions()`` maps every known peer to its version or None.

nginx
    ``with Nginx(tls=True) as ng:`` starts nginx in the foreground with a
    temporary config bound to 127.0.0.1 (ephemeral ports), 1 worker,
    ``access_log off``, keep-alive without limits, serving the fixed files
    ``/150b`` (150 bytes) and ``/12k`` (12,288 bytes) plus any ``files={name:
    size}`` given; with ``tls=True`` also HTTPS on a second port with a
    freshly generated self-signed ECDSA P-256 certificate (the same key type
    as the embedded server; ``ng.ca_file`` verifies it). ``ng.url``,
    ``ng.https_url``, ``ng.pids()`` (master + workers, for :class:`CpuMeter`),
    ``ng.config`` (the config text, for the record). ``ports_answer(ports)``
    says whether every port on 127.0.0.1 accepts a connection.
    ``nginx_bench_config(d, server, http="")`` is the config the server
    benchmarks (bench_server.py, bench_h2server.py) run nginx with: 1 worker,
    no master process, tuned for static files; ``server`` is the server
    block's body, ``http`` extra http-level lines. ``stop_process(proc)``
    terminates a child (SIGKILL after 5 s).

Load generators
    ``run_wrk(url, threads=1, connections=16, duration=10) -> LoadResult`` and
    ``run_h2load(url, threads=1, connections=16, duration=10)`` (HTTP/1.1,
    ``--h1``) run the tool to completion and parse its output; the result has
    requests, seconds, req_per_s, errors, non_2xx, and the generator's own CPU
    time (user+sys of the child from ``wait4``), so ``cpu_us_per_req`` is
    comparable to httpbench's. ``parse_wrk(text)`` / ``parse_h2load(text)``
    parse saved output.

CPU time
    ``cpu_seconds(pid)`` is user+sys of a process (all its threads) from
    ``/proc/<pid>/stat``; ``with CpuMeter([pid, ...]) as m: ...`` gives
    ``m.seconds`` (the sum over the pids across the block); ``cpu_ns(pid)`` is
    the same in whole nanoseconds. ``SystemCpu`` does
    the same for the whole machine from ``/proc/stat`` (``busy_seconds``,
    ``cores``), so a run can say how busy the machine was besides the
    contenders.

Statistics
    ``summarize(values) -> {"median", "min", "max", "n", "values"}``;
    ``interleave(contenders, rounds)`` calls each contender once per round
    in order A B C A B C ... and returns ``{name: [result per round]}``;
    ``round_robin(rounds, cases, tools, run)`` runs every tool on every case
    round after round and returns the run records with requests/s and CPU
    µs per request added (the load-generator benchmarks' loop).

Processes
    ``children(pid)`` lists a process's child processes (from /proc);
    ``pin_process(pid, cpus)`` pins every thread of a process to a CPU set
    (threads it starts later inherit it).

Floor programs
    ``build_floor(src, tmp, libs)`` compiles ``floor_loadgen.c`` / ``floor_server.c``
    / ``floor_h2loadgen.c`` / ``floor_h2server.c``
    (None when no compiler or OpenSSL headers); ``run_floor(exe, url, conns,
    seconds)`` runs the floor load generator and returns its requests, seconds
    and CPU. ``run_bench_script(code, args, seconds)`` runs a ``bench()``
    script in a fresh interpreter and returns its run record.

Syscalls
    ``strace_counts(argv) -> (output, {syscall: calls})`` runs a command under
    ``strace -f -c`` (all threads) and returns its output and the counts;
    compare two run lengths to get syscalls per request.

Metadata
    ``machine_metadata()``: ``httpbench``'s own ``system_metadata()`` (CPU model,
    usable CPUs as ``cpus``, kernel, clock source, Python, OpenSSL) plus the
    openssl CLI's version, load average, httpbench version and git commit,
    peer versions, UTC time.

Everything binds to 127.0.0.1 only, uses ephemeral ports, and has timeouts.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from _cputime import CLK_TCK, CpuMeter, SystemCpu, cpu_ns, cpu_seconds  # noqa: F401

__all__ = [
    "PEERS",
    "Peer",
    "MissingPeer",
    "find_peer",
    "require_peers",
    "install_hint",
    "peer_versions",
    "Nginx",
    "NGINX_FILES",
    "LoadResult",
    "run_wrk",
    "run_h2load",
    "parse_wrk",
    "parse_h2load",
    "cpu_seconds",
    "CpuMeter",
    "SystemCpu",
    "summarize",
    "interleave",
    "machine_metadata",
    "free_port",
    "ports_answer",
    "strace_counts",
    "children",
    "pin_process",
    "FLOOR_LOADGEN_SRC",
    "FLOOR_SERVER_SRC",
    "FLOOR_H2LOADGEN_SRC",
    "FLOOR_H2SERVER_SRC",
    "build_floor",
    "run_floor",
    "run_bench_script",
    "round_robin",
    "cpu_ns",
    "nginx_bench_config",
    "stop_process",
    "write_rows",
]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------------------
# peers

# name -> (how to get its version, install command)
PEERS: dict[str, tuple[Sequence[str] | None, str]] = {
    "wrk": (["wrk", "-v"], "apt-get install -y wrk"),
    "nginx": (["nginx", "-v"], "apt-get install -y nginx-light"),
    "h2load": (["h2load", "--version"], "apt-get install -y nghttp2-client"),
    "curl": (["curl", "--version"], "apt-get install -y curl"),
    "pycurl": (None, "pip install pycurl"),
}


@dataclasses.dataclass(frozen=True)
class Peer:
    """A located peer: ``path`` is the executable (or module file for pycurl)."""

    name: str
    path: str
    version: str


class MissingPeer(SystemExit):
    """Raised by :func:`require_peers`; the message says how to install what is missing."""


def install_hint(name: str) -> str:
    """The command that installs peer ``name`` (Debian packages / PyPI)."""
    try:
        return PEERS[name][1]
    except KeyError:
        raise ValueError(f"unknown peer {name!r}; known: {', '.join(PEERS)}") from None


def _which(name: str) -> str | None:
    # nginx lives in /usr/sbin, which is not on every user's PATH.
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin:/sbin")


_FOUND: dict[str, Peer | None] = {}


def find_peer(name: str) -> Peer | None:
    """Locate peer ``name`` (wrk, nginx, h2load, curl, pycurl); None if absent. Cached."""
    if name in _FOUND:
        return _FOUND[name]
    cmd, _hint = PEERS.get(name, (None, ""))
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}; known: {', '.join(PEERS)}")
    peer: Peer | None = None
    if name == "pycurl":
        try:
            import pycurl  # noqa: PLC0415
        except ImportError:
            peer = None
        else:
            peer = Peer("pycurl", pycurl.__file__ or "pycurl", pycurl.version)
    else:
        path = _which(name)
        if path is not None:
            assert cmd is not None
            try:
                p = subprocess.run([path, *cmd[1:]], capture_output=True, text=True, timeout=10)
                text = (p.stdout + p.stderr).strip().splitlines()
                version = text[0].strip() if text else "?"
            except (OSError, subprocess.TimeoutExpired):
                version = "?"
            peer = Peer(name, path, version)
    _FOUND[name] = peer
    return peer


def require_peers(names: Iterable[str]) -> dict[str, Peer]:
    """All of ``names`` located, or :class:`MissingPeer` naming the install commands."""
    names = list(names)
    found = {n: find_peer(n) for n in names}
    missing = [n for n, p in found.items() if p is None]
    if missing:
        lines = [f"missing peer(s): {', '.join(missing)}; install with:"]
        lines += [f"    {install_hint(n)}" for n in missing]
        raise MissingPeer("\n".join(lines))
    return {n: p for n, p in found.items() if p is not None}


def peer_versions() -> dict[str, str | None]:
    """Every known peer's version text, None when it is not installed."""
    return {n: (p.version if (p := find_peer(n)) else None) for n in PEERS}


# ---------------------------------------------------------------------------
# nginx

NGINX_FILES: dict[str, int] = {"150b": 150, "12k": 12 * 1024}


def free_port() -> int:
    """An ephemeral TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ports_answer(ports: Iterable[int]) -> bool:
    """True when every one of ``ports`` on 127.0.0.1 accepts a connection (0.5 s each)."""
    for port in ports:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                pass
        except OSError:
            return False
    return True


def _gen_cert(dirpath: str) -> tuple[str, str]:
    """Self-signed ECDSA P-256 cert + key for 127.0.0.1/localhost (openssl CLI)."""
    crt, key = os.path.join(dirpath, "cert.pem"), os.path.join(dirpath, "key.pem")
    openssl = shutil.which("openssl")
    if openssl is None:
        raise MissingPeer("nginx TLS needs the openssl CLI: apt-get install -y openssl")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=30,
    )
    return crt, key


class Nginx:
    """nginx (1 worker by default) on 127.0.0.1 with a temporary config; a context manager.

    ``files``: extra ``{name: size}`` served as ``/<name>`` (deterministic
    bytes), besides :data:`NGINX_FILES`. ``tls``: also listen with HTTPS.
    ``http2``: both ports speak HTTP/2 (h2c with prior knowledge, ALPN h2).
    ``open_file_cache``: cache open file descriptors, as a tuned nginx does.
    """

    def __init__(self, *, tls: bool = False, workers: int = 1,
                 files: Mapping[str, int] | None = None, open_file_cache: bool = True,
                 start_timeout: float = 10.0, http2: bool = False) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.tls = tls
        self.http2 = http2
        self.workers = workers
        self.files = {**NGINX_FILES, **(files or {})}
        self.open_file_cache = open_file_cache
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.port = 0
        self.tls_port = 0
        self.ca_file: str | None = None
        self.config = ""

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:PORT`` (append ``/150b``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def https_url(self) -> str:
        if not self.tls:
            raise RuntimeError("nginx was started without tls=True")
        return f"https://127.0.0.1:{self.tls_port}"

    def start(self) -> Nginx:
        if self.proc is not None:
            return self
        peer = require_peers(["nginx"])["nginx"]
        self._tmp = tempfile.TemporaryDirectory(prefix="hb-nginx-")
        d = self._tmp.name
        os.chmod(d, 0o755)  # workers drop privileges when started as root
        www = os.path.join(d, "www")
        os.makedirs(www)
        os.makedirs(os.path.join(d, "logs"))
        for name, size in self.files.items():
            with open(os.path.join(www, name), "wb") as f:
                f.write(_payload(size))
        self.port = free_port()
        h2 = " http2" if self.http2 else ""
        listen = f"    listen 127.0.0.1:{self.port}{h2};\n"
        if self.tls:
            crt, key = _gen_cert(d)
            self.ca_file = crt
            self.tls_port = free_port()
            listen += (f"    listen 127.0.0.1:{self.tls_port} ssl{h2};\n"
                       f"    ssl_certificate {crt}; ssl_certificate_key {key};\n"
                       "    ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:S:1m;\n")
        cache = "  open_file_cache max=64 inactive=300s;\n" if self.open_file_cache else ""
        user = "user root;\n" if os.geteuid() == 0 else ""
        self.config = (
            f"{user}worker_processes {self.workers}; daemon off; pid {d}/nginx.pid;\n"
            f"error_log {d}/logs/error.log warn;\n"
            "events { worker_connections 4096; }\n"
            "http {\n"
            "  access_log off; sendfile on; tcp_nopush on;\n"
            "  keepalive_requests 100000000; keepalive_timeout 300s;\n"
            "  default_type application/octet-stream;\n"
            f"{cache}"
            f"  client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp;\n"
            f"  fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;\n"
            "  server {\n"
            f"{listen}"
            f"    root {www};\n"
            "  }\n"
            "}\n"
        )
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write(self.config)
        self.proc = subprocess.Popen([peer.path, "-e", f"{d}/logs/error.log", "-c", conf, "-p", d],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                self._cleanup()
                raise RuntimeError(f"nginx exited at start: {err.strip()}")
            if self._ready():
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"nginx did not answer on 127.0.0.1:{self.port} "
                                   f"within {self.start_timeout} s")
            time.sleep(0.02)

    def _ready(self) -> bool:
        ports = [self.port] + ([self.tls_port] if self.tls else [])
        return ports_answer(ports) and len(self.worker_pids()) >= self.workers

    def worker_pids(self) -> list[int]:
        """The worker processes' pids (children of the master)."""
        if self.proc is None:
            return []
        return children(self.proc.pid)

    def pids(self) -> list[int]:
        """Master and workers, for :class:`CpuMeter` (the master is idle under load)."""
        if self.proc is None:
            return []
        return [self.proc.pid, *self.worker_pids()]

    def stop(self, timeout: float = 10.0) -> None:
        """Stop nginx (SIGTERM, then SIGKILL after ``timeout``) and remove its files."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        self._cleanup()

    def _cleanup(self) -> None:
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
        self.proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Nginx:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _payload(size: int) -> bytes:
    """Deterministic printable bytes (the same for every run)."""
    pattern = b"httpbench-0123456789abcdefghijklmnopqrstuvwxyz\n"
    reps, rest = divmod(size, len(pattern))
    return pattern * reps + pattern[:rest]


_NGINX_BENCH_CONF = """
worker_processes 1;
daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
{http}  default_type application/octet-stream;
  sendfile on;
  tcp_nodelay on;
  open_file_cache max=64 inactive=600s;
  open_file_cache_valid 600s;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  server {{
{server}
  }}
}}
"""


def nginx_bench_config(d: str, server: str, http: str = "") -> str:
    """nginx.conf for the server benchmarks: 1 worker without a master process, no access
    log, unlimited keep-alive, sendfile and open_file_cache, its files under ``d``.

    ``server``: the server block's body (indented lines, no final newline);
    ``http``: extra http-level lines (each ending in a newline)."""
    return _NGINX_BENCH_CONF.format(d=d, http=http, server=server)


def stop_process(proc: subprocess.Popen[Any]) -> None:
    """Terminate a child process and reap it; SIGKILL when it has not exited after 5 s."""
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def children(pid: int) -> list[int]:
    """Child processes of ``pid`` (over all its threads), from /proc."""
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    out += [int(x) for x in f.read().split()]
            except OSError:
                continue
    except OSError:
        pass
    return out


def pin_process(pid: int, cpus: set[int]) -> bool:
    """Pin every thread of ``pid`` to ``cpus`` (threads created later inherit it).

    True when at least one thread could be pinned."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    ok = False
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
            ok = True
        except OSError:
            pass  # a thread that exited meanwhile
    return ok


# ---------------------------------------------------------------------------
# floor programs

HERE = os.path.dirname(os.path.abspath(__file__))
FLOOR_LOADGEN_SRC = os.path.join(HERE, "floor_loadgen.c")
FLOOR_SERVER_SRC = os.path.join(HERE, "floor_server.c")
FLOOR_H2LOADGEN_SRC = os.path.join(HERE, "floor_h2loadgen.c")
FLOOR_H2SERVER_SRC = os.path.join(HERE, "floor_h2server.c")


def build_floor(src: str, tmp: str, libs: Sequence[str] = ()) -> str | None:
    """Compile a floor program into ``tmp`` (linked with ``libs``, e.g. ``["-lssl",
    "-lcrypto"]``); None, with a note on stderr, when it cannot be built."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    name = os.path.splitext(os.path.basename(src))[0]
    exe = os.path.join(tmp, name)
    if cc is None:
        print(f"# {name}: no C compiler; skipped", file=sys.stderr)
        return None
    p = subprocess.run([cc, "-O2", "-std=c11", "-o", exe, src, *libs],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"# {name}: build failed; skipped\n{p.stderr}", file=sys.stderr)
        return None
    return exe


def run_floor(exe: str, url: str, conns: int, seconds: float) -> dict[str, Any]:
    """Run the floor load generator against ``url``: requests, seconds and CPU of the run."""
    m = re.match(r"(https?)://([\d.]+):(\d+)(/.*)$", url)
    if not m:
        raise RuntimeError(f"floor cannot run {url}")
    argv = [exe, m.group(2), m.group(3), m.group(4), str(conns), f"{seconds:g}"]
    if m.group(1) == "https":
        argv.append("tls")
    p = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60)
    if p.returncode != 0:
        raise RuntimeError(f"floor_loadgen failed: {p.stderr.strip()}")
    d = json.loads(p.stdout)
    return {"ok": d["requests"], "done": d["requests"], "duration_s": d["seconds"],
            "cpu_s": d["cpu_user_s"] + d["cpu_sys_s"], "cpu_user_s": d["cpu_user_s"],
            "cpu_sys_s": d["cpu_sys_s"]}


def run_bench_script(code: str, args: Sequence[str], seconds: float) -> dict[str, Any]:
    """Run ``python -c code *args`` (a bench() run in a fresh interpreter), whose last line of
    output is JSON with ok, done, duration_s, cpu_ns and optionally wakeups; the run's record
    (cpu_s for cpu_ns)."""
    p = subprocess.run([sys.executable, "-c", code, *args],
                       capture_output=True, text=True, timeout=seconds + 60)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    d = json.loads(p.stdout.strip().splitlines()[-1])
    return {"ok": d["ok"], "done": d["done"], "duration_s": d["duration_s"],
            "cpu_s": d["cpu_ns"] / 1e9, **({"wakeups": d["wakeups"]} if "wakeups" in d else {})}


# ---------------------------------------------------------------------------
# wrk / h2load


@dataclasses.dataclass
class LoadResult:
    """One load-generator run. ``cpu_s``: the generator's own user+sys CPU seconds."""

    tool: str
    url: str
    requests: int
    seconds: float
    req_per_s: float
    errors: int
    non_2xx: int
    cpu_s: float
    latency: dict[str, float]  # percentile ("50", "99", ...) -> seconds, when reported
    output: str

    @property
    def cpu_us_per_req(self) -> float:
        return self.cpu_s / self.requests * 1e6 if self.requests else float("nan")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("output")
        d["cpu_us_per_req"] = self.cpu_us_per_req
        return d


_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _seconds(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text.strip())
    if not m:
        raise ValueError(f"not a duration: {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_wrk(text: str) -> dict[str, Any]:
    """Figures from wrk's output (requests, seconds, req_per_s, errors, non_2xx, latency)."""
    m = re.search(r"(\d+) requests in ([\d.]+\w+), ", text)
    if not m:
        raise ValueError(f"unrecognised wrk output:\n{text}")
    out: dict[str, Any] = {"requests": int(m.group(1)), "seconds": _seconds(m.group(2))}
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    out["req_per_s"] = float(rps.group(1)) if rps else out["requests"] / out["seconds"]
    errors = 0
    se = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if se:
        errors = sum(int(x) for x in se.groups())
    n2 = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    out["errors"] = errors
    out["non_2xx"] = int(n2.group(1)) if n2 else 0
    lat: dict[str, float] = {}
    for p, v in re.findall(r"^\s+(\d+(?:\.\d+)?)%\s+([\d.]+(?:us|ms|s|m))\s*$", text, re.M):
        lat[p.rstrip("0").rstrip(".") if "." in p else p] = _seconds(v)
    out["latency"] = lat
    return out


def parse_h2load(text: str) -> dict[str, Any]:
    """Figures from h2load's output (requests done, seconds, req_per_s, errors, non_2xx)."""
    f = re.search(r"finished in ([\d.]+\w+), ([\d.]+) req/s", text)
    r = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", text)
    if not f or not r:
        raise ValueError(f"unrecognised h2load output:\n{text}")
    st = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
    non2 = sum(int(x) for x in st.groups()[1:]) if st else 0
    return {
        "requests": int(r.group(3)),
        "seconds": _seconds(f.group(1)),
        "req_per_s": float(f.group(2)),
        "errors": int(r.group(6)) + int(r.group(7)),
        "non_2xx": non2,
        "latency": {},
    }


def _run_tool(tool: str, argv: list[str], timeout: float) -> tuple[str, float, int]:
    """Run argv to completion; (stdout+stderr, child user+sys CPU seconds, voluntary
    context switches: how often it slept and was woken), both from wait4."""
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                os.wait4(p.pid, 0)
                raise TimeoutError(f"{tool} did not finish within {timeout} s")
            time.sleep(0.01)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {p.returncode}:\n{text}")
    return text, ru.ru_utime + ru.ru_stime, ru.ru_nvcsw


def run_wrk(url: str, *, threads: int = 1, connections: int = 16, duration: float = 10,
            latency: bool = True, timeout: str = "5s",
            headers: Sequence[str] = ()) -> LoadResult:
    """Run ``wrk -t -c -d [--latency] URL``; figures plus wrk's own CPU time."""
    peer = require_peers(["wrk"])["wrk"]
    argv = [peer.path, f"-t{threads}", f"-c{connections}", f"-d{duration:g}s",
            "--timeout", timeout]
    if latency:
        argv.append("--latency")
    for h in headers:
        argv += ["-H", h]
    text, cpu, _ = _run_tool("wrk", [*argv, url], duration + 30)
    d = parse_wrk(text)
    return LoadResult("wrk", url, d["requests"], d["seconds"], d["req_per_s"], d["errors"],
                      d["non_2xx"], cpu, d["latency"], text)


def run_h2load(url: str, *, threads: int = 1, connections: int = 16, duration: float = 10,
               requests: int | None = None, warmup: float = 0) -> LoadResult:
    """Run ``h2load --h1 -t -c (-D duration | -n requests) URL`` (HTTP/1.1, also over TLS)."""
    peer = require_peers(["h2load"])["h2load"]
    argv = [peer.path, "--h1", f"-t{threads}", f"-c{connections}"]
    if requests is not None:
        argv += ["-n", str(requests)]
    else:
        argv += ["-D", f"{duration:g}"]
        if warmup:
            argv += ["--warm-up-time", f"{warmup:g}"]
    text, cpu, _ = _run_tool("h2load", [*argv, url], (duration or 60) + warmup + 30)
    d = parse_h2load(text)
    return LoadResult("h2load", url, d["requests"], d["seconds"], d["req_per_s"], d["errors"],
                      d["non_2xx"], cpu, d["latency"], text)


def strace_counts(argv: Sequence[str], timeout: float = 120) -> tuple[str, dict[str, int]]:
    """Run argv under ``strace -f -c``; (its stdout+stderr, {syscall: calls}, "total" included)."""
    strace = shutil.which("strace")
    if strace is None:
        raise MissingPeer("syscall counts need strace: apt-get install -y strace")
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as tf:
        p = subprocess.run([strace, "-f", "-c", "-qq", "-o", tf.name, *argv],
                           capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited with {p.returncode} under strace:\n"
                               f"{p.stdout}{p.stderr}")
        counts: dict[str, int] = {}
        for line in tf.read().splitlines():
            parts = line.split()
            # "% time seconds usecs/call calls [errors] syscall"; the total line ends "total"
            if len(parts) >= 5 and parts[-1] != "syscall" and parts[0][0].isdigit():
                try:
                    counts[parts[-1]] = int(parts[3])
                except ValueError:
                    continue
    return p.stdout + p.stderr, counts


# ---------------------------------------------------------------------------
# statistics


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """Median with min and max (and the values) of repeated measurements."""
    vals = [float(v) for v in values]
    if not vals:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0,
                "values": []}
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "n": len(vals), "values": vals}


def interleave(contenders: Mapping[str, Callable[[], Any]], rounds: int) -> dict[str, list[Any]]:
    """Run the contenders A B C A B C ... ``rounds`` times; results per contender."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    out: dict[str, list[Any]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            out[name].append(fn())
    return out


def round_robin(rounds: int, cases: Sequence[tuple[str, dict[str, Any]]], tools: Sequence[str],
                run: Callable[[str, dict[str, Any]], dict[str, Any] | None]) -> list[dict[str, Any]]:
    """Every tool on every case, case after case, ``rounds`` times, so machine noise hits
    every tool alike.

    ``cases``: (label for the progress line, keys of the case); ``run(tool, keys)`` gives a
    record with ok, done, duration_s and cpu_s, or None to skip the pair. Each record gains
    round, the case's keys, tool, rps and cpu_us_per_req, and a progress line on stderr."""
    runs: list[dict[str, Any]] = []
    for rnd in range(rounds):
        for label, keys in cases:
            for tool in tools:
                r = run(tool, keys)
                if r is None:
                    continue
                r.update(round=rnd, **keys, tool=tool, rps=r["ok"] / r["duration_s"],
                         cpu_us_per_req=r["cpu_s"] * 1e6 / max(r["done"], 1))
                runs.append(r)
                print(f"# round {rnd} {label} {tool:9} "
                      f"{r['rps']:>10.0f} req/s {r['cpu_us_per_req']:6.2f} us/req",
                      file=sys.stderr, flush=True)
    return runs


# ---------------------------------------------------------------------------
# metadata


def _git_commit() -> str | None:
    try:
        p = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, timeout=5)
        return p.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def machine_metadata() -> dict[str, Any]:
    """Where and with what a run was made (JSON-serialisable): the package's
    ``system_metadata()`` (the keys every result carries) plus what only a
    benchmark run records (time, load, the openssl CLI, git commit, peers)."""
    from httpbench import __version__
    from httpbench._metadata import system_metadata

    openssl_cli = None
    if shutil.which("openssl"):
        try:
            openssl_cli = subprocess.run(["openssl", "version"], capture_output=True, text=True,
                                         timeout=5).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **system_metadata(),
        "openssl_cli": openssl_cli,
        "loadavg": list(load) if load else None,
        "httpbench": __version__,
        "git_commit": _git_commit(),
        "peers": peer_versions(),
    }


if __name__ == "__main__":  # a quick self-check: peers and metadata
    import json

    print(json.dumps(machine_metadata(), indent=2))
    for name in PEERS:
        if find_peer(name) is None:
            print(f"missing {name}: {install_hint(name)}")


def write_rows(rows: list[dict[str, Any]], notes: list[str], path: str | None) -> None:
    """A script's ``{"rows", "notes", "metadata"}`` document (what run.py reads), to path or stdout."""
    doc = {"rows": rows, "notes": notes, "metadata": machine_metadata()}
    if path:
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
    else:
        print(json.dumps(doc, indent=1))

