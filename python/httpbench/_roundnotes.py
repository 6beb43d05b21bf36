"""The anomaly notes of a compare round: what the server's own stats, the
latency histogram and the repeats say about a round (server saturated, new
connections, Nagle, errors, early answers, the protocol actually used,
spread), as :class:`~httpbench.ResultSet` notes."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from ._results import MeasureResult, Note
from ._scenarios import Scenario
from ._stats import median_ci

__all__ = ["nagle_fraction", "protocol_verdict", "round_notes", "server_counts",
           "spread_notes"]

# Latency band that Nagle + delayed ACK produces on Linux (the 40 ms ACK timer).
NAGLE_BAND_NS = (38_000_000, 52_000_000)
NAGLE_MIN_FRACTION = 0.10
NAGLE_MAX_BYTES = 1 << 20
SATURATED_FRACTION = 0.90
SPREAD_LIMIT = 0.25


def server_counts(stats: Any) -> dict[str, int | None]:
    """Requests, connections accepted and server CPU ns from a server stats snapshot."""
    s = stats if isinstance(stats, dict) else dict(getattr(stats, "__dict__", {}))

    def pick(*names: str) -> int | None:
        for n in names:
            v = s.get(n)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return int(v)
        return None

    cpu = pick("cpu_ns", "server_cpu_ns", "cpu_total_ns")
    if cpu is None:
        u, y = pick("cpu_user_ns"), pick("cpu_sys_ns")
        if u is not None or y is not None:
            cpu = (u or 0) + (y or 0)
    routes = s.get("by_route") if isinstance(s.get("by_route"), dict) else {}
    early = routes.get("early_response")
    proto = s.get("by_protocol") if isinstance(s.get("by_protocol"), dict) else None

    def per_protocol(name: str) -> int | None:
        if proto is None:  # a server without per-protocol counts
            return None
        v = proto.get(name, 0)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    ws = s.get("ws") if isinstance(s.get("ws"), dict) else {}
    return {
        "requests": pick("requests", "requests_total", "total_requests"),
        # WebSocket messages the server read (echo rounds are counted by them)
        "ws_messages_in": ws.get("messages_in") if isinstance(ws.get("messages_in"), int)
        else None,
        "connections": pick("connections_accepted", "connections", "accepted"),
        "cpu_ns": cpu,
        "early_answers": int(early) if isinstance(early, (int, float)) else None,
        "bytes_in": pick("bytes_in"),
        "bytes_out": pick("bytes_out"),
        "tls_handshakes": pick("tls_handshakes"),
        "http1_requests": per_protocol("http/1.1"),
        "h2_requests": per_protocol("h2"),
        "h3_requests": per_protocol("h3"),
    }


def protocol_verdict(sc: Scenario, srv: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """The protocol a round actually used, from the server's per-protocol request deltas:
    ``(protocol, note kind, message)``; protocol ``"unproven"`` when the counts cannot
    tell. An HTTP/3 round with any request over TCP is ``h3-fallback``. An HTTP/2
    round with HTTP/1.1 requests is ``h1-fallback``; an HTTP/1.1 round
    with h2 requests (a client taking h2 by ALPN) is ``h2-negotiated``; an HTTP/1.1 round
    the counts cannot prove is what it asked for (servers without h2 count none)."""
    h1, h2 = srv.get("http1_requests"), srv.get("h2_requests")
    if sc.protocol == "h3":  # HTTP/3 requests: the listener's own count, exact
        h3 = srv.get("h3_requests")
        if h3 is None:
            return ("unproven", "protocol-unproven", "the server's stats have no HTTP/3 "
                    "counts: HTTP/3 is not proven")
        if (h1 or 0) + (h2 or 0) > 0:
            return ("h2" if h2 else "http/1.1", "h3-fallback",
                    f"the server answered {h3} of the round's requests over HTTP/3, {h2 or 0} "
                    f"over h2 and {h1 or 0} over HTTP/1.1: the client fell back to TCP; its "
                    "figures are not reported as h3")
        if h3 == 0:
            return ("unproven", "protocol-unproven",
                    "the server counted no request of the round on any protocol")
        return "h3", None, None
    if sc.protocol != "h2":
        if h2:
            return ("h2", "h2-negotiated",
                    f"the server answered {h2} of the round's requests over h2 and {h1 or 0} "
                    "over HTTP/1.1: the client took h2 in an HTTP/1.1 scenario; its figures "
                    "are not reported as HTTP/1.1")
        return sc.protocol, None, None
    if h1 is None and h2 is None:
        return ("unproven", "protocol-unproven", "the server's stats have no per-protocol "
                "counts: HTTP/2 is not proven")
    h1, h2 = h1 or 0, h2 or 0
    if h1 > 0:
        return ("http/1.1", "h1-fallback",
                f"the server answered {h1} of the round's requests over HTTP/1.1 and {h2} over "
                "h2: the client fell back to HTTP/1.1; its figures are not reported as h2")
    if h2 == 0:
        return ("unproven", "protocol-unproven",
                "the server counted no request of the round on any protocol")
    return "h2", None, None




def nagle_fraction(hist: Any) -> float:
    """Fraction of latencies in a *peak* at the 40 ms Nagle/delayed-ACK band, else 0.

    A latency that is merely slow (queueing at high concurrency, a process
    start per request) spreads over the neighbouring ranges too; the Nagle
    stall piles requests up just above the 40 ms delayed-ACK timer.
    """
    total = inband = near = 0
    lo, hi = NAGLE_BAND_NS
    for value, count in hist:
        total += count
        if lo <= value <= hi:
            inband += count
        elif lo / 3 <= value < lo or hi < value <= hi * 3:
            near += count
    if not total or inband < 2 * near:
        return 0.0
    return inband / total


def round_notes(
    client: str, sc: Scenario, repeat: int, kind: str, mr: MeasureResult, srv: dict[str, Any],
    worker_requests: int, verify: dict[str, Any], error_samples: list[str],
    server_threads: int,
) -> list[Note]:
    """Anomaly notes of one measured round."""
    notes: list[Note] = []

    def note(k: str, msg: str, sev: str = "warning") -> None:
        notes.append(Note(k, msg, client, sc.name, repeat, sev))

    calls = mr.calls
    if mr.errors:
        sample = f" (e.g. {error_samples[0]})" if error_samples else ""
        note("errors", f"{mr.errors} of {calls} requests failed{sample}", "error")
    if not verify.get("ok", True):
        note("bad-response", f"response failed verification: {verify.get('detail')}", "error")
    cpu, wall = srv.get("cpu_ns"), mr.wall_ns
    # (a push round's server runs ahead of its reader by design)
    if (cpu is not None and wall > 0 and cpu >= SATURATED_FRACTION * wall * server_threads
            and sc.ws != "push"):
        note("server-saturated",
             f"server CPU {cpu / wall:.0%} of wall time on {server_threads} thread(s): "
             "the server, not the client, may be the limit")
    conns, reqs = srv.get("connections"), srv.get("requests")
    if sc.ws:  # a WebSocket round: echoes are the server's messages read; pushes run ahead
        reqs = srv.get("ws_messages_in") if sc.ws == "echo" else None
    early = srv.get("early_answers") or 0
    if early:
        sev = "error" if mr.errors else "warning"
        note("early-answer",
             f"{early} of {calls} POSTs were answered before their body was read and the server "
             f"closed the connection: {conns if conns is not None else '?'} new connections and "
             f"{mr.errors} errors followed on the next requests", sev)
    if reqs is not None and reqs != worker_requests:
        note("count-mismatch",
             f"server saw {reqs} requests, the client made {worker_requests} "
             "(retries or lost requests)", "info" if reqs > worker_requests else "warning")
    if conns is not None and kind != "process" and not early:
        if sc.keep_alive:
            allowance = max(2, calls // 100)
            if conns > allowance:
                per = conns / max(calls, 1)
                if per >= 0.5:
                    msg = (f"{conns} new connections for {calls} requests: a new connection "
                           "per request although keep-alive was expected")
                else:
                    want = ("one kept-alive connection" if sc.concurrency == 1 or sc.is_h2
                            else f"{sc.concurrency} kept-alive connections")
                    msg = (f"{conns} new connections for {calls} requests where {want} "
                           "opened before the round were expected")
                if sc.is_post and mr.errors:
                    note("early-answer", "POST answered before its body was read broke the "
                         f"connection for the next request: {msg}", "error")
                else:
                    note("new-connections", msg)
        elif conns < 0.9 * calls:
            note("keep-alive-used", f"only {conns} connections for {calls} requests although "
                 "keep-alive was off", "info")
    if sc.is_post and mr.errors and sc.keep_alive and not early \
            and not any(n.kind == "early-answer" for n in notes):
        note("early-answer", f"{mr.errors} POST requests failed on a kept-alive connection: the "
             "server may have answered before reading the body, breaking the next request",
             "error")
    # Only where 40 ms cannot be plain transfer time or process start-up, and with
    # enough samples to call it a mode.
    small = (sc.expect_bytes or 0) + sc.body_size <= NAGLE_MAX_BYTES and not sc.download
    frac = nagle_fraction(mr.latency) if kind != "process" and small and calls >= 10 else 0.0
    if frac >= NAGLE_MIN_FRACTION:
        note("nagle-40ms",
             f"{frac:.0%} of requests took 38-52 ms: the signature of Nagle's algorithm "
             "meeting delayed ACKs (a request written in pieces without TCP_NODELAY)")
    return notes


def spread_notes(client: str, sc: Scenario, rounds: Sequence[MeasureResult]) -> list[Note]:
    """A note when the confidence interval of the median requests/s is wider than
    SPREAD_LIMIT of it (with up to 5 repeats: their min..max range)."""
    rates = [r.calls_per_s for r in rounds if r.calls and r.wall_ns > 0]
    if len(rates) < 2:
        return []
    med = statistics.median(rates)
    if med <= 0:
        return []
    lo, hi, cov = median_ci(rates)
    spread = (hi - lo) / med
    if spread > SPREAD_LIMIT:
        return [Note("spread", f"requests/s varied {spread:.0%} across {len(rates)} repeats "
                     f"({lo:,.0f} .. {hi:,.0f}, {cov:.0%} CI of the median); treat with care",
                     client, sc.name, None, "info")]
    return []


