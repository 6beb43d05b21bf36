"""A load run's headline numbers as plain JSON fields, beside its histograms.

``jq '.record.summary.rps'`` or a k6/oha user's script reads these without decoding
a histogram: requests per second (and its per-second stdev), latency percentiles in
ns, errors by type, bytes, CPU, connection counts, and a per-second timeline. The
shape is versioned (:data:`SUMMARY_VERSION`) and described by the JSON Schema
shipped beside this module (``bench-result.schema.json``).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from ._hist import hist_count, percentiles

__all__ = ["CONNECTION_ERRORS", "SCHEMA_FILE", "SUMMARY_VERSION", "summary_fields", "timeline"]

# error kinds of a connection that never carried a request (a refused connect, a failed
# TLS handshake): counted as failed connections, apart from failed requests
CONNECTION_ERRORS = ("connect", "tls")

# 1: rps, rps_stdev, latency_ns, requests, errors, status, bytes, cpu, connections, timeline
#    (t_s, rps, p50_ns, p99_ns, errors per second)
SUMMARY_VERSION = 1
SCHEMA_FILE = "bench-result.schema.json"

_PCTS = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}


def timeline(r: Any) -> list[dict[str, Any]]:
    """One entry per second of the run: ``t_s`` (the bucket's end), ``rps`` (2xx over
    the bucket's real length: the last one ends with the run), ``p50_ns`` and
    ``p99_ns`` of the responses that finished in it (None when none did or not
    recorded), ``errors``. A last bucket under a quarter of the interval is left out
    (too short for a rate)."""
    step = r.series_interval_ns / 1e9
    dur = r.duration_ns / 1e9
    k = len(r.series_responses)
    out = []
    for i in range(k):
        end = min((i + 1) * step, dur) if i == k - 1 and dur > i * step else (i + 1) * step
        length = end - i * step
        if length <= 0 or (i == k - 1 and k > 1 and length < 0.25 * step):
            break
        errs = r.series_errors[i] if i < len(r.series_errors) else 0
        out.append({"t_s": round(end, 3), "rps": r.series_responses[i] / length,
                    "p50_ns": _at(r.series_p50_ns, i), "p99_ns": _at(r.series_p99_ns, i),
                    "errors": int(errs)})
    return out


def _at(series: Any, i: int) -> int | None:
    """A per-second latency, None when not recorded or when no response finished."""
    if not series or i >= len(series) or not series[i]:
        return None
    return int(series[i])


def _stdev(points: list[dict[str, Any]], step: float, dur: float) -> float | None:
    """Stdev of req/s over the run's whole seconds (wrk's 'Req/Sec Stdev'); None with
    fewer than two."""
    whole = [p["rps"] for i, p in enumerate(points) if (i + 1) * step <= dur + 1e-9]
    return statistics.stdev(whole) if len(whole) >= 2 else None


def _num(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else v


def summary_fields(r: Any) -> dict[str, Any]:
    """The plain summary of a BenchResult ``r`` (see the module docstring)."""
    h = r.latency
    has = h is not None and hist_count(h) > 0
    pct = percentiles(h, _PCTS.values()) if has else {}
    lat = {name: (int(pct[p]) if has else None) for name, p in _PCTS.items()}
    lat.update(min=int(h.min) if has else None, max=int(h.max) if has else None,
               mean=_num(float(h.mean)) if has else None)
    points = timeline(r)
    conn = {k: int(v) for k, v in sorted(r.error_counts.items()) if k in CONNECTION_ERRORS and v}
    by_type = {k: int(v) for k, v in sorted(r.error_counts.items())
               if k not in CONNECTION_ERRORS and v}
    requests = r.responses + sum(by_type.values())
    return {
        "version": SUMMARY_VERSION,
        "duration_s": r.duration_ns / 1e9,
        "rps": r.rps,
        "rps_stdev": _stdev(points, r.series_interval_ns / 1e9, r.duration_ns / 1e9),
        "latency_ns": lat,
        "requests": {"completed": requests, "responses": r.responses,
                     "successes": r.successes, "non_2xx": r.responses - r.successes,
                     "in_flight_at_stop": r.in_flight_at_stop},
        "errors": {"total": sum(by_type.values()), "by_type": by_type},
        "status": {str(k): int(v) for k, v in sorted(r.status_counts.items())},
        "bytes": {"in": r.bytes_in, "out": r.bytes_out,
                  "in_per_s": r.bytes_in_per_s, "out_per_s": r.bytes_out_per_s},
        "cpu": {"user_ns": r.cpu_user_ns, "sys_ns": r.cpu_sys_ns,
                "per_request_ns": _num(r.cpu_ns_per_request)},
        "connections": {"opened": r.connections, "reconnects": r.reconnects,
                        "attempts": r.connect_attempts, "failed": sum(conn.values()),
                        "failed_by_type": conn},
        "timeline": points,
    }
