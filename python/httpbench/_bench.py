"""The native load generator from Python: ``bench()``, the ``httpbench URL`` CLI
and its ab-style report.

``bench()`` checks its arguments and has the core split the URL and serialize
the request head (``_core.split_url``/``build_request_head``, the same code the
native Client uses), then hands everything to ``_core.run_bench``, which runs the C engine
(csrc/core/hb_engine.c) without the GIL and returns raw counters and
histograms; they become a :class:`~httpbench.BenchResult`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import _core, _machine
from ._metadata import system_metadata
from ._results import BenchConfig, BenchResult
from .report import format_report, format_spectrum

__all__ = [
    "Target",
    "Progress",
    "parse_url",
    "bench",
    "format_report",
    "format_spectrum",
    "cli_main",
]

DEFAULT_TIMEOUT = 30.0  # seconds, per request (connect to last byte)
DEFAULT_DURATION = 10.0  # seconds, when neither n nor duration is given
LATE_THRESHOLD_NS = 10_000_000  # rate mode: a send this late counts as missed (engine default)



@dataclass(frozen=True, slots=True)
class Target:
    """A parsed ``http(s)://`` URL: what to connect to and what to send."""

    url: str
    scheme: str
    host: str  # without brackets for IPv6
    port: int
    target: str  # path + query as sent in the request line
    host_header: str  # Host header value (port omitted when it is the default)
    authorization: str | None = None  # Basic credentials from user:pass@ in the URL

    @property
    def tls(self) -> bool:
        """True for https."""
        return self.scheme == "https"


def parse_url(url: str) -> Target:
    """Parse an ``http://`` or ``https://`` URL; ValueError with a clear message otherwise."""
    if not isinstance(url, str):
        raise ValueError("URL must be a non-empty string such as http://127.0.0.1:8080/")
    url = url.strip()
    return Target(url, *_core.split_url(url))


class Progress(NamedTuple):
    """A progress snapshot handed to a ``progress`` callback (about 5 per second)."""

    completed: int  # requests accounted so far (responses + errors)
    ok: int  # 2xx responses
    failed: int  # errors + non-2xx responses
    bytes_in: int
    elapsed_s: float  # since the measured window started (0 while warming up)
    warming_up: bool
    total: int | None  # n, when the run is count-bound
    duration_s: float | None  # the duration, when the run is time-bound
    # Latency percentiles of the responses so far, from a coarse copy of the histogram:
    # the exact value lies in [p, p * 1.0625). 0 until the first response.
    p50_ns: int = 0
    p99_ns: int = 0


def _norm_headers(headers: Any) -> list[tuple[str, str]]:
    if headers is None:
        return []
    if isinstance(headers, Mapping):
        items = list(headers.items())
    else:
        items = []
        for h in headers:
            if isinstance(h, str):
                if ":" not in h:
                    raise ValueError(f"header {h!r} must look like 'Name: value'")
                k, v = h.split(":", 1)
                items.append((k, v))
            else:
                k, v = h
                items.append((k, v))
    # Names and values are checked where the head is built (_core.build_request_head).
    return [(str(k).strip(), str(v).strip()) for k, v in items]


def _seconds(v: Any, name: str, allow_none: bool = True) -> float | None:
    if v is None:
        if allow_none:
            return None
        raise ValueError(f"{name} is required")
    if isinstance(v, str):
        from ._units import parse_duration

        return parse_duration(v, default_unit="s", unit="s")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name} must be a number of seconds or a string like '10s'")
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0")
    return float(v)


def _int_arg(v: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int")
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, got {v}")
    return v


def _stderr_progress() -> Callable[[Progress], None]:
    """A one-line progress display on stderr (\\r-rewritten)."""
    from . import _units as U

    last = [0.0, 0]

    def show(p: Progress) -> None:
        now = time.monotonic()
        dt = now - last[0] if last[0] else 0.0
        rate = (p.completed - last[1]) / dt if dt > 0 else 0.0
        last[0], last[1] = now, p.completed
        if p.warming_up:
            line = "warming up..."
        else:
            if p.total:
                what = f"{p.completed}/{p.total} requests ({100.0 * p.completed / p.total:.0f}%)"
            else:
                what = f"{p.completed} requests"
            line = f"{what}  {rate:,.0f} req/s  {p.failed} failed"
            if p.p50_ns:
                line += (f"  p50 {U.format_duration(p.p50_ns)}"
                         f"  p99 {U.format_duration(p.p99_ns)}")
            line += f"  {p.elapsed_s:.1f}s"
            if p.duration_s:
                line += f"/{p.duration_s:.0f}s"
                left = p.duration_s - p.elapsed_s
            else:
                left = (p.total - p.completed) / rate if p.total and rate > 0 else None
            if left is not None:
                line += f"  {max(0.0, left):.0f}s left"
        sys.stderr.write("\r\x1b[2K" + line)
        sys.stderr.flush()

    return show


def bench(
    url: str,
    *,
    n: int | None = None,
    duration: float | str | None = None,
    concurrency: int = 1,
    threads: int = 1,
    rate: float | None = None,
    keepalive: bool = True,
    pipeline: int = 1,
    method: str = "GET",
    headers: Mapping[str, str] | Iterable[Any] | None = None,
    body: bytes | str | os.PathLike[str] | None = None,
    timeout: float | str | None = DEFAULT_TIMEOUT,
    verify: bool = True,
    ca_file: str | os.PathLike[str] | None = None,
    warmup: float | str = 0,
    progress: bool | Callable[[Progress], Any] | None = False,
    session_resumption: bool = True,
    server_name: str | None = None,
    tls_max_version: str | None = None,
    lenient: bool = False,
    label: str = "",
    cluster: Any = None,
    http2: bool = False,
    streams: int = 1,
) -> BenchResult:
    """Load-test ``url`` with the native (C, epoll) load generator.

    Closed loop by default: ``concurrency`` connections spread over ``threads``
    event-loop threads, each keeping ``pipeline`` requests in flight, until
    exactly ``n`` requests are accounted for (successes + errors) or for
    ``duration`` seconds (default 10 s when neither is given). ``rate``
    (requests/s) switches to constant-rate mode: sends follow a fixed schedule
    and ``latency`` is measured from each request's intended send time
    (coordinated-omission corrected); ``latency_uncorrected`` from the actual
    send. ``keepalive=False`` opens a new connection per request.

    ``body``: bytes (or str, sent as UTF-8) or a path (``os.PathLike``), which is
    streamed from the file for every request. ``headers``: a mapping, or pairs,
    or "Name: value" strings. ``timeout``: seconds per request (None/0: none).
    ``verify``/``ca_file``: HTTPS certificate verification (on by default;
    ``verify=False`` is insecure). ``warmup``: seconds of load that are sent but
    not recorded. ``progress``: True for a stderr progress line, or a callable
    receiving :class:`Progress` snapshots. ``session_resumption``: offer the
    last TLS session on new connections; ``server_name``: SNI/verification name
    (default: the URL's host); ``tls_max_version``: "1.2" or "1.3".
    ``lenient``: accept bare-LF line ends in responses (RFC 9112 2.2); strict
    parsing counts them as protocol errors.

    ``http2``: speak HTTP/2 (h2c with prior knowledge for ``http://``, ALPN
    "h2" for ``https://``), with ``streams`` concurrent streams per connection
    (h2load's ``-m``); ``concurrency`` connections × ``streams`` requests are in
    flight. Stream errors are counted as ``rst_stream``, ``goaway`` and
    ``protocol``. A server that does not negotiate HTTP/2 raises ProtocolError
    (the run never falls back to HTTP/1.1).

    ``cluster``: run on Dask workers instead (a ``dask.distributed.Client``, a
    scheduler address such as ``tcp://host:8786``, or ``"local:N"`` for N local
    worker processes; needs ``pip install "httpbench[distributed]"``). The totals
    (``n``, ``rate``, ``concurrency``, ``threads``) are split across the workers
    and the result is their exact merge, with each worker's in ``workers``;
    ``progress`` is not shown for such runs. See docs/distributed.md.

    Ctrl-C stops the run within ~100 ms and returns the partial result with
    ``interrupted=True``. Raises ValueError/TypeError for bad arguments,
    ConnectError when the host cannot be resolved, TLSError for a bad CA file.
    Connection failures during the run are counted in ``error_counts``.
    """
    tgt = parse_url(url)
    if n is not None:
        n = _int_arg(n, "n", 1, 2**62)
    dur = _seconds(duration, "duration")
    if n is not None and dur is not None:
        raise ValueError("give n or duration, not both")
    if n is None and dur is None:
        dur = DEFAULT_DURATION
    if dur is not None and dur <= 0:
        raise ValueError("duration must be > 0")
    concurrency = _int_arg(concurrency, "concurrency", 1, 1_000_000)
    threads = _int_arg(threads, "threads", 1, 1024)
    pipeline = _int_arg(pipeline, "pipeline", 1, 1024)
    if rate is not None:
        if isinstance(rate, bool) or not isinstance(rate, (int, float)):
            raise TypeError("rate must be a number (requests per second)")
        if not math.isfinite(rate) or rate <= 0:
            raise ValueError("rate must be a finite number > 0 (requests per second)")
        rate = float(rate)
    if not keepalive and pipeline > 1:
        raise ValueError("pipelining needs keep-alive connections")
    streams = _int_arg(streams, "streams", 1, 1024)
    http2 = bool(http2)
    if http2:
        if pipeline > 1:
            raise ValueError("pipeline is HTTP/1.1 pipelining; with http2=True use streams")
        if not keepalive and streams > 1:
            raise ValueError("keepalive=False opens a connection per request: streams must be 1")
        if cluster is not None:
            raise ValueError("http2=True is not supported with cluster")
        if isinstance(body, os.PathLike):
            raise ValueError("http2=True sends the body from memory: pass bytes, not a path")
    elif streams > 1:
        raise ValueError("streams (concurrent streams per connection) needs http2=True")
    if not isinstance(method, str):
        raise ValueError(f"invalid method {method!r}")
    tmo = _seconds(timeout, "timeout") or 0.0
    wup = _seconds(warmup, "warmup") or 0.0

    hdrs = _norm_headers(headers)

    body_bytes: bytes | None = None
    body_file: str | None = None
    body_len = -1  # no body: the core adds Content-Length: 0 where a method expects one
    if body is not None:
        if isinstance(body, str):
            body_bytes = body.encode()
        elif isinstance(body, (bytes, bytearray, memoryview)):
            body_bytes = bytes(body)
        elif isinstance(body, os.PathLike):
            body_file = os.fspath(body)
            try:
                st = os.stat(body_file)
            except OSError as exc:
                raise ValueError(f"body file {body_file!r}: {exc.strerror}") from None
            body_len = st.st_size
        else:
            raise TypeError("body must be bytes, str or a path (os.PathLike)")
        if body_bytes is not None:
            body_len = len(body_bytes)

    from ._version import __version__

    ua = f"httpbench/{__version__}"
    head = _core.build_request_head(method, tgt.url, hdrs, body_len, bool(keepalive), ua)
    # The same request as HTTP/2 fields; validated here so bad headers fail before the run.
    h2_fields = _core.build_h2_fields(method, tgt.url, hdrs, body_len, ua) if http2 else None

    if cluster is not None:
        from ._distributed import run_distributed

        return run_distributed(
            cluster, url, n=n, duration=dur, concurrency=concurrency, threads=threads,
            rate=rate, warmup=wup, timeout=tmo, label=label, keepalive=keepalive,
            pipeline=pipeline, method=method, headers=hdrs, body=body, verify=verify,
            ca_file=ca_file, session_resumption=session_resumption, server_name=server_name,
            tls_max_version=tls_max_version, lenient=bool(lenient))
    if progress is True:
        progress = _stderr_progress()
    cb: Callable[..., Any] | None = None
    if callable(progress):
        user_cb = progress

        def cb(completed: int, ok: int, failed: int, bytes_in: int, elapsed: float,
               warming: bool, p50_ns: int = 0, p99_ns: int = 0) -> None:
            user_cb(Progress(completed, ok, failed, bytes_in, elapsed, bool(warming), n, dur,
                             p50_ns, p99_ns))
    elif progress not in (None, False):
        raise TypeError("progress must be a bool or a callable")

    kw: dict[str, Any] = dict(
        host=tgt.host, port=tgt.port, tls=tgt.tls, head=head, body=body_bytes,
        body_file=body_file, method_is_head=method.upper() == "HEAD",
        n=n or 0, duration=dur or 0.0, warmup=wup, connections=concurrency, threads=threads,
        pipeline=pipeline, rate=rate or 0.0, keepalive=bool(keepalive), timeout=tmo,
        verify=bool(verify), ca_file=os.fspath(ca_file) if ca_file is not None else None,
        server_name=server_name, session_resumption=bool(session_resumption), progress=cb,
        tls_max_version=tls_max_version, lenient=bool(lenient),
    )
    if http2:
        kw.update(http2=True, h2_fields=h2_fields, pipeline=streams, head=None)
    _raise_nofile()  # each connection is a descriptor: use what the hard limit allows
    raw = _core.run_bench(**kw)
    return _to_result(tgt, raw, method, n, dur, concurrency, threads, rate, keepalive,
                      pipeline, tmo, wup, hdrs, body_len, bool(verify), ca_file, label,
                      http2, streams)


_H2_ERRORS = ("rst_stream", "goaway")  # error kinds only HTTP/2 runs can have


def _to_result(tgt: Target, raw: dict[str, Any], method: str, n: int | None,
               dur: float | None, concurrency: int, threads: int, rate: float | None,
               keepalive: bool, pipeline: int, tmo: float, wup: float,
               hdrs: list[tuple[str, str]], body_len: int, verify: bool, ca_file: Any,
               label: str, http2: bool = False, streams: int = 1) -> BenchResult:
    errors = dict(raw["errors"])
    if not http2:
        for k in _H2_ERRORS:  # always 0: HTTP/1.1 results keep their keys as before
            errors.pop(k, None)
    cfg = BenchConfig(
        n=n, duration_ns=int(dur * 1e9) if dur is not None else None,
        concurrency=concurrency, threads=min(threads, concurrency), rate=rate,
        keepalive=bool(keepalive), pipeline=pipeline,
        timeout_ns=int(tmo * 1e9) if tmo else None, warmup_ns=int(wup * 1e9),
        protocol="h2" if http2 else "http/1.1", streams=streams if http2 else 1,
        extra={"headers": [f"{k}: {v}" for k, v in hdrs], "body_bytes": max(body_len, 0),
               "tls": tgt.tls, "verify": verify,
               "ca_file": os.fspath(ca_file) if ca_file is not None else None},
    )
    meta = {
        "server": raw["server"],
        "host": tgt.host,
        "port": tgt.port,
        "path": tgt.target,
        "doc_length": raw["doc_length"],
        "body_bytes_in": raw["body_bytes"],
        "completed": raw["completed"],
        "status_classes": raw["status_classes"],
        "tls_resumed": raw["tls_resumed"],
        "warmup_requests": raw["warmup_requests"],
        "first_error": raw["first_error"],
        "tls_info": raw["tls_info"],
        "generator": "httpbench",
        **({"late_threshold_ns": LATE_THRESHOLD_NS} if rate else {}),
        **system_metadata(),
    }
    res = BenchResult(
        url=tgt.url,
        latency=raw["latency"],
        duration_ns=int(raw["duration_ns"]),
        method=method,
        config=cfg,
        label=label,
        responses=raw["responses"],
        successes=raw["ok"],
        status_counts=raw["status"],
        error_counts=errors,
        bytes_in=raw["bytes_in"],
        bytes_out=raw["bytes_out"],
        latency_uncorrected=raw["latency_uncorrected"] if rate else None,
        connect=raw["connect"],
        tls=raw["tls"] if tgt.tls else None,
        ttfb=raw["ttfb"],
        processing=raw["processing"],
        connections=raw["connections_opened"],
        reconnects=raw["reconnects"],
        in_flight_at_stop=raw["inflight_at_stop"],
        interrupted=raw["interrupted"],
        cpu_user_ns=raw["cpu_user_ns"],
        cpu_sys_ns=raw["cpu_sys_ns"],
        start_unix_ns=raw["start_unix_ns"],
        end_unix_ns=raw["end_unix_ns"],
        series_responses=tuple(raw["series_ok"]),
        series_errors=tuple(raw["series_err"]),
        metadata=meta,
        setup=raw["setup"],
        sends=raw["sends"],
        sends_late=raw["sends_late"] if rate else None,
        unsent=raw["unsent"] if rate else None,
        connect_attempts=raw["connect_attempts"],
        connect_failures=raw["connect_failures"],
        connect_fd_exhausted=raw["connect_fd_exhausted"],
    )
    _record_machine(res, tgt)
    return res


def _record_machine(res: BenchResult, tgt: Target) -> None:
    """The wake-up calibration and, for a local server this process started, the CPUs
    generator and server ran on, with a note when a per-request figure is within
    WAKEUP_FACTOR of the wake-up round trip (typical at -c 1)."""
    md = res.metadata
    cpus = _machine.usable_cpus()
    if not cpus:
        return
    try:
        wake = _machine.wakeup_cost(cpus)
    except (OSError, ValueError):
        return
    md["wakeup_ns"] = {"same_cpu": wake["same_cpu"], "cross_cpu": wake["cross_cpu"]}
    mod = sys.modules.get("httpbench._server")
    local = tgt.host in ("127.0.0.1", "localhost", "::1")
    srv = next((s for s in (mod.local_servers() if mod is not None and local else [])
                if getattr(s, "port", None) == tgt.port), None)
    if srv is None:
        return
    pl = _machine.observed_placement(srv.cpus, cpus)
    md["placement"] = pl
    limit = _machine.wakeup_limit_ns(md["wakeup_ns"], pl)
    per_req = [v for v in (res.cpu_ns_per_request, res.p50 if res.latency.count else None)
               if v]
    if limit and res.config.concurrency == 1 and per_req and min(per_req) <= limit:
        md["wakeup_note"] = (
            f"a per-request figure is within {_machine.WAKEUP_FACTOR:.0f}x of the machine's "
            f"wake-up round trip ({_machine.placement_text(pl)}; "
            f"{_machine.wakeup_text(md['wakeup_ns'])}): at one connection it is mostly the "
            "cost of waking the other side")


# --------------------------------------------------------------------------
# CLI


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would sys.exit(2) itself
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="httpbench",
        usage="httpbench URL [options]",
        description="Load-test URL with httpbench's native load generator (ab/wrk style).",
    )
    p.add_argument("url", metavar="URL", help="http:// or https:// URL")
    p.add_argument("-n", "--requests", type=int, metavar="N", help="number of requests")
    p.add_argument("-c", "--concurrency", type=int, default=1, metavar="C",
                   help="connections (default 1)")
    p.add_argument("-t", "--threads", type=int, default=1, metavar="T",
                   help="event-loop threads (default 1)")
    p.add_argument("-d", "--duration", metavar="D",
                   help="run length, e.g. 10s, 500ms, 2min (default 10s without -n)")
    p.add_argument("-R", "--rate", type=float, metavar="RPS",
                   help="constant rate in requests/s (coordinated-omission corrected)")
    ka = p.add_mutually_exclusive_group()
    ka.add_argument("-k", "--keepalive", dest="keepalive", action="store_true", default=True,
                    help="reuse connections (the default)")
    ka.add_argument("--no-keepalive", dest="keepalive", action="store_false",
                    help="new connection per request")
    p.add_argument("-H", "--header", action="append", default=[], metavar="'Name: value'",
                   help="extra request header (repeatable)")
    p.add_argument("-X", "--method", default=None, help="request method (default GET; POST with -p)")
    p.add_argument("-p", "--post-file", metavar="FILE", help="file to send as the request body")
    p.add_argument("-T", "--content-type", metavar="TYPE", help="Content-Type of the body")
    p.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    p.add_argument("--ca-file", metavar="FILE", help="CA bundle (PEM) to verify the server")
    p.add_argument("--timeout", metavar="S", default="30s",
                   help="per-request timeout, e.g. 5s (0 = none; default 30s)")
    p.add_argument("--pipeline", type=int, default=1, metavar="P",
                   help="requests in flight per connection (default 1)")
    p.add_argument("--h2", action="store_true",
                   help="HTTP/2: h2c with prior knowledge for http://, ALPN h2 for https:// "
                        "(fails when the server does not speak it)")
    p.add_argument("-m", "--streams", dest="streams", metavar="STREAMS", default=None,
                   help="with --h2: concurrent streams per connection (h2load's -m; default 1). "
                        "ab's -m METHOD still works without --h2; prefer -X METHOD")
    p.add_argument("--warmup", metavar="D", default="0",
                   help="warm-up period not recorded, e.g. 2s")
    p.add_argument("--latency", action="store_true", help="print the full latency spectrum")
    p.add_argument("--json", metavar="FILE", help="also save the result as JSON")
    p.add_argument("--threshold", action="append", default=[], metavar="EXPR",
                   help="fail (exit 1) unless EXPR holds, e.g. 'p99<2ms', 'errors<1%%', "
                        "'non_2xx=0', 'rps>5000' (repeatable; metrics as in assert_budget)")
    ab = p.add_argument_group("ApacheBench spellings")
    ab.add_argument("-s", dest="timeout", metavar="S", help="ab: timeout in seconds (= --timeout)")
    ab.add_argument("-i", dest="head", action="store_true", help="ab: HEAD requests (= -X HEAD)")
    ab.add_argument("-e", dest="csv", metavar="FILE",
                    help="ab: write the percentiles (0..100) as CSV to FILE")
    ab.add_argument("-l", dest="ab_l", action="store_true",
                    help="ab: accept varying response lengths (always the case here)")
    ab.add_argument("-g", dest="ab_g", metavar="FILE", help=argparse.SUPPRESS)
    ab.add_argument("-v", dest="ab_v", metavar="LEVEL", help=argparse.SUPPRESS)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    dk = p.add_mutually_exclusive_group()
    dk.add_argument("--dask", metavar="ADDRESS",
                    help="run on the workers of this Dask scheduler (tcp://host:8786)")
    dk.add_argument("--dask-local", type=int, metavar="N",
                    help="run on N local Dask worker processes")
    return p


def load_test_help() -> str:
    """The option list of ``httpbench URL`` (shown by ``httpbench --help``)."""
    text = _parser().format_help()
    return "load-test " + text[text.index("options:"):]


def _dur_arg(text: str | None, what: str) -> float | None:
    if text is None:
        return None
    from ._units import parse_duration

    try:
        return parse_duration(text, default_unit="s", unit="s")
    except ValueError as exc:
        raise _UsageError(f"{what}: {exc}") from None


# ab flags with no direct counterpart: what to use instead.
_AB_REJECTED = {
    "ab_g": "-g (gnuplot data per request) is not recorded: httpbench keeps histograms; "
            "use --json FILE, or -e FILE for the percentiles as CSV",
    "ab_v": "-v (verbosity) has no levels here: the report always shows the first error; "
            "use --latency for the full latency spectrum",
}


def _writable(path: str, flag: str) -> None:
    """Fail before the run when ``path`` cannot be written (not after it)."""
    target = os.path.abspath(path)
    parent = os.path.dirname(target)
    if os.path.isdir(target):
        raise _UsageError(f"{flag} {path}: is a directory")
    if not os.path.isdir(parent):
        raise _UsageError(f"{flag} {path}: directory {parent} does not exist")
    if os.path.exists(target):
        ok = os.access(target, os.W_OK)
    else:
        ok = os.access(parent, os.W_OK | os.X_OK)
    if not ok:
        raise _UsageError(f"{flag} {path}: not writable")


def _parse_thresholds(exprs: list[str]) -> list[Any]:
    """``p99<2ms``, ``errors<1%``, ``non_2xx=0``, ``rps>5000`` as budget limits."""
    import re

    from ._budget import BudgetError, parse_limit

    limits = []
    for expr in exprs:
        m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|=|<|>)\s*(\S.*?)\s*", expr)
        if not m:
            raise _UsageError(f"--threshold {expr!r}: expected METRIC OP VALUE, e.g. p99<2ms")
        name, op, value = m.groups()
        if name == "errors" and value.endswith("%"):
            name = "error_rate"  # errors<1% limits the share of failed requests
        try:
            limits.append(parse_limit(name, ("==" if op == "=" else op) + value))
        except BudgetError as exc:
            raise _UsageError(f"--threshold {expr!r}: {exc}") from None
    return limits


def _write_csv(path: str, result: BenchResult) -> None:
    """ab's -e file: the latency (ms) under which each percentage 0..100 was served."""
    from ._hist import hist_count, hist_percentile

    rows = ["Percentage served,Time in ms"]
    has = hist_count(result.latency) > 0
    for p in range(101):
        v = hist_percentile(result.latency, float(p)) / 1e6 if has else 0.0
        rows.append(f"{p},{v:.3f}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")


def _raise_nofile() -> tuple[int, int] | None:
    """Raise the open-file soft limit to the hard limit; (soft, hard) after, None if unknown."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft, hard


def _save_json(path: str, result: BenchResult) -> bool:
    try:
        result.save(path)
    except OSError as exc:
        sys.stderr.write(f"httpbench: cannot write {path}: {exc.strerror}\n")
        return False
    return True


def cli_main(argv: list[str]) -> int:
    """``httpbench URL [options]``; returns the exit code (2 for usage errors).

    Exit status: 0 when the run completed and every ``--threshold`` held (a
    warning on stderr when any request failed or got a non-2xx answer); 1 when
    a threshold failed, every request failed, the connections could not be
    opened, a worker of a distributed run was lost or an output file could not
    be written; 2 for usage errors; 130 when interrupted (partial report and
    JSON still written).
    """
    p = _parser()
    if not argv:
        p.print_usage(sys.stderr)
        return 2
    try:
        a = p.parse_args(argv)
        for dest, msg in _AB_REJECTED.items():
            if getattr(a, dest) is not None:
                raise _UsageError(msg)
        streams = 1
        if a.streams is not None:
            try:
                streams = int(a.streams)
            except ValueError:
                if a.h2:
                    raise _UsageError(f"-m {a.streams}: with --h2, -m is the number of streams "
                                      f"per connection; for the request method use "
                                      f"-X {a.streams}") from None
                # ab's -m METHOD (without --h2 there are no streams to mean).
                if a.method is None:
                    a.method = a.streams
            else:
                if not a.h2:
                    raise _UsageError(f"-m {a.streams}: streams per connection need --h2 "
                                      "(for ab's -m METHOD use -X METHOD)")
                if not 1 <= streams <= 1024:
                    raise _UsageError("-m (streams per connection) must be in 1..1024")
        if a.h2 and a.pipeline > 1:
            raise _UsageError("--pipeline is HTTP/1.1 pipelining; with --h2 use -m STREAMS")
        if a.h2 and not a.keepalive and streams > 1:
            raise _UsageError("--no-keepalive opens a connection per request: -m must be 1")
        if a.h2 and (a.dask or a.dask_local):
            raise _UsageError("--h2 is not supported with --dask / --dask-local")
        if a.head:
            if a.method not in (None, "HEAD"):
                raise _UsageError("-i (HEAD) and a method other than HEAD")
            a.method = "HEAD"
        limits = _parse_thresholds(a.threshold)
        for flag, path in (("--json", a.json), ("-e", a.csv)):
            if path is not None:
                _writable(path, flag)
        try:
            parse_url(a.url)
        except ValueError as exc:
            raise _UsageError(str(exc)) from None
        duration = _dur_arg(a.duration, "-d")
        timeout = _dur_arg(a.timeout, "--timeout")
        warmup = _dur_arg(a.warmup, "--warmup")
        if a.requests is not None and a.duration is not None:
            raise _UsageError("give -n or -d, not both")
        if a.requests is not None and a.requests < 1:
            raise _UsageError("-n must be >= 1")
        for flag, v in (("-c", a.concurrency), ("-t", a.threads), ("--pipeline", a.pipeline)):
            if v < 1:
                raise _UsageError(f"{flag} must be >= 1")
        if a.rate is not None and not (a.rate > 0 and math.isfinite(a.rate)):
            raise _UsageError("-R must be a positive number of requests/s")
        if a.post_file is not None and not os.path.isfile(a.post_file):
            raise _UsageError(f"-p {a.post_file}: no such file")
        headers = []
        for h in a.header:
            if ":" not in h:
                raise _UsageError(f"-H {h!r}: expected 'Name: value'")
            headers.append(h)
        if a.content_type:
            headers.append(f"Content-Type: {a.content_type}")
        method = a.method or ("POST" if a.post_file else "GET")
        body = None
        if a.post_file is not None:
            import pathlib

            body = pathlib.Path(a.post_file)
        if a.dask_local is not None and a.dask_local < 1:
            raise _UsageError("--dask-local must be >= 1")
        cluster = a.dask or (f"local:{a.dask_local}" if a.dask_local else None)
        show = (not a.quiet) and sys.stderr.isatty() and cluster is None
        if cluster is None:
            nofile = _raise_nofile()
            # Each connection needs a descriptor; leave room for the process's own.
            if nofile is not None and a.concurrency + 32 > nofile[0]:
                sys.stderr.write(
                    f"httpbench: cannot open {a.concurrency} connections: the open-file limit "
                    f"is {nofile[0]} (hard limit {nofile[1]}); lower -c or raise `ulimit -n`\n")
                return 1
        kw: dict[str, Any] = dict(
            n=a.requests, duration=duration, concurrency=a.concurrency, threads=a.threads,
            rate=a.rate, keepalive=a.keepalive, pipeline=a.pipeline, method=method,
            headers=headers, body=body, timeout=timeout, verify=not a.insecure,
            ca_file=a.ca_file, warmup=warmup or 0, progress=show, cluster=cluster,
        )
        if a.h2:
            if a.post_file is not None:
                with open(a.post_file, "rb") as f:
                    kw["body"] = f.read()  # HTTP/2 sends the body from memory
            kw.update(http2=True, streams=streams)
        try:
            result = bench(a.url, **kw)
        except (ValueError, TypeError) as exc:
            raise _UsageError(str(exc)) from None
    except _UsageError as exc:
        p.print_usage(sys.stderr)
        sys.stderr.write(f"httpbench: error: {exc}\n")
        return 2
    except (_core.HttpbenchError, ImportError, RuntimeError) as exc:
        sys.stderr.write(f"httpbench: {type(exc).__name__}: {exc}\n")
        return 1
    if show:
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()
    sys.stdout.write(format_report(result, latency=a.latency))
    if a.json and not _save_json(a.json, result):
        return 1
    if a.csv:
        try:
            _write_csv(a.csv, result)
        except OSError as exc:
            sys.stderr.write(f"httpbench: cannot write {a.csv}: {exc.strerror}\n")
            return 1
    return _exit_status(result, limits)


def _exit_status(result: BenchResult, limits: list[Any]) -> int:
    """The exit policy (see cli_main), with its messages on stderr."""
    if result.interrupted:
        sys.stderr.write("httpbench: interrupted; the report covers the partial run\n")
        return 130
    if result.partial:
        sys.stderr.write("httpbench: partial result: " + ", ".join(
            f"shard {w.shard} on {w.worker} lost" for w in result.lost) + "\n")
        return 1
    if result.responses == 0 and result.errors:
        errs = ", ".join(f"{k}: {v}" for k, v in result.error_counts.items() if v)
        sys.stderr.write(f"httpbench: every request failed ({errs}); "
                         f"first error: {result.metadata.get('first_error', '')}\n")
        return 1
    if result.connect_fd_exhausted:
        sys.stderr.write(
            f"httpbench: could not open the connections: {result.connect_fd_exhausted} "
            "connects failed for lack of file descriptors (EMFILE/ENFILE); "
            "lower -c or raise `ulimit -n`\n")
        return 1
    if limits:
        from ._budget import check_budget, format_table

        rows = check_budget(result, limits)
        failed = [r for r in rows if not r.ok]
        if failed:
            sys.stdout.write(f"\nThresholds: {len(failed)} of {len(rows)} failed\n"
                             + format_table(rows) + "\n")
            return 1
        sys.stdout.write(f"\nThresholds: all {len(rows)} held\n" + format_table(rows) + "\n")
    elif result.failures:
        sys.stderr.write(f"httpbench: warning: {result.errors} failed requests and "
                         f"{result.non_2xx} non-2xx responses (exit status 0 without "
                         "--threshold; e.g. --threshold errors=0 --threshold non_2xx=0)\n")
    return 0
