"""One compare worker: a fresh process running one (client, scenario).

Started by the runner as ``python -m httpbench._worker --result-fd FD``. The
first line on stdin is the job (JSON): client, scenario, target URL, CA file,
CPU to pin to, warm-up count, scratch directory. The worker sets up the
adapter(s), checks one response against a reference read with
``http.client``, warms up, and answers ``{"status": "ready", ...}`` on the
result pipe. Each further stdin line is a command: ``{"cmd": "run", "n": N}``
or ``{"cmd": "run", "duration": S, "min_n": K}`` measures one round and
answers ``{"status": "ok", "result": MeasureResult.to_dict(), ...}`` (with
``"control": U`` also ``control_ns``: U units of the fixed-work control, the
machine-speed index, run after the round);
``{"cmd": "deterministic", "n": N, "timeout": S}`` counts instructions and
syscalls of N requests in counting children (see ``_deterministic``) and
answers ``{"status": "ok", "fields": ..., "metadata": ...}``;
``{"cmd": "close"}`` (or EOF) closes the adapter and exits.

Results travel only over the result pipe, so whatever a library prints on
stdout/stderr cannot corrupt them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ._workerjob import AdapterCall, Worker, payload, serve
from ._zygote import run_zygote

__all__ = ["AdapterCall", "Worker", "main", "payload", "serve"]


def _send(fd: int, msg: dict[str, Any]) -> None:
    data = (json.dumps(msg, allow_nan=False, default=str) + "\n").encode()
    while data:
        k = os.write(fd, data)
        data = data[k:]


def main(argv: list[str] | None = None) -> int:
    """Worker entry point: ``--result-fd FD`` (job and commands on stdin) or ``--zygote``."""
    ap = argparse.ArgumentParser(prog="httpbench._worker")
    ap.add_argument("--result-fd", type=int)
    ap.add_argument("--zygote", action="store_true")
    ap.add_argument("--control-fd", type=int)
    args = ap.parse_args(argv)
    if args.zygote:
        if args.control_fd is None:
            ap.error("--zygote needs --control-fd")
        return run_zygote(args.control_fd)
    if args.result_fd is None:
        ap.error("--result-fd is required")
    fd = args.result_fd
    return serve(iter(sys.stdin.buffer), lambda m: _send(fd, m))


if __name__ == "__main__":
    raise SystemExit(main())
