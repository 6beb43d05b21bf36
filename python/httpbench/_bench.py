"""The native load generator's public face: ``bench()``, the ``httpbench URL`` CLI
and its ab-style report.

``bench()`` only chooses where to run: it checks its arguments (``_loadgen``)
and runs them on this machine or hands them to a Dask cluster
(``_distributed``), whose shards run the same local function; nothing below
calls back into ``bench()``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from . import _core
from ._abreport import format_report, format_spectrum, idle_note, idle_workers
from ._loadgen import DEFAULT_TIMEOUT, Progress, Target, check, parse_url, raise_nofile, run
from ._results import BenchResult

__all__ = [
    "Target",
    "Progress",
    "parse_url",
    "bench",
    "format_report",
    "format_spectrum",
    "cli_main",
]


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
    http3: bool = False,
    ws: bool = False,
    ws_size: int = 16,
    ws_text: bool = False,
    stream: bool = False,
    history: str | os.PathLike[str] | None = None,
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
    ``protocol``. A server that does not negotiate HTTP/2 raises
    HTTP2NotSupported, a ProtocolError (the run never falls back to HTTP/1.1).

    ``http3``: speak HTTP/3 (QUIC over UDP, TLS 1.3 by GnuTLS; an ``https://`` URL
    whose port is the server's UDP port, e.g. ``start_process(h3=True).h3_url``),
    ``streams`` per connection as for HTTP/2. ``verify``/``ca_file`` apply as for
    HTTPS. A failed QUIC handshake counts as a ``tls`` error; no answer within the
    handshake timeout (``timeout``, else 3 s) or a closed UDP port as ``connect``.
    The result adds ``quic_datagrams_sent``/``_received`` and ``quic_pto``; ``tls``
    holds the QUIC handshakes (a reconnect resumes the TLS session when the server
    issued a ticket and ``session_resumption`` is on; no 0-RTT). FeatureUnavailable when the build has no HTTP/3.

    ``stream``: each response is a stream of events, timed as they arrive: a
    server-sent event dispatch for a ``text/event-stream`` response, else a chunk
    of a chunked body (over HTTP/2 a DATA frame, over HTTP/3 each delivery of body
    bytes); with ``http2``/``http3`` each stream of a connection is one. The result adds ``ttfe`` (time to first event, from each
    stream's intended start: with ``rate`` - new streams per second - it is
    coordinated-omission corrected), ``gap`` (between consecutive events) and
    ``events``. An SSE line over 1 MiB is a ``protocol`` error.

    ``ws`` (or a ``ws://``/``wss://`` URL): WebSocket. Each connection upgrades
    (GET, ``Upgrade: websocket``, the server's ``Sec-WebSocket-Accept`` checked),
    then a request is one message sent and its echo received whole: ``latency``
    is the echo round trip, ``n`` counts messages, ``pipeline`` is messages in
    flight per connection and ``rate`` messages per second. The message is
    ``body`` (bytes or str) or else ``ws_size`` bytes of the server's content; a
    text frame with ``ws_text``. Errors add ``upgrade`` (refused or broken
    upgrade), ``ws_close`` (the server closed with messages in flight) and
    ``protocol`` (a frame breaking RFC 6455). Frames are prebuilt once per run
    with one random mask, so the generator's cost per message is its I/O.

    ``cluster``: run on Dask workers instead (a ``dask.distributed.Client``, a
    scheduler address such as ``tcp://host:8786``, or ``"local:N"`` for N local
    worker processes; needs ``pip install "httpbench[distributed]"``). The totals
    (``n``, ``rate``, ``concurrency``, ``threads``) are split across the workers
    and the result is their exact merge, with each worker's in ``workers``;
    ``progress`` is not shown for such runs. See docs/distributed.md.

    ``history``: also record the run in this history (a SQLite file, created when
    missing, or a ``postgresql://`` URL; see docs/history.md); a store that cannot be
    used raises ``HistoryError`` before any request is sent.

    Ctrl-C stops the run within ~100 ms and returns the partial result with
    ``interrupted=True`` (not recorded in a history). Raises ValueError/TypeError for bad arguments,
    ConnectError when the host cannot be resolved, TLSError for a bad CA file.
    Connection failures during the run are counted in ``error_counts``.
    """
    if cluster is not None and (ws or stream or url.lower().startswith(("ws:", "wss:"))):
        raise ValueError("ws and stream runs are not supported with cluster")
    if cluster is not None and (http2 or http3):
        raise ValueError(f"{'http3' if http3 else 'http2'}=True is not supported with cluster")
    spec = check(
        url, n=n, duration=duration, concurrency=concurrency, threads=threads, rate=rate,
        keepalive=keepalive, pipeline=pipeline, method=method, headers=headers, body=body,
        timeout=timeout, verify=verify, ca_file=ca_file, warmup=warmup,
        session_resumption=session_resumption, server_name=server_name,
        tls_max_version=tls_max_version, lenient=lenient, label=label, http2=http2,
        streams=streams, http3=http3, ws=ws, ws_size=ws_size, ws_text=ws_text, stream=stream)
    if history is not None:
        from ._history import check_target, record_results

        check_target(history)
    if cluster is None:
        result = run(spec, progress)
    else:
        from ._distributed import run_distributed

        result = run_distributed(cluster, spec)
    if history is not None:
        record_results(history, result, "bench")
    return result




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
    p.add_argument("-R", "--rate", type=_rate_arg, metavar="RPS",
                   help="constant rate in requests/s, e.g. 500 or 2k (coordinated-omission "
                        "corrected)")
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
    p.add_argument("--h3", action="store_true",
                   help="HTTP/3: QUIC over UDP to an https:// URL's port (the server's UDP "
                        "port; verify with --ca-file or --insecure as for HTTPS)")
    p.add_argument("--ws", action="store_true",
                   help="WebSocket: upgrade each connection, then -n messages echoed back "
                        "(implied by a ws:// or wss:// URL); --ws-size BYTES per message")
    p.add_argument("--ws-size", type=int, default=16, metavar="BYTES",
                   help="with --ws: message size (default 16; -p FILE sends that file's bytes)")
    p.add_argument("--stream", action="store_true",
                   help="responses are streams of events (server-sent events, or chunks): "
                        "time to first event, gaps between events, events/s")
    p.add_argument("-m", "--streams", dest="streams", metavar="STREAMS", default=None,
                   help="with --h2/--h3: concurrent streams per connection (h2load's -m; default 1). "
                        "ab's -m METHOD still works without --h2; prefer -X METHOD")
    p.add_argument("--warmup", metavar="D", default="0",
                   help="warm-up period not recorded, e.g. 2s")
    p.add_argument("--latency", action="store_true", help="print the full latency spectrum")
    p.add_argument("--json", metavar="FILE",
                   help="also save the result as JSON (its summary: rps, latency percentiles "
                        "in ns, errors, bytes, CPU, connections, a per-second timeline); '-' "
                        "writes it to stdout and the report to stderr")
    p.add_argument("--history", metavar="PATH_OR_URL",
                   help="also record the run in a history: a SQLite file or postgresql:// URL "
                        "(default: $HTTPBENCH_HISTORY; see `httpbench history`)")
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


def _rate_arg(text: str) -> float:
    """-R's value: a number of requests/s, with k/M suffixes as budgets take them."""
    from ._units import parse_count

    try:
        return parse_count(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid rate {text!r}: a number of requests/s such as 500 or 2k") from None


def tls_verify_failure(url: str, ca_file: str | None, timeout: float) -> str | None:
    """One TLS handshake with ``url``'s server, verified as the run would verify it: the
    reason and how to trust the server when verification fails, else None (also when the
    server cannot be reached: the run reports that itself)."""
    import socket
    import ssl

    t = parse_url(url)
    try:
        ctx = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        return f"--ca-file {ca_file}: cannot load it ({exc})"
    try:
        with socket.create_connection((t.host, t.port), timeout=timeout) as sock, \
                ctx.wrap_socket(sock, server_hostname=t.host):
            return None
    except ssl.SSLCertVerificationError as exc:
        why = exc.verify_message or str(exc)
    except (OSError, ValueError):
        return None
    return untrusted_message(t.host, t.port, why)


def untrusted_message(host: str, port: int, why: str) -> str:
    """What the CLI says when the server's certificate fails verification (TCP or QUIC)."""
    return (f"TLS verification of {host}:{port} failed ({why}); nothing was sent. Trust "
            "the server with --ca-file PATH (its CA certificate in PEM; `httpbench serve` "
            "prints the path of its own) or skip verification with --insecure")


def h3_verify_failure(url: str, exc: BaseException) -> str | None:
    """The CLI's message for an HTTP/3 run the engine stopped at its first handshake
    because the certificate failed verification (TLSError with code E_TLS_VERIFY), or
    None for any other error."""
    if not isinstance(exc, _core.TLSError) or getattr(exc, "code", None) != _core.E_TLS_VERIFY:
        return None
    t = parse_url(url)
    text = str(exc)
    mark = "certificate verification failed: "
    why = text[text.index(mark) + len(mark):] if mark in text else text
    return untrusted_message(t.host, t.port, why.strip().rstrip("."))


def _save_json(path: str, result: BenchResult) -> bool:
    if path == "-":
        sys.stdout.write(result.to_json(indent=1) + "\n")
        return True
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
    from ._historystore import HistoryError

    p = _parser()
    if not argv:
        p.print_usage(sys.stderr)
        return 2
    try:
        a = p.parse_args(argv)
        for dest, msg in _AB_REJECTED.items():
            if getattr(a, dest) is not None:
                raise _UsageError(msg)
        if a.h2 and a.h3:
            raise _UsageError("--h2 and --h3 are exclusive: choose one protocol")
        multi = "--h3" if a.h3 else "--h2" if a.h2 else None  # a protocol with streams
        streams = 1
        if a.streams is not None:
            try:
                streams = int(a.streams)
            except ValueError:
                if multi:
                    raise _UsageError(f"-m {a.streams}: with {multi}, -m is the number of streams "
                                      f"per connection; for the request method use "
                                      f"-X {a.streams}") from None
                # ab's -m METHOD (without --h2 there are no streams to mean).
                if a.method is None:
                    a.method = a.streams
            else:
                if not multi:
                    raise _UsageError(f"-m {a.streams}: streams per connection need --h2 or --h3 "
                                      "(for ab's -m METHOD use -X METHOD)")
                if not 1 <= streams <= 1024:
                    raise _UsageError("-m (streams per connection) must be in 1..1024")
        if multi and a.pipeline > 1:
            raise _UsageError(f"--pipeline is HTTP/1.1 pipelining; with {multi} use -m STREAMS")
        if multi and not a.keepalive and streams > 1:
            raise _UsageError("--no-keepalive opens a connection per request: -m must be 1")
        if multi and (a.dask or a.dask_local):
            raise _UsageError(f"{multi} is not supported with --dask / --dask-local")
        if a.head:
            if a.method not in (None, "HEAD"):
                raise _UsageError("-i (HEAD) and a method other than HEAD")
            a.method = "HEAD"
        limits = _parse_thresholds(a.threshold)
        for flag, path in (("--json", a.json), ("-e", a.csv)):
            if path is not None and path != "-":
                _writable(path, flag)
        try:
            lower = a.url.strip().lower()
            parse_url("http" + a.url.strip()[2:] if lower.startswith(("ws://", "wss://"))
                      else a.url)
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
        history = a.history or os.environ.get("HTTPBENCH_HISTORY") or None
        show = (not a.quiet) and sys.stderr.isatty() and cluster is None
        if cluster is None:
            nofile = raise_nofile()
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
            history=history,
        )
        if multi:
            if a.post_file is not None:
                with open(a.post_file, "rb") as f:
                    kw["body"] = f.read()  # HTTP/2 and HTTP/3 send the body from memory
            kw.update(streams=streams, **({"http3": True} if a.h3 else {"http2": True}))
        if a.url.lower().startswith("https://") and not a.insecure and not a.h3 \
                and cluster is None:
            bad = tls_verify_failure(a.url, a.ca_file, min(timeout or 5.0, 5.0))
            if bad:
                sys.stderr.write(f"httpbench: {bad}\n")
                return 1
        if a.ws or a.url.strip().lower().startswith(("ws://", "wss://")):
            if a.post_file is not None:
                with open(a.post_file, "rb") as f:
                    kw["body"] = f.read()  # the message, sent from memory
            kw.update(ws=True, ws_size=a.ws_size, method="GET")
        if a.stream:
            kw.update(stream=True)
        try:
            result = bench(a.url, **kw)
        except (ValueError, TypeError) as exc:
            raise _UsageError(str(exc)) from None
    except _UsageError as exc:
        p.print_usage(sys.stderr)
        sys.stderr.write(f"httpbench: error: {exc}\n")
        return 2
    except HistoryError as exc:
        sys.stderr.write(f"httpbench: {exc}\n")
        return 2
    except (_core.HttpbenchError, ImportError, RuntimeError) as exc:
        # HTTP/3 has no check before the run: its first handshake stops the run instead
        bad = h3_verify_failure(a.url, exc) if a.h3 else None
        sys.stderr.write(f"httpbench: {bad}\n" if bad else
                         f"httpbench: {type(exc).__name__}: {exc}\n")
        return 1
    if show:
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()
    # --json -: stdout is the JSON document alone (for jq and the like); the report on stderr
    (sys.stderr if a.json == "-" else sys.stdout).write(format_report(result, latency=a.latency))
    if result.workers and idle_workers(result):
        sys.stderr.write(f"httpbench: warning: {idle_note(result)}\n")
    if a.json and not _save_json(a.json, result):
        return 1
    if a.csv:
        try:
            _write_csv(a.csv, result)
        except OSError as exc:
            sys.stderr.write(f"httpbench: cannot write {a.csv}: {exc.strerror}\n")
            return 1
    return _exit_status(result, limits)


def no_response_reason(result: BenchResult) -> str:
    """What happened in a run that got no response at all, in one line: refused or
    unreachable (no connection), timeouts, or connections the server never answered."""
    md = result.metadata
    where = f"{md.get('host', '')}:{md.get('port', '')}"
    first = str(md.get("first_error") or "")
    errs = ", ".join(f"{k}: {v}" for k, v in result.error_counts.items() if v)
    if md.get("gave_up_s"):
        why = first.removeprefix("connect: ") or "no answer to the connection attempts"
        return (f"no connection to {where} in the first {md['gave_up_s']:g} s ({why.lower()}; "
                f"{result.connect_attempts} attempts); run stopped, no response")
    if result.errors:
        timeouts = result.error_counts.get("timeout", 0)
        kind = ("no answer: every request timed out" if timeouts == result.errors
                else "every request failed")
        return f"{kind} ({errs}); first error: {first}"
    return (f"no response in {result.duration_ns / 1e9:.1f} s: {result.connections} "
            f"connection(s) opened, {result.in_flight_at_stop} request(s) still unanswered "
            "at the end (the server accepts but does not answer; a --timeout shorter than "
            "the run counts them as timeouts)")


def _exit_status(result: BenchResult, limits: list[Any]) -> int:
    """The exit policy (see cli_main), with its messages on stderr."""
    if result.interrupted:
        sys.stderr.write("httpbench: interrupted; the report covers the partial run\n")
        return 130
    if result.partial:
        sys.stderr.write("httpbench: partial result: " + ", ".join(
            f"shard {w.shard} on {w.worker} lost" for w in result.lost) + "\n")
        return 1
    if result.responses == 0:
        sys.stderr.write(f"httpbench: {no_response_reason(result)}\n")
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
