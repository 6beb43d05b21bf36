"""The zygote: a pre-imported Python process that forks fresh compare workers.

Starting a Python interpreter and importing httpbench costs ~0.3 s of CPU
per worker. The runner therefore starts one "zygote" (python -m
httpbench._worker --zygote) with the workers' environment (LD_PRELOAD of the
malloc counter, PYTHONPATH); it imports what every worker needs and forks a
fresh worker per request. Each worker still is a new process that imported
nothing but httpbench and the standard library; its client library is
imported after the fork. Control protocol (a Unix socket): the runner sends
"spawn\n" with two file descriptors (the worker's socket and its stderr
file) and gets "<pid>\n" back; "status <pid>\n" answers "<exit code>" or
"running".
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

from ._workerjob import serve

__all__ = ["run_zygote"]


def run_zygote(ctl_fd: int) -> int:
    """Serve spawn/status requests on the control socket ``ctl_fd`` until it closes."""
    import signal
    import socket

    ctl = socket.socket(fileno=ctl_fd)
    exited: dict[int, int] = {}

    def reap() -> None:
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            exited[pid] = os.waitstatus_to_exitcode(st)

    # modules every worker uses, imported once here
    from . import _adapters, _measure, _results, _scenarios  # noqa: F401

    buf = b""
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 4096, 4)
        except OSError:
            return 0
        if not msg:
            return 0
        buf += msg
        while b"\n" in buf:
            line, _, buf = buf.partition(b"\n")
            word = line.decode().split()
            if not word:
                continue
            if word[0] == "spawn" and len(fds) == 2:
                sock_fd, err_fd = fds
                fds = []
                pid = os.fork()
                if pid == 0:  # the worker
                    code = 70
                    try:
                        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                        ctl.close()
                        null = os.open(os.devnull, os.O_RDWR)
                        os.dup2(null, 0)
                        os.dup2(null, 1)
                        os.dup2(err_fd, 2)
                        os.close(null)
                        os.close(err_fd)
                        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
                        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
                        sock = socket.socket(fileno=sock_fd)
                        rfile = sock.makefile("rb")

                        def send(m: dict[str, Any], _s: Any = sock) -> None:
                            _s.sendall((json.dumps(m, allow_nan=False, default=str)
                                        + "\n").encode())

                        code = serve(iter(rfile), send)
                    except BaseException:
                        traceback.print_exc()
                    finally:
                        sys.stderr.flush()
                        os._exit(code)
                os.close(sock_fd)
                os.close(err_fd)
                ctl.sendall(f"{pid}\n".encode())
            elif word[0] == "status" and len(word) == 2:
                reap()
                pid = int(word[1])
                ctl.sendall(f"{exited[pid] if pid in exited else 'running'}\n".encode())
            for fd in fds:
                os.close(fd)
            fds = []
        reap()

