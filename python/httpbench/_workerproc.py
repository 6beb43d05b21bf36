"""Compare worker processes: how one is started (forked from a pre-imported
zygote, or a new interpreter), talked to (JSON lines over its stdin and a
result pipe, each reply against a deadline), stopped, and the environment it
inherits (the malloc counter preloaded, loopback kept off proxies)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from typing import Any

__all__ = ["WorkerFailed", "WorkerProc", "Zygote", "isolated_env", "preload_library", "worker_env"]


class WorkerFailed(Exception):
    """A worker crashed, hung or reported an error; ``stderr`` holds its last output."""

    def __init__(self, message: str, stderr: str = "", kind: str = "worker-failed") -> None:
        super().__init__(message)
        self.stderr = stderr
        self.kind = kind




class Zygote:
    """A pre-imported Python process that forks fresh workers (see ``_zygote``).

    Started once per run with the workers' environment; saves every worker
    the interpreter start and the httpbench import (~0.3 s of CPU each).
    """

    def __init__(self, env: dict[str, str], python: str = sys.executable) -> None:
        import socket

        self.ctl, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.errfile = tempfile.TemporaryFile(prefix="httpbench-zygote-err-")
        try:
            self.proc = subprocess.Popen(
                [python, "-m", "httpbench._worker", "--zygote",
                 "--control-fd", str(child.fileno())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.errfile,
                pass_fds=(child.fileno(),), env=env, close_fds=True,
            )
        finally:
            child.close()
        self.ctl.settimeout(60)
        self.buf = b""

    def _reply(self) -> str:
        while b"\n" not in self.buf:
            chunk = self.ctl.recv(4096)
            if not chunk:
                self.errfile.seek(0)
                err = self.errfile.read().decode("utf-8", "replace")[-1500:]
                raise OSError(f"worker zygote exited: {err}")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode()

    def spawn(self, sock_fd: int, err_fd: int) -> int:
        """Fork a worker talking on ``sock_fd`` with stderr to ``err_fd``; its pid."""
        import socket

        socket.send_fds(self.ctl, [b"spawn\n"], [sock_fd, err_fd])
        return int(self._reply())

    def status(self, pid: int) -> int | None:
        """Exit code of worker ``pid``, or None while it runs."""
        self.ctl.sendall(f"status {pid}\n".encode())
        r = self._reply()
        return None if r == "running" else int(r)

    def stop(self) -> None:
        """Stop the zygote (closing its socket ends its loop)."""
        with contextlib.suppress(OSError):
            self.ctl.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.errfile.close()


class WorkerProc:
    """One worker process: JSON lines in (job, then commands), JSON lines back.

    With a :class:`Zygote` the worker is forked from it and talks over a Unix
    socket; otherwise it is ``python -m httpbench._worker`` with commands on
    stdin and replies on a private pipe. Either way stdout/stderr of the
    libraries never mix with the replies.
    """

    def __init__(self, job: dict[str, Any], env: dict[str, str], timeout: float,
                 zygote: Zygote | None = None, python: str = sys.executable) -> None:
        self.job = job
        self.timeout = timeout
        self.label = f"{job.get('label') or job['client']}/{job['scenario']['name']}"
        self.errfile = tempfile.TemporaryFile(prefix="httpbench-worker-err-")
        self.zygote = zygote
        self.proc: subprocess.Popen[bytes] | None = None
        self.buf = b""
        self.dead = False
        self.closing = False
        self.exit_code: int | None = None
        self.info: dict[str, Any] = {}
        if zygote is not None:
            import socket

            self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.pid = zygote.spawn(theirs.fileno(), self.errfile.fileno())
            finally:
                theirs.close()
            self.rfd = self.sock.fileno()
        else:
            rfd, wfd = os.pipe()
            try:
                self.proc = subprocess.Popen(
                    [python, "-m", "httpbench._worker", "--result-fd", str(wfd)],
                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self.errfile,
                    pass_fds=(wfd,), env=env, close_fds=True,
                )
            finally:
                os.close(wfd)
            self.rfd = rfd
            self.pid = self.proc.pid
        self.send(job)

    def _write(self, data: bytes) -> None:
        if self.zygote is not None:
            self.sock.sendall(data)
        else:
            assert self.proc is not None and self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send(self, msg: dict[str, Any]) -> None:
        """Write one command line; a dead worker raises WorkerFailed."""
        try:
            self._write((json.dumps(msg) + "\n").encode())
        except (BrokenPipeError, OSError, ValueError):
            raise self._failed("worker died before taking its command", "worker-crashed") from None

    def _wait_exit(self, timeout: float) -> int | None:
        """The worker's exit code once it has exited (None if still running after timeout)."""
        if self.exit_code is not None:
            return self.exit_code
        limit = time.monotonic() + timeout
        while True:
            if self.zygote is not None:
                try:
                    rc = self.zygote.status(self.pid)
                except (OSError, ValueError):
                    # the zygote is gone (e.g. Ctrl-C reached it): probe the pid itself
                    try:
                        os.kill(self.pid, 0)
                        rc = None
                    except ProcessLookupError:
                        rc = -1  # exited, code unknown
                    except OSError:
                        rc = None
            else:
                assert self.proc is not None
                rc = self.proc.poll()
            if rc is not None or time.monotonic() >= limit:
                self.exit_code = rc
                return rc
            time.sleep(0.02)

    def recv(self, timeout: float | None = None) -> dict[str, Any]:
        """The next reply; WorkerFailed on EOF (crash) or after ``timeout`` s (hang)."""
        tmo = self.timeout if timeout is None else timeout
        limit = time.monotonic() + tmo
        while b"\n" not in self.buf:
            left = limit - time.monotonic()
            if left <= 0:
                self.kill()
                raise self._failed(f"no answer within {tmo:g} s (hung); killed",
                                   kind="worker-hung")
            r, _, _ = select.select([self.rfd], [], [], min(left, 1.0))
            if not r:
                continue
            try:
                chunk = os.read(self.rfd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                rc = self._wait_exit(5)
                self.dead = True
                raise self._failed(f"worker exited with code {rc} without answering",
                                   kind="worker-crashed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def _failed(self, what: str, kind: str = "worker-failed") -> WorkerFailed:
        self.dead = True
        return WorkerFailed(f"{self.label}: {what}", self.stderr_tail(), kind)

    def stderr_tail(self, limit: int = 2000) -> str:
        """The last ``limit`` characters the worker wrote to stderr."""
        try:
            self.errfile.flush()
            size = self.errfile.seek(0, os.SEEK_END)
            self.errfile.seek(max(0, size - limit))
            return self.errfile.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def kill(self) -> None:
        """Kill this worker (only this pid)."""
        self.dead = True
        if self._wait_exit(0) is not None:
            return
        with contextlib.suppress(ProcessLookupError, OSError):
            os.kill(self.pid, 9)
        self._wait_exit(5)

    def request_close(self) -> None:
        """Ask the worker to exit (without waiting; see :meth:`close`)."""
        if self.closing:
            return
        self.closing = True
        if not self.dead:
            with contextlib.suppress(WorkerFailed):
                self.send({"cmd": "close"})
        if self.zygote is not None:
            with contextlib.suppress(OSError):
                import socket

                self.sock.shutdown(socket.SHUT_WR)
        else:
            with contextlib.suppress(OSError):
                assert self.proc is not None and self.proc.stdin is not None
                self.proc.stdin.close()

    def close(self) -> None:
        """Ask the worker to exit, kill it if it does not within 10 s."""
        self.request_close()
        if self.dead or self._wait_exit(10) is None:
            self.kill()
        if self.zygote is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
        else:
            with contextlib.suppress(OSError):
                os.close(self.rfd)
        with contextlib.suppress(OSError, ValueError):
            self.errfile.close()


_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY",
               "ALL_PROXY")
_LOOPBACK = ("127.0.0.1", "localhost")


def _bypassed(no_proxy: str) -> bool:
    items = {x.strip().lower() for x in no_proxy.split(",") if x.strip()}
    return "*" in items or all(h in items for h in _LOOPBACK)


def worker_env(env: dict[str, str], preload: str | None = None
               ) -> tuple[dict[str, str], dict[str, str]]:
    """(environment for every worker, {variable: what changed and why}).

    Workers get the caller's environment as it is. Two changes, the same for
    every client: the malloc counter is preloaded when native allocations are
    counted, and when a proxy is configured without a loopback bypass, the
    loopback addresses are added to ``NO_PROXY``/``no_proxy`` (the target is
    local; a proxy would not reach it). Proxy variables themselves stay, so a
    library that looks them up per request pays for it as its users do.
    """
    out = dict(env)
    changes: dict[str, str] = {}
    if any(out.get(k) for k in _PROXY_VARS):
        for k in ("NO_PROXY", "no_proxy"):
            cur = out.get(k, "")
            if not _bypassed(cur):
                have = [x.strip() for x in cur.split(",") if x.strip()]
                add = [h for h in _LOOPBACK if h not in {x.lower() for x in have}]
                out[k] = ",".join(have + add)
                changes[k] = (f"{','.join(add)} added: a proxy is configured and the target "
                              "is on loopback")
    if preload:
        old = out.get("LD_PRELOAD")
        out["LD_PRELOAD"] = preload + (":" + old if old else "")
        changes["LD_PRELOAD"] = "native allocation counter preloaded"
    return out, changes


def isolated_env(env: dict[str, str]) -> dict[str, str]:
    """A worker environment for a spec's interpreter: nothing from this one leaks in."""
    out = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    out["PYTHONNOUSERSITE"] = "1"
    return out



def preload_library() -> str | None:
    """Path of the native malloc-counting preload library, or None when not built."""
    try:
        from ._measure import native_alloc_preload_path
    except ImportError:
        return None
    try:
        p = native_alloc_preload_path()
    except (OSError, RuntimeError):
        return None
    return p if p and os.path.exists(p) else None


