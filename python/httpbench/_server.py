"""The embedded HTTP/HTTPS test server: in-process (``Server``), in a separate
process (``start_process``) and as the ``httpbench serve`` command.

The server itself is C (``hb_server``): worker threads with their own epoll
loops, never holding the GIL. Generated bodies are deterministic: byte ``i``
is ``ALPHABET[(i % 65521) % 62]``; ``expected_bytes(n, offset)`` returns them
so clients can check downloads byte for byte.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from . import _core
from ._features import H2_SERVER_MISSING, H3_MISSING, features, require_h2_server, require_h3_server

__all__ = [
    "Server",
    "ServerProcess",
    "start_process",
    "expected_bytes",
    "crc32",
    "ROUTES",
    "cli_main",
]

ROUTES: tuple[str, ...] = tuple(_core.SERVER_ROUTES)
"""Route names used as keys of ``stats()["by_route"]``."""


def expected_bytes(n: int, offset: int = 0) -> bytes:
    """The server's deterministic body bytes ``[offset, offset + n)``."""
    return _core.expected_bytes(n, offset)


def crc32(data: bytes, crc: int = 0) -> int:
    """CRC-32 as the ``/sink`` route computes it (same as ``zlib.crc32``)."""
    return _core.crc32(data, crc)


def _url(scheme: str, host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def _ms(seconds: float, name: str) -> int:
    if seconds <= 0:
        raise ValueError(f"{name} must be > 0, got {seconds!r}")
    return max(1, int(round(seconds * 1000)))


# HTTP/2 SETTINGS ranges (RFC 9113 6.5.2; streams capped by the server).
H2_MAX_STREAMS = 100000
H2_MAX_WINDOW = 2**31 - 1
H2_MIN_FRAME = 16384
H2_MAX_FRAME = 2**24 - 1

# Servers running in this process: measure() takes their threads' CPU out of the
# client's figure (their C threads share the process's CPU clock).
_RUNNING: weakref.WeakSet[Server] = weakref.WeakSet()
# Servers started by start_process() from this process: measure() places them too.
_PROCESSES: weakref.WeakSet[ServerProcess] = weakref.WeakSet()


def local_servers() -> list[Server | ServerProcess]:
    """The running servers this process started (in-process and ``start_process()``):
    the ones whose placement next to a client ``measure()`` and ``bench()`` can know."""
    out: list[Server | ServerProcess] = [s for s in list(_RUNNING) if s.running]
    out += [p for p in list(_PROCESSES) if p.running]
    return out


def _tids(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return [pid]


def _thread_cpus(tid: int) -> list[int] | None:
    try:
        return sorted(os.sched_getaffinity(tid))
    except (AttributeError, OSError):
        return None


def in_process_server_cpu() -> dict[int, int]:
    """{id(server): CPU ns its worker threads used so far} for every in-process Server
    started in this process and still alive (a stopped one keeps its final figure)."""
    out: dict[int, int] = {}
    for srv in list(_RUNNING):
        h = srv._handle or srv._last
        if h is None:
            continue
        try:
            out[id(srv)] = int(h.stats().get("cpu_ns") or 0)
        except Exception:  # stopped between the check and the read
            continue
    return out


class Server:
    """The embedded server running in this process (in C threads, without the GIL).

    ``with Server(tls=True) as srv: ...`` starts it and stops it on exit;
    ``start()`` and ``stop()`` may be called any number of times. With
    ``port=0`` an ephemeral port is chosen (``.port``); with ``tls=True`` a
    test CA and an ECDSA P-256 certificate for 127.0.0.1/localhost signed by
    it are generated (unless ``cert_file``/``key_file`` are given); the CA is
    written to ``.ca_file`` so clients can verify against it.

    ``request_timeout``: seconds a started request (head and body) or a
    stalled response write may take before the server answers 408 / closes.
    ``keepalive_timeout``: seconds an idle keep-alive connection is kept.
    ``max_head``: request head limit in bytes (larger heads get 431; over
    HTTP/2 it is also SETTINGS_MAX_HEADER_LIST_SIZE).

    ``http2``: speak HTTP/2 too - on TLS when ALPN offers ``h2``, on the plain
    port when a connection starts with the HTTP/2 preface (h2c with prior
    knowledge). The default ``None`` means "when this build has it"
    (``httpbench.features()["http2-server"]``); ``True`` in a build without
    nghttp2 raises ``FeatureUnavailable``. ``h2_max_concurrent_streams`` (1..100000),
    ``h2_initial_window_size`` (0..2147483647) and ``h2_max_frame_size``
    (16384..16777215) are the SETTINGS the server announces.

    ``max_connections``: open connections per worker thread (0: no cap).
    Beyond it a new connection is closed at once, after a ``503`` on plain
    HTTP (a FIN alone on TLS), and counted in ``connections_refused``.

    ``h3``: speak HTTP/3 too (needs ``tls=True``): every worker also listens on
    UDP at the TCP port's number (``.h3_port``, ``.h3_url``), with the same
    certificate, and TLS responses carry ``Alt-Svc: h3=":port"`` (``alt_svc=False``:
    served but not advertised, so clients that follow Alt-Svc stay on TCP). HTTP/3 requests
    count in the same ``stats()`` (``by_protocol["h3"]``, ``stats()["h3"]``) and
    their CPU in the workers' ``cpu_ns``. ``H3Unavailable`` (a
    ``FeatureUnavailable``) in a build without ngtcp2/GnuTLS.

    ``h3_early_data`` (with ``h3`` and ``session_resumption``): HTTP/3 session
    tickets allow 0-RTT; a GET, HEAD or OPTIONS in early data is answered at
    once, any other method gets ``425 Too Early`` (RFC 8470) and the client
    retries after the handshake. A ClientHello replayed within GnuTLS's
    anti-replay window is refused early data. ``False``: resumption without 0-RTT.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = False,
        threads: int = 1,
        cert_file: str | None = None,
        key_file: str | None = None,
        session_resumption: bool = True,
        request_timeout: float = 10.0,
        keepalive_timeout: float = 30.0,
        max_head: int = 16384,
        backlog: int = 4096,
        http2: bool | None = None,
        h2_max_concurrent_streams: int = 100,
        h2_initial_window_size: int = 65535,
        h2_max_frame_size: int = 16384,
        max_connections: int = 0,
        h3: bool = False,
        alt_svc: bool = True,
        h3_early_data: bool = True,
    ) -> None:
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be 0..65535, got {port!r}")
        if not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads!r}")
        if key_file is not None and cert_file is None:
            raise ValueError("key_file needs cert_file")
        for name, value, lo, hi in (
            ("h2_max_concurrent_streams", h2_max_concurrent_streams, 1, H2_MAX_STREAMS),
            ("h2_initial_window_size", h2_initial_window_size, 0, H2_MAX_WINDOW),
            ("h2_max_frame_size", h2_max_frame_size, H2_MIN_FRAME, H2_MAX_FRAME),
            ("max_connections", max_connections, 0, 1 << 24),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise ValueError(f"{name} must be an int in {lo}..{hi}, got {value!r}")
        if (cert_file is not None) and not tls:
            raise ValueError("cert_file/key_file need tls=True")
        if h3:
            if not tls:
                raise ValueError("h3=True needs tls=True (HTTP/3 is always TLS)")
            require_h3_server("h3=True")
        if http2 is None:
            http2 = features()["http2-server"]
        elif http2:
            require_h2_server("Server(http2=True)")
        self.host = host
        self.tls = bool(tls)
        self.threads = threads
        self._opts: dict[str, Any] = dict(
            host=host,
            port=port,
            tls=self.tls,
            threads=threads,
            cert_file=cert_file,
            key_file=key_file,
            session_resumption=bool(session_resumption),
            request_timeout_ms=_ms(request_timeout, "request_timeout"),
            keepalive_timeout_ms=_ms(keepalive_timeout, "keepalive_timeout"),
            max_head=max_head,
            backlog=backlog,
            http2=bool(http2),
            h2_max_concurrent_streams=h2_max_concurrent_streams,
            h2_initial_window_size=h2_initial_window_size,
            h2_max_frame_size=h2_max_frame_size,
            max_connections=max_connections,
            alt_svc=bool(alt_svc),
            http3=bool(h3),
            h3_early_data=bool(h3_early_data),
        )
        self.http2 = bool(http2)
        self.h3 = bool(h3)
        self._handle: Any = None
        self._last: Any = None  # the stopped handle, for stats() after stop()
        self._ca_file: str | None = None
        self._ca_pem: str | None = None
        self._lock = threading.Lock()
        self._cpus: list[int] | None = None

    # -- lifecycle -------------------------------------------------------
    def start(self) -> Server:
        """Bind and start the workers (no-op when running). Returns self."""
        with self._lock:
            if self._handle is not None:
                return self
            handle = self._start_handle()
            try:
                pem = handle.cert_pem
                if pem is not None:
                    fd, path = tempfile.mkstemp(prefix="httpbench-ca-", suffix=".pem")
                    with os.fdopen(fd, "w") as f:
                        f.write(pem)
                    self._ca_file, self._ca_pem = path, pem
            except BaseException:
                handle.stop()
                raise
            self._handle = handle
            # the workers inherited the starting thread's CPUs
            self._cpus = _thread_cpus(0)
            _RUNNING.add(self)
            return self

    def _start_handle(self) -> Any:
        # HTTP/3 binds UDP at the port the kernel chose for TCP; when something holds
        # that number on UDP, another ephemeral port is tried (a given port is not)
        tries = 5 if self._opts["http3"] and self._opts["port"] == 0 else 1
        for i in range(tries):
            try:
                return _core.server_start(**self._opts)
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE or i == tries - 1:
                    raise
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Stop the workers and close all connections (no-op when stopped)."""
        with self._lock:
            handle, self._handle = self._handle, None
            if handle is not None:
                handle.stop()
                self._last = handle
            if self._ca_file is not None:
                try:
                    os.unlink(self._ca_file)
                except FileNotFoundError:
                    pass
                self._ca_file = None

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __del__(self) -> None:
        try:
            self.stop()
        except Exception:
            pass

    # -- properties -------------------------------------------------------
    def _running_handle(self) -> Any:
        h = self._handle
        if h is None:
            raise RuntimeError("server is not running (call start() or use it as a context manager)")
        return h

    @property
    def running(self) -> bool:
        """True between start() and stop()."""
        return self._handle is not None

    @property
    def port(self) -> int:
        """The bound TCP port."""
        return int(self._running_handle().port)

    @property
    def h3_port(self) -> int | None:
        """The UDP port HTTP/3 is served on (the TCP port's number), or None without h3."""
        return self.port if self.h3 else None

    @property
    def h3_url(self) -> str | None:
        """Base URL for HTTP/3 (the same as ``url``: one port number for TCP and QUIC),
        or None without h3."""
        return self.url if self.h3 else None

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def url(self) -> str:
        """Base URL without a trailing slash, e.g. ``http://127.0.0.1:41234``."""
        return _url(self.scheme, self.host, self.port)

    @property
    def pid(self) -> int:
        """The serving process (this one)."""
        return os.getpid()

    @property
    def ca_file(self) -> str | None:
        """Path of the server certificate PEM (TLS only; removed on stop)."""
        self._running_handle()
        return self._ca_file

    @property
    def ca_pem(self) -> str | None:
        """The server certificate as PEM text (TLS only)."""
        return self._ca_pem

    @property
    def cpus(self) -> list[int] | None:
        """The CPUs the worker threads may run on (None when stopped or unknown)."""
        return list(self._cpus) if self._handle is not None and self._cpus else None

    def set_cpus(self, cpus: Iterable[int]) -> None:
        """Run the worker threads on ``cpus`` (``ValueError`` for a CPU not allowed).

        ``measure()`` does this itself, next to the measuring thread when one
        request is in flight: a wake-up on another CPU costs a VM far more.
        """
        want = sorted({int(c) for c in cpus})
        self._running_handle().set_cpus(want)
        self._cpus = want

    def stats(self) -> dict[str, Any]:
        """Server counters, read without stopping it.

        Keys: ``requests`` (== sum of ``by_route`` == sum of ``by_status``),
        ``by_route`` {route name: n}, ``by_status`` {code: n} (code 0: no
        response - the reset route, or the client left before the answer),
        ``client_gone`` (the requests in ``by_status[0]`` whose client closed
        or reset the connection before the answer began), ``bytes_in``/``bytes_out``
        (TLS: plaintext), ``connections_accepted``/``_closed``/``_active``,
        ``tls_handshakes``, ``tls_resumed``, ``tls_handshake_errors``,
        ``connections_refused`` (closed at accept beyond ``max_connections``),
        ``idle_timeouts``, ``body_bytes_in``, ``threads``, ``cpu_ns`` (the
        workers' CPU time) and ``thread_cpu_ns`` (per worker). Requests to
        ``/__stats`` are not counted. After stop(), the final counters.

        Per protocol: ``by_protocol`` {"http/1.1": requests, "h2": streams}
        (their sum is ``requests``), ``connections_by_protocol`` {"http/1.1": n,
        "h2": n} (connections counted once their protocol is decided), and
        ``h2`` {``streams`` opened, ``streams_reset_sent``,
        ``streams_reset_received``, ``goaway_sent``, ``protocol_errors``,
        ``refused_streams``, ``floods`` (sessions ended with
        GOAWAY(ENHANCE_YOUR_CALM) for a flood of frames: of those that ask no
        work, 10,000 pass at once and 1,000/s after),
        ``settings`` {``max_concurrent_streams``,
        ``initial_window_size``, ``max_frame_size``}}.

        With ``h3``: ``by_protocol["h3"]`` (HTTP/3 request streams, also in
        ``requests``, ``by_route``, ``by_status``, ``body_bytes_in`` and
        ``client_gone``), ``connections_by_protocol["h3"]`` (QUIC connections
        accepted; not in ``connections_accepted``, which counts TCP), and ``h3``
        {``streams``, ``connections_closed``, ``handshakes``, ``resumed`` (TLS
        sessions resumed from a ticket), ``early_data`` (requests answered from
        0-RTT data), ``early_rejected`` (requests in 0-RTT data answered 425
        Too Early), ``handshake_errors``, ``idle_timeouts``, ``errors`` (connections ended
        by a QUIC or HTTP/3 error), ``streams_reset_sent``,
        ``streams_reset_received``, ``refused`` (new connections beyond
        ``max_connections``), ``packets_in``, ``packets_out``, ``bytes_in``,
        ``bytes_out`` (UDP payload bytes, also in ``bytes_in``/``bytes_out``),
        ``dropped`` (datagrams that were not QUIC or were for no connection),
        ``version_negotiations``, ``early_replays`` (0-RTT refused to a replayed
        ClientHello, any worker), ``retries`` (Retry packets sent), ``half_open``
        (connections now without a completed handshake), ``stream_timeouts``
        (request streams not in within ``request_timeout`` of their first byte),
        ``body_buffered`` (upload bytes held now), ``closes_limited``
        (CONNECTION_CLOSEs not repeated while closing), ``cid_slots`` (the
        connection-ID table's size now), ``streams_cut`` (``/sse`` and
        ``/stream`` streams reset: nothing acknowledged for ``request_timeout``)}.

        Streaming routes (docs/streaming.md; HTTP/1.1 and HTTP/2 alike): ``sse``
        {``streams``, ``events``, ``bytes``, ``write_timeouts``}, ``stream``
        {``streams``, ``chunks``, ``bytes``, ``write_timeouts``} (events and
        chunks written whole; write_timeouts: streams cut because their client
        stopped reading) and ``ws`` {``upgrades``, ``bad_upgrades``,
        ``frames_in``, ``frames_out``, ``messages_in``, ``messages_out``,
        ``payload_in``, ``payload_out``, ``pings``, ``pongs``, ``pushed``,
        ``errors``, ``write_timeouts``, ``close_timeouts``, ``deflate``,
        ``compressed`` (permessage-deflate upgrades and messages), ``close_sent`` and
        ``close_received`` ({code: n}; codes outside 1000-1014 under 0)}.
        """
        h = self._handle or self._last
        if h is None:
            raise RuntimeError("server was never started")
        return h.stats()

    def __repr__(self) -> str:
        state = f"url={self.url!r}" if self.running else "stopped"
        return f"<httpbench.Server {state} threads={self.threads}>"


# -- separate process ---------------------------------------------------


class ServerProcess:
    """The embedded server in a child process (see ``start_process``).

    ``.url``, ``.port``, ``.pid``, ``.ca_file``, ``.ca_pem``, ``.stats()``,
    ``.stop()``; a context manager. Stats travel over the child's stdin/stdout
    (not over HTTP), so reading them adds no connection or request.
    """

    def __init__(self, proc: subprocess.Popen[str], info: dict[str, Any], tls: bool) -> None:
        self._proc = proc
        self._lock = threading.Lock()
        self.tls = tls
        self.host: str = info["host"]
        self.port: int = int(info["port"])
        self.url: str = info["url"]
        self.ca_file: str | None = info.get("ca_file")
        self.ca_pem: str | None = info.get("ca_pem")
        self.threads: int = int(info["threads"])
        #: the HTTP/3 listener's UDP port and base URL (``start_process(h3=True)``), else None
        self.h3_port: int | None = info.get("h3_port")
        self.h3_url: str | None = info.get("h3_url")

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc.poll() is None

    def _ask(self, cmd: str) -> str:
        with self._lock:
            if self._proc.poll() is not None:
                raise RuntimeError(f"server process {self.pid} has exited")
            assert self._proc.stdin is not None and self._proc.stdout is not None
            self._proc.stdin.write(cmd + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
            if not line:
                raise RuntimeError(f"server process {self.pid} closed its pipe")
            return line

    @property
    def cpus(self) -> list[int] | None:
        """The CPUs the server process's threads may run on (their union; None when
        it has exited or cannot be read)."""
        if not self.running:
            return None
        got: set[int] = set()
        for tid in _tids(self.pid):
            got |= set(_thread_cpus(tid) or [])
        return sorted(got) or None

    def set_cpus(self, cpus: Iterable[int]) -> None:
        """Run every thread of the server process on ``cpus`` (``OSError`` when it
        cannot be done: a CPU not allowed; ``RuntimeError`` once it has exited)."""
        want = {int(c) for c in cpus}
        if not self.running:
            raise RuntimeError(f"server process {self.pid} has exited")
        for tid in _tids(self.pid):
            os.sched_setaffinity(tid, want)

    def stats(self) -> dict[str, Any]:
        """Same dict as ``Server.stats()`` (status codes as int keys)."""
        d = json.loads(self._ask("stats"))
        d["by_status"] = {int(k): v for k, v in d["by_status"].items()}
        for k in ("close_sent", "close_received"):
            if "ws" in d:
                d["ws"][k] = {int(c): v for c, v in d["ws"][k].items()}
        return d

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the child (idempotent); kills it if it does not exit in time."""
        p = self._proc
        if p.poll() is None:
            try:
                assert p.stdin is not None
                p.stdin.write("stop\n")
                p.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout)
        for f in (p.stdin, p.stdout):
            try:
                if f:
                    f.close()
            except OSError:
                pass

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __del__(self) -> None:
        try:
            self.stop(timeout=1.0)
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<httpbench.ServerProcess pid={self.pid} url={self.url!r}>"


def start_process(
    tls: bool = False,
    threads: int = 1,
    host: str = "127.0.0.1",
    port: int = 0,
    timeout: float = 15.0,
    cpu: int | None = None,
    h3: bool = False,
    **options: Any,
) -> ServerProcess:
    """Start the embedded server in a fresh Python process and wait until it
    listens. ``options`` are further ``Server`` keyword arguments
    (``session_resumption``, ``request_timeout``, ...). ``cpu`` pins the child
    to one CPU (sched_setaffinity) when given.

    ``h3=True`` (with ``tls=True``): HTTP/3 too, on UDP at the TCP port's number
    (``.h3_port``, ``.h3_url``), with the same certificate (see ``Server``);
    ``H3Unavailable`` in a build without HTTP/3."""
    cfg = dict(options, tls=tls, threads=threads, host=host, port=port, h3=bool(h3))
    Server(**cfg)  # validate the arguments here, with a proper traceback
    cmd = [sys.executable, "-m", "httpbench._server", "--child", json.dumps(cfg)]
    # stderr to a file, not a pipe: nobody drains it while the child runs
    errf = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errf,
        text=True,
    )
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(proc.pid, {cpu})
    assert proc.stdout is not None
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    line = result[0] if result else ""
    if not line:
        proc.kill()
        proc.wait(5)
        errf.seek(0)
        err = errf.read().strip()
        errf.close()
        raise RuntimeError(f"server process failed to start: {err or 'timed out'}")
    errf.close()  # the child keeps its own descriptor
    info = json.loads(line)
    if "error" in info:
        proc.wait(5)
        raise OSError(info.get("errno") or 0, info["error"])
    sp = ServerProcess(proc, info, tls)
    _PROCESSES.add(sp)
    return sp


def _child_main(cfg_json: str) -> int:
    """Body of the child process: serve until "stop" or EOF on stdin."""
    cfg = json.loads(cfg_json)
    # The parent stops us via the pipe; a terminal's Ctrl-C to the group
    # should not kill us before the parent asks.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        srv = Server(**cfg).start()
    except OSError as exc:
        print(json.dumps({"error": str(exc), "errno": exc.errno}), flush=True)
        return 1
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    info = {
        "host": srv.host,
        "port": srv.port,
        "url": srv.url,
        "ca_file": srv.ca_file,
        "ca_pem": srv.ca_pem,
        "threads": srv.threads,
        "pid": os.getpid(),
    }
    if srv.h3:
        info["h3_port"] = srv.h3_port
        info["h3_url"] = srv.h3_url
    print(json.dumps(info), flush=True)
    try:
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "stats":
                print(json.dumps(srv.stats()), flush=True)
            elif cmd == "stop":
                break
            else:
                print(json.dumps({"error": f"unknown command {cmd!r}"}), flush=True)
    finally:
        srv.stop()
    return 0


# -- `httpbench serve` --------------------------------------------------


def cli_main(argv: list[str]) -> int:
    """``httpbench serve``: run the server in the foreground until Ctrl-C."""
    ap = argparse.ArgumentParser(
        prog="httpbench serve",
        description="Run the embedded HTTP/HTTPS test server in the foreground (Ctrl-C stops it).",
    )
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 = ephemeral)")
    ap.add_argument("--tls", action="store_true", help="serve HTTPS (a generated test CA unless --cert)")
    ap.add_argument("--threads", type=int, default=1, help="worker threads (default 1)")
    ap.add_argument("--cert", dest="cert_file", help="PEM certificate (with --tls)")
    ap.add_argument("--key", dest="key_file", help="PEM private key (with --tls)")
    ap.add_argument(
        "--no-session-resumption", action="store_true", help="TLS: full handshakes only"
    )
    ap.add_argument(
        "--request-timeout", type=float, default=10.0, help="seconds per request (default 10)"
    )
    h2 = ap.add_mutually_exclusive_group()
    h2.add_argument("--h2", action="store_true",
                    help="require HTTP/2 (h2 / h2c; exit 2 when this build has no HTTP/2 server)")
    h2.add_argument("--no-h2", action="store_true",
                    help="HTTP/1.1 only (default: h2 / h2c too when the build has them)")
    ap.add_argument("--h2-max-streams", type=int, default=100, metavar="N",
                    help="h2 SETTINGS_MAX_CONCURRENT_STREAMS (default 100)")
    ap.add_argument("--h2-window", type=int, default=65535, metavar="N",
                    help="h2 SETTINGS_INITIAL_WINDOW_SIZE in bytes (default 65535)")
    ap.add_argument("--h2-max-frame", type=int, default=16384, metavar="N",
                    help="h2 SETTINGS_MAX_FRAME_SIZE in bytes (default 16384)")
    ap.add_argument("--max-connections", type=int, default=0, metavar="N",
                    help="open connections per worker thread; more are refused (default 0: no cap)")
    ap.add_argument("--h3", action="store_true",
                    help="HTTP/3 too, on UDP at the same port (needs --tls; exit 2 when this "
                         "build has no HTTP/3 server)")
    ap.add_argument("--no-h3-early-data", action="store_true",
                    help="HTTP/3 session resumption without 0-RTT (default: GET/HEAD/OPTIONS "
                         "in 0-RTT answered, other methods 425 Too Early)")
    ap.add_argument("--duration", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.h2 and not features()["http2-server"]:
        sys.stderr.write(f"httpbench serve: --h2: {H2_SERVER_MISSING}\n")
        return 2
    if args.h3 and not args.tls:
        sys.stderr.write("httpbench serve: --h3 needs --tls\n")
        return 2
    if args.h3 and not features()["http3-server"]:
        sys.stderr.write(f"httpbench serve: --h3: {H3_MISSING}\n")
        return 2
    srv: Server | None = None
    try:
        srv = Server(
            host=args.host,
            port=args.port,
            tls=args.tls,
            threads=args.threads,
            cert_file=args.cert_file,
            key_file=args.key_file,
            session_resumption=not args.no_session_resumption,
            request_timeout=args.request_timeout,
            http2=False if args.no_h2 else None,
            h2_max_concurrent_streams=args.h2_max_streams,
            h2_initial_window_size=args.h2_window,
            h2_max_frame_size=args.h2_max_frame,
            max_connections=args.max_connections,
            h3=args.h3,
            h3_early_data=not args.no_h3_early_data,
        )
        srv.start()
    except (OSError, ValueError, _core.HttpbenchError) as exc:
        sys.stderr.write(f"httpbench serve: {exc}\n")
        if srv is not None:
            srv.stop()
        return 1
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    # Ctrl-C and SIGTERM only set the event, so a signal arriving at any
    # point (even mid-print) ends in the same clean stop.
    old_int = signal.signal(signal.SIGINT, on_signal)
    old_term = signal.signal(signal.SIGTERM, on_signal)
    try:
        protos = "HTTP/1.1" + ((" and h2" if srv.tls else " and h2c") if srv.http2 else "")
        print(f"httpbench server listening on {srv.url} ({srv.threads} thread(s), {protos})",
              flush=True)
        if srv.h3:
            print(f"HTTP/3 on UDP port {srv.h3_port}: {srv.h3_url}", flush=True)
        if srv.ca_file:
            print(f"CA certificate: {srv.ca_file}", flush=True)
        print("routes: / /bytes/N /chunked/N /sink /echo /delay/MS /status/CODE /drip/N "
              "/fault/... /__stats; Ctrl-C stops", flush=True)
        deadline = None if args.duration is None else time.monotonic() + args.duration
        while not stop.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                break
            stop.wait(0.2)
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
        st = srv.stats()
        srv.stop()
        conns = st["connections_accepted"] + st.get("connections_by_protocol", {}).get("h3", 0)
        print(
            f"\nstopped: {st['requests']} requests, {conns} connections, "
            f"server CPU {st['cpu_ns'] / 1e9:.3f} s",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        raise SystemExit(_child_main(sys.argv[2]))
    raise SystemExit(cli_main(sys.argv[1:]))
