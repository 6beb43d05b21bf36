"""The ab-style report of a load test (``bench``): totals, rates, latency percentiles
and spectrum, per-worker lines.
"""

from __future__ import annotations

import math
from typing import Any

from ._benchsummary import CONNECTION_ERRORS, summary_fields
from ._hist import hist_count, hist_percentile, hist_stat, percentile_spectrum
from ._machine import placement_text, wakeup_text
from ._results import BenchResult

__all__ = [
    "REPORT_PERCENTILES",
    "SPECTRUM",
    "ab_report",
    "format_report",
    "format_spectrum",
    "idle_note",
    "idle_workers",
]


# --------------------------------------------------------------------------
# ab-style report and percentile spectrum


REPORT_PERCENTILES = (50, 66, 75, 80, 90, 95, 98, 99, 99.9, 100)
# Percentile ladder of --latency (HdrHistogram's "percentile distribution" style).
SPECTRUM = (0, 10, 20, 30, 40, 50, 55, 60, 65, 70, 75, 77.5, 80, 82.5, 85, 87.5, 88.75, 90,
            91.25, 92.5, 93.75, 94.375, 95, 95.625, 96.25, 96.875, 97.1875, 97.5, 97.8125,
            98.125, 98.4375, 98.59375, 98.75, 98.90625, 99, 99.21875, 99.4, 99.5, 99.6,
            99.7, 99.8, 99.9, 99.95, 99.99, 99.999, 100)


def _ms(ns: float) -> str:
    return "nan" if ns is None or math.isnan(ns) else f"{ns / 1e6:.3f}"


def _row(name: str, h: Any) -> str:
    if h is None or hist_count(h) == 0:
        return f"{name:<12}{'-':>9}{'-':>9}{'-':>8}{'-':>9}{'-':>10}"
    return (f"{name:<12}{_ms(hist_stat(h, 'min')):>9}{_ms(hist_stat(h, 'mean')):>9}"
            f"{_ms(hist_stat(h, 'stddev')):>8}{_ms(hist_percentile(h, 50)):>9}"
            f"{_ms(hist_stat(h, 'max')):>10}")


def _percentile_table(h: Any, title: str) -> list[str]:
    lines = [title]
    if h is None or hist_count(h) == 0:
        return lines + ["  (no samples)"]
    for p in REPORT_PERCENTILES:
        v = hist_percentile(h, p)
        tail = " (longest request)" if p == 100 else ""
        lines.append(f"  {p:>5g}%  {_ms(v):>10}{tail}")
    return lines


def format_spectrum(h: Any, title: str = "Latency distribution (ms)") -> str:
    """HdrHistogram-style percentile spectrum: value, percentile, count, 1/(1-p)."""
    lines = [title, f"{'Value':>12} {'Percentile':>12} {'TotalCount':>11} {'1/(1-p)':>12}"]
    # The .hgrm export's rows (hdr_hgrm): the two agree line by line.
    spec = percentile_spectrum(h)
    if not spec:
        return "\n".join(lines + ["  (no samples)"])
    for v, p, cnt in spec:
        inv = "inf" if p >= 100 else f"{1 / (1 - p / 100):.2f}"
        lines.append(f"{_ms(v):>12} {p / 100:>12.6f} {cnt:>11} {inv:>12}")
    lines.append(f"#[Mean = {_ms(hist_stat(h, 'mean'))}, StdDeviation = "
                 f"{_ms(hist_stat(h, 'stddev'))}]")
    lines.append(f"#[Max = {_ms(hist_stat(h, 'max'))}, Total count = {hist_count(h)}]")
    return "\n".join(lines)


def format_report(r: BenchResult, latency: bool = False) -> str:
    """The text report of a run, in the spirit of ApacheBench's."""
    md = r.metadata
    cfg = r.config
    secs = r.duration_ns / 1e9
    # a failed connect or TLS handshake sent no request: counted apart from requests
    conn_errs = {k: v for k, v in r.error_counts.items() if k in CONNECTION_ERRORS and v}
    req_errs = {k: v for k, v in r.error_counts.items() if k not in CONNECTION_ERRORS and v}
    completed = r.responses + sum(req_errs.values())
    lines = []
    w = 24

    def kv(k: str, v: Any) -> None:
        lines.append(f"{k + ':':<{w}}{v}")

    kv("Server Software", md.get("server") or "(none)")
    kv("Server Hostname", md.get("host", ""))
    kv("Server Port", md.get("port", ""))
    if cfg.extra.get("tls"):
        resumed = md.get("tls_resumed", 0)
        if md.get("tls_info"):
            kv("SSL/TLS Protocol", md["tls_info"])
        kv("TLS", f"yes (verify {'on' if cfg.extra.get('verify') else 'OFF'}), "
                  f"{resumed} of {r.connections} handshakes resumed")
    lines.append("")
    kv("Document Path", md.get("path", ""))
    dl = md.get("doc_length", -1)
    kv("Document Length", f"{dl} bytes" if dl is not None and dl >= 0 else "(no 2xx response)")
    lines.append("")
    if cfg.protocol == "h2":
        kv("Protocol", "HTTP/2 (ALPN h2)" if cfg.extra.get("tls") else "HTTP/2 (h2c, prior knowledge)")
    elif cfg.protocol == "h3":
        kv("Protocol", "HTTP/3 (QUIC v1 over UDP, ALPN h3)")
    else:
        kv("Protocol", "HTTP/1.1")
    kv("Concurrency Level", cfg.concurrency)
    if cfg.protocol in ("h2", "h3"):
        kv("Streams per connection", f"{cfg.streams} ({cfg.concurrency * cfg.streams} in flight)")
    mode = [f"{cfg.threads} thread{'s' if cfg.threads != 1 else ''}"]
    mode.append("keep-alive" if cfg.keepalive else "new connection per request")
    if cfg.pipeline > 1:
        mode.append(f"pipeline {cfg.pipeline}")
    if cfg.rate:
        mode.append(f"constant rate {cfg.rate:g} req/s (latency from intended send time)")
    else:
        mode.append("closed loop")
    kv("Mode", ", ".join(mode))
    stopped = ""
    if md.get("gave_up_s"):
        stopped = f"  (STOPPED: no connection in the first {md['gave_up_s']:g} s)"
    kv("Time taken for tests", f"{secs:.3f} seconds"
       + ("  (INTERRUPTED)" if r.interrupted else "") + stopped)
    # with no response at all a per-request figure would only divide failures: "–"
    answered = r.responses > 0
    kv("Complete requests", completed if answered else
       f"0 (no response; {completed} failed)" if completed else "0 (no request sent)")
    kv("Failed requests", sum(req_errs.values()))
    if req_errs:
        lines.append("   (" + ", ".join(f"{k.capitalize()}: {v}" for k, v in req_errs.items())
                     + ")")
    if conn_errs:
        kv("Failed connections", f"{sum(conn_errs.values())} ("
           + ", ".join(f"{k.capitalize()}: {v}" for k, v in conn_errs.items())
           + "; no request sent on them)")
    kv("Non-2xx responses", r.non_2xx)
    if r.non_2xx:
        codes = ", ".join(f"{k}: {v}" for k, v in sorted(r.status_counts.items())
                          if not 200 <= k <= 299)
        lines.append(f"   ({codes})")
    if r.in_flight_at_stop or cfg.duration_ns is not None or r.interrupted:
        kv("In flight at stop", r.in_flight_at_stop)
    kv("Connections opened", f"{r.connections} (reconnects: {r.reconnects})")
    if r.connect_attempts is not None and r.connect_failures:
        kv("Connection attempts", f"{r.connect_attempts} ({r.connect_failures} failed"
                                  + (f", {r.connect_fd_exhausted} for lack of file descriptors"
                                     if r.connect_fd_exhausted else "") + ")")
        errs = r.error_counts
        written = r.responses + r.errors - errs.get("connect", 0) - errs.get("tls", 0)
        if written == 0:
            why = str(md.get("first_error") or "connect failed")
            why = why.removeprefix("connect: ").lower()
            lines.append(f"   ({why}: {r.connect_attempts} attempts, 0 requests sent)")
    kv("Total transferred", f"{r.bytes_in} bytes"
       + (" (UDP payloads: QUIC headers and encryption included)" if cfg.protocol == "h3"
          else ""))
    if r.quic_datagrams_sent is not None and r.quic_datagrams_received is not None:
        per_dg = (f" ({r.datagrams_per_request:.2f} per request)"
                  if r.datagrams_per_request is not None and answered else " (– per request)")
        kv("QUIC datagrams", f"{r.quic_datagrams_sent} sent, {r.quic_datagrams_received} "
                             f"received{per_dg}")
        kv("QUIC probe timeouts", f"{r.quic_pto or 0} (loss recovery timers that fired)")
    kv("HTML transferred", f"{md.get('body_bytes_in', 0)} bytes")
    if cfg.rate:
        lines += _rate_lines(r, w)
    kv("Requests per second", f"{r.rps:.2f} [#/sec] (mean, 2xx only)")
    sd = summary_fields(r)["rps_stdev"]
    if sd is not None:
        kv("Req/s stdev", f"{sd:,.0f} between the run's whole seconds"
                          + (f" ({sd / r.rps:.1%} of the mean)" if r.rps else ""))
    if r.failures:
        kv("Failures per second", f"{r.error_rps:.2f} [#/sec] (errors + non-2xx)")
    if cfg.rate:
        # The schedule sets the pace, so C * time / n says nothing: show measured latency.
        measured = r.latency_uncorrected if r.latency_uncorrected is not None else r.latency
        if hist_count(measured):
            kv("Time per request", f"{_ms(hist_stat(measured, 'mean'))} [ms] "
                                   "(mean, measured from the actual send)")
        if hist_count(r.latency):
            kv("Time per request", f"{_ms(hist_stat(r.latency, 'mean'))} [ms] "
                                   "(mean, from the intended send time)")
    elif not answered:
        kv("Time per request", "– (no response)")
    elif completed:
        # ab's concurrency x time / n; over HTTP/2 every stream slot is a concurrent request.
        inflight = cfg.concurrency * (cfg.streams if cfg.protocol in ("h2", "h3") else 1)
        kv("Time per request", f"{inflight * secs * 1e3 / completed:.3f} [ms] (mean)")
        kv("Time per request", f"{secs * 1e3 / completed:.3f} [ms] "
                               "(mean, across all concurrent requests)")
    kv("Transfer rate", f"{r.bytes_in_per_s / 1024:.2f} [Kbytes/sec] received")
    lines.append(f"{'':<{w}}{r.bytes_out_per_s / 1024:.2f} kb/s sent")
    cpu = r.cpu_user_ns + r.cpu_sys_ns
    per = (f", {cpu / completed / 1e3:.2f} µs/request" if completed and answered
           else ", – µs/request" if not answered else "")
    kv("Generator CPU", f"user {r.cpu_user_ns / 1e9:.3f} s, sys {r.cpu_sys_ns / 1e9:.3f} s{per}")
    if md.get("placement"):
        kv("Placement", placement_text(md["placement"]) + f" ({md['placement'].get('mode')})")
    if md.get("wakeup_ns"):
        kv("Machine", wakeup_text(md["wakeup_ns"]))
    if md.get("wakeup_note"):
        lines.append(f"   (note: {md['wakeup_note']})")
    if md.get("first_error"):
        kv("First error", md["first_error"])
    if cfg.protocol == "websocket":
        kv("WebSocket", "each request is one message echoed back whole (latency: round trip)")
    if r.events is not None:
        kv("Events", f"{r.events} ({r.events / secs if secs else 0:.2f} [#/sec])")
    lines.append("")
    lines.append("Connection Times (ms)")
    lines.append(f"{'':<12}{'min':>9}{'mean':>9}{'[+/-sd]':>8}{'median':>9}{'max':>10}")
    # ab's rows are per-request components: Connect (issue to first byte
    # written) + Processing = Total for every request, from its actual start.
    per_request = r.setup is not None
    lines.append(_row("Connect:", r.setup if per_request else r.connect))
    if r.tls is not None:
        lines.append(_row("Handshake:" if cfg.protocol == "h3" else "TLS:", r.tls))
    lines.append(_row("Processing:", r.processing))
    lines.append(_row("Waiting:", r.ttfb))
    total = r.latency
    if per_request and cfg.rate and r.latency_uncorrected is not None:
        total = r.latency_uncorrected
    lines.append(_row("Total:", total))
    if r.ttfe is not None:
        lines.append(_row("1st event:", r.ttfe))
        lines.append(_row("Event gap:", r.gap))
    lines.append("")
    title = "Percentage of the requests served within a certain time (ms)"
    if cfg.rate:
        title += ", from the intended send time"
    lines += _percentile_table(r.latency, title)
    if cfg.rate and r.latency_uncorrected is not None:
        lines.append("")
        lines += _percentile_table(r.latency_uncorrected,
                                   "Uncorrected (from the actual send time) (ms)")
    if latency:
        lines.append("")
        lines.append(format_spectrum(r.latency))
    if r.workers:
        lines.append("")
        lines += _worker_table(r)
    return "\n".join(lines) + "\n"


def _rate_lines(r: BenchResult, w: int) -> list[str]:
    """Constant-rate accounting: target, achieved send rate, missed sends, a warning."""
    out = [f"{'Target rate:':<{w}}{r.config.rate:.2f} [#/sec]"]
    if r.send_rate is not None:
        out.append(f"{'Achieved send rate:':<{w}}{r.send_rate:.2f} [#/sec]")
    if r.missed is not None:
        late = (r.metadata.get("late_threshold_ns") or 0) / 1e6
        out.append(f"{'Missed sends:':<{w}}{r.missed} ({r.sends_late} late by more than "
                   f"{late:g} ms, {r.unsent} never sent)")
    rate = r.config.rate or 0.0
    if r.send_rate is not None and rate and r.send_rate < 0.95 * rate:
        out.append(f"WARNING: sent {r.send_rate:.2f} req/s, {100 * r.send_rate / rate:.0f}% of "
                   f"the target {rate:g} req/s: the target (or the generator) cannot keep up; "
                   "add connections (-c) or lower -R")
    return out


def idle_workers(r: BenchResult) -> int:
    """Workers of a distributed run that got no shard (fewer connections or requests
    than workers); 0 for other runs."""
    d = r.metadata.get("distributed") or {}
    return max(0, int(d.get("workers") or 0) - int(d.get("shards") or len(r.workers)))


def idle_note(r: BenchResult) -> str:
    """'1 of 2 workers idle: -c 1 ...': why a distributed run left workers without load."""
    d = r.metadata.get("distributed") or {}
    idle, total = idle_workers(r), int(d.get("workers") or 0)
    why = (f"-c {r.config.concurrency} is fewer connections than workers"
           if r.config.concurrency < total else
           f"-n {r.config.n} is fewer requests than workers")
    return (f"{idle} of {total} worker{'s' if total != 1 else ''} idle: {why}; "
            f"use -c {total} or more to load every worker")


def _worker_table(r: BenchResult) -> list[str]:
    """The per-worker table of a distributed run, under the merged report."""
    k = len(r.workers)
    title = f"Workers ({k} shard{'s' if k != 1 else ''}"
    idle = idle_workers(r)
    if idle:
        title += f"; {idle_note(r)}"
    if r.partial:
        title += "; PARTIAL: " + ", ".join(
            f"shard {w.shard} on {w.worker} lost (n={w.n}, c={w.concurrency})" for w in r.lost)
    lines = [title + ")",
             f"{'#':>3} {'worker':<24} {'host':<14} {'status':<11} {'c':>4} {'requests':>9} "
             f"{'req/s':>10} {'errors':>7} {'CPU µs/req':>10} {'clock off ms':>13} "
             f"{'late ms':>8}"]
    for w in r.workers:
        cpu = w.cpu_ns_per_request
        off = f"{w.clock_offset_ns / 1e6:+.3f}±{w.clock_uncertainty_ns / 1e6:.3f}"
        lines.append(f"{w.shard:>3} {w.worker:<24} {w.host[:14]:<14} {w.status:<11} "
                     f"{w.concurrency:>4} {w.responses + w.errors:>9} {w.rps:>10.1f} "
                     f"{w.errors:>7} {('-' if math.isnan(cpu) else f'{cpu / 1e3:.2f}'):>10} "
                     f"{off:>13} {w.start_late_ns / 1e6:>8.2f}")
    return lines


# The name the notebooks and tests used before format_report lived here.
ab_report = format_report
