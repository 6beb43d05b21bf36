"""One local run of the native load generator: the arguments checked into a
:class:`LoadSpec`, the request head built by the core, the engine run, the result.

``bench()`` (the public face, in ``_bench``) checks with :func:`check` and then
either runs here or hands the checked spec to a cluster; a cluster's shards
call :func:`run_local`, so the distributed runner never calls back into
``bench()``. ``_core.run_bench`` runs the C engine (csrc/core/engine/hb_engine.c)
without the GIL and returns raw counters and histograms; they become a
:class:`~httpbench.BenchResult`.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import _core, _machine
from ._features import H3_CLIENT_MISSING
from ._metadata import system_metadata
from ._results import BenchConfig, BenchResult

__all__ = [
    "Target",
    "Progress",
    "LoadSpec",
    "parse_url",
    "check",
    "run",
    "run_local",
    "raise_nofile",
]

DEFAULT_TIMEOUT = 30.0  # seconds, per request (connect to last byte)
DEFAULT_DURATION = 10.0  # seconds, when neither n nor duration is given
LATE_THRESHOLD_NS = 10_000_000  # rate mode: a send this late counts as missed (engine default)
# a target that accepted no connection in this long (refused, unreachable) ends the run
NO_CONNECTION_S = 1.0



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


def raise_nofile() -> tuple[int, int] | None:
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


@dataclass(frozen=True, slots=True)
class LoadSpec:
    """A load test with its arguments checked and its request built, ready to run."""

    target: Target
    method: str
    n: int | None
    duration: float | None  # seconds; None when count-bound
    concurrency: int
    threads: int
    rate: float | None
    keepalive: bool
    pipeline: int
    headers: list[tuple[str, str]]
    body: Any  # as given: bytes, str, a path or None (a cluster's shards get it unchanged)
    body_bytes: bytes | None
    body_file: str | None
    body_len: int  # -1: no body
    timeout: float  # seconds, 0: none
    warmup: float
    verify: bool
    ca_file: str | os.PathLike[str] | None
    session_resumption: bool
    server_name: str | None
    tls_max_version: str | None
    lenient: bool
    label: str
    http2: bool
    streams: int
    head: bytes
    h2_fields: Any
    http3: bool = False
    ws: bool = False
    ws_size: int = 16
    ws_text: bool = False
    stream: bool = False


def check(
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
    session_resumption: bool = True,
    server_name: str | None = None,
    tls_max_version: str | None = None,
    lenient: bool = False,
    label: str = "",
    http2: bool = False,
    streams: int = 1,
    http3: bool = False,
    ws: bool = False,
    ws_size: int = 16,
    ws_text: bool = False,
    stream: bool = False,
) -> LoadSpec:
    """``bench()``'s arguments checked (ValueError/TypeError with the reason) and the
    request head built, so bad headers fail before any connection is made."""
    if isinstance(url, str) and url.strip().lower().startswith(("ws://", "wss://")):
        ws = True  # a WebSocket URL is its http(s) URL in WebSocket mode
        url = "http" + url.strip()[2:]
    tgt = parse_url(url)
    ws, stream, ws_text = bool(ws), bool(stream), bool(ws_text)
    ws_size = _int_arg(ws_size, "ws_size", 0, 1 << 26)
    if ws and (http2 or http3):
        raise ValueError("ws=True upgrades an HTTP/1.1 connection: not with http2/http3")
    if ws and (not keepalive or method.upper() != "GET"):
        raise ValueError("ws=True needs keep-alive GET upgrades (keepalive=True, method='GET')")
    if ws and body is not None and not isinstance(body, (bytes, bytearray, memoryview, str)):
        raise ValueError("ws=True sends the message from memory: pass bytes or str, not a path")
    if stream and ws:
        raise ValueError("stream=True reads HTTP responses as streams: not with ws")
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
    http2, http3 = bool(http2), bool(http3)
    if http2 and http3:
        raise ValueError("http2=True and http3=True are exclusive: choose one protocol")
    if http3 and not tgt.tls:
        raise ValueError(f"http3=True needs an https:// URL (HTTP/3 is QUIC, always TLS), "
                         f"not {tgt.url!r}")
    if http3 and tls_max_version is not None and tls_max_version != "1.3":
        raise ValueError(f"http3=True is TLS 1.3 only (QUIC); tls_max_version={tls_max_version!r} "
                         "cannot apply")
    if http2 or http3:
        kind = "http3=True" if http3 else "http2=True"
        if pipeline > 1:
            raise ValueError(f"pipeline is HTTP/1.1 pipelining; with {kind} use streams")
        if not keepalive and streams > 1:
            raise ValueError("keepalive=False opens a connection per request: streams must be 1")
        if isinstance(body, os.PathLike):
            raise ValueError(f"{kind} sends the body from memory: pass bytes, not a path")
    elif streams > 1:
        raise ValueError("streams (concurrent streams per connection) needs http2=True or "
                         "http3=True")
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
    head = _core.build_request_head(method, tgt.url, hdrs, -1 if ws else body_len,
                                    bool(keepalive), ua)
    # The same request as HTTP/2 fields; validated here so bad headers fail before the run.
    h2_fields = (_core.build_h2_fields(method, tgt.url, hdrs, body_len, ua)
                 if http2 or http3 else None)
    return LoadSpec(
        target=tgt, method=method, n=n, duration=dur, concurrency=concurrency,
        threads=threads, rate=rate, keepalive=bool(keepalive), pipeline=pipeline,
        headers=hdrs, body=body, body_bytes=body_bytes, body_file=body_file,
        body_len=body_len, timeout=tmo, warmup=wup, verify=bool(verify), ca_file=ca_file,
        session_resumption=bool(session_resumption), server_name=server_name,
        tls_max_version=tls_max_version, lenient=bool(lenient), label=label, http2=http2,
        streams=streams, head=head, h2_fields=h2_fields, http3=http3, ws=ws, ws_size=ws_size,
        ws_text=ws_text, stream=stream)


def run(spec: LoadSpec, progress: bool | Callable[[Progress], Any] | None = False) -> BenchResult:
    """Run a checked load test on this machine's engine (the GIL released meanwhile)."""
    if progress is True:
        progress = _stderr_progress()
    cb: Callable[..., Any] | None = None
    if callable(progress):
        user_cb = progress
        n, dur = spec.n, spec.duration

        def cb(completed: int, ok: int, failed: int, bytes_in: int, elapsed: float,
               warming: bool, p50_ns: int = 0, p99_ns: int = 0) -> None:
            user_cb(Progress(completed, ok, failed, bytes_in, elapsed, bool(warming), n, dur,
                             p50_ns, p99_ns))
    elif progress not in (None, False):
        raise TypeError("progress must be a bool or a callable")

    tgt = spec.target
    kw: dict[str, Any] = dict(
        host=tgt.host, port=tgt.port, tls=tgt.tls, head=spec.head, body=spec.body_bytes,
        body_file=spec.body_file, method_is_head=spec.method.upper() == "HEAD",
        n=spec.n or 0, duration=spec.duration or 0.0, warmup=spec.warmup,
        connections=spec.concurrency, threads=spec.threads, pipeline=spec.pipeline,
        rate=spec.rate or 0.0, keepalive=spec.keepalive, timeout=spec.timeout,
        verify=spec.verify,
        ca_file=os.fspath(spec.ca_file) if spec.ca_file is not None else None,
        server_name=spec.server_name, session_resumption=spec.session_resumption,
        progress=cb, tls_max_version=spec.tls_max_version, lenient=spec.lenient,
    )
    if spec.http2:
        kw.update(http2=True, h2_fields=spec.h2_fields, pipeline=spec.streams, head=None)
    elif spec.http3:
        if not _core.HAVE_H3:
            raise _core.FeatureUnavailable(f"bench(http3=True): {H3_CLIENT_MISSING}")
        kw.update(http3=True, h2_fields=spec.h2_fields, pipeline=spec.streams, head=None)
    if spec.ws:
        kw.update(ws=True, ws_size=spec.ws_size, ws_text=spec.ws_text)
    if spec.stream:
        kw.update(stream=True)
    kw["give_up"] = NO_CONNECTION_S
    raise_nofile()  # each connection is a descriptor: use what the hard limit allows
    raw = _core.run_bench(**kw)
    return _to_result(spec, raw)


def run_local(url: str, *, progress: bool | Callable[[Progress], Any] | None = False,
              **kw: Any) -> BenchResult:
    """``bench(url, **kw)`` on this machine: what a cluster's shard runs."""
    return run(check(url, **kw), progress)



_H2_ERRORS = ("rst_stream", "goaway")  # error kinds only HTTP/2 runs can have
_WS_ERRORS = ("upgrade", "ws_close")  # ... and only WebSocket runs


def _to_result(spec: LoadSpec, raw: dict[str, Any]) -> BenchResult:
    tgt, n, dur, rate, ca_file = spec.target, spec.n, spec.duration, spec.rate, spec.ca_file
    concurrency, http2, streams = spec.concurrency, spec.http2, spec.streams
    http3 = spec.http3
    errors = dict(raw["errors"])
    if not http2 and not http3:
        for k in _H2_ERRORS:  # always 0: HTTP/1.1 results keep their keys as before
            errors.pop(k, None)
    if not spec.ws:
        for k in _WS_ERRORS:
            errors.pop(k, None)
    cfg = BenchConfig(
        n=n, duration_ns=int(dur * 1e9) if dur is not None else None,
        concurrency=concurrency, threads=min(spec.threads, concurrency), rate=rate,
        keepalive=spec.keepalive, pipeline=spec.pipeline,
        timeout_ns=int(spec.timeout * 1e9) if spec.timeout else None,
        warmup_ns=int(spec.warmup * 1e9),
        protocol="h3" if http3 else "h2" if http2 else "websocket" if spec.ws else "http/1.1",
        streams=streams if http2 or http3 else 1,
        extra={"headers": [f"{k}: {v}" for k, v in spec.headers],
               "body_bytes": max(spec.body_len, 0), "tls": tgt.tls, "verify": spec.verify,
               "ca_file": os.fspath(ca_file) if ca_file is not None else None,
               **({"stream": True} if spec.stream else {}),
               **({"ws_size": spec.ws_size, "ws_text": spec.ws_text} if spec.ws else {})},
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
        **({"gave_up_s": NO_CONNECTION_S} if raw.get("gave_up") else {}),
        **system_metadata(),
    }
    res = BenchResult(
        url=tgt.url,
        latency=raw["latency"],
        duration_ns=int(raw["duration_ns"]),
        method=spec.method,
        config=cfg,
        label=spec.label,
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
        interrupted=raw["interrupted"] and not raw.get("gave_up"),
        cpu_user_ns=raw["cpu_user_ns"],
        cpu_sys_ns=raw["cpu_sys_ns"],
        start_unix_ns=raw["start_unix_ns"],
        end_unix_ns=raw["end_unix_ns"],
        series_responses=tuple(raw["series_ok"]),
        series_errors=tuple(raw["series_err"]),
        series_p50_ns=tuple(raw["series_p50"]) if "series_p50" in raw else None,
        series_p99_ns=tuple(raw["series_p99"]) if "series_p99" in raw else None,
        metadata=meta,
        setup=raw["setup"],
        sends=raw["sends"],
        sends_late=raw["sends_late"] if rate else None,
        unsent=raw["unsent"] if rate else None,
        connect_attempts=raw["connect_attempts"],
        connect_failures=raw["connect_failures"],
        connect_fd_exhausted=raw["connect_fd_exhausted"],
        quic_datagrams_sent=raw["quic_dgrams_sent"] if http3 else None,
        quic_datagrams_received=raw["quic_dgrams_recv"] if http3 else None,
        quic_pto=raw["quic_pto"] if http3 else None,
        ttfe=raw["ttfe"] if spec.stream else None,
        gap=raw["gap"] if spec.stream else None,
        events=raw["events"] if spec.stream else None,
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

