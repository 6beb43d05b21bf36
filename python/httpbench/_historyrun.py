"""Results turned into a history run: the machine fingerprint, the git state and one
point per (subject, scenario, metric).

A compare run gives one point per cell and metric: the median over the cell's
repeats with its confidence interval, the repeat count and the cell's notes. A
lone ``bench()`` or ``measure()`` result gives its own figures (one sample, no
interval). Metric names are the rows' (:data:`~httpbench._rows.CELL_COLUMNS`),
in base units.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._gitinfo import git_state, git_state_finish, git_state_start
from ._historystore import NewRun, Point
from ._metadata import system_metadata
from ._results import BenchResult, MeasureResult, ResultSet
from ._rows import cell_rows, entries, isnan, record_row
from ._stats import median_ci, median_spread
from ._version import __version__

__all__ = ["CELL_METRICS", "LONE_METRICS", "fingerprint", "new_run", "points_of", "run_of"]

# compare cell metrics -> the row column holding their CI (None: no interval)
CELL_METRICS: dict[str, str | None] = {
    "cpu_ns_per_request": "cpu_ns_per_request_ci",
    "p50_ns": "p50_ns_ci",
    "rps": "rps_ci",
    "p99_ns": None,
    "allocs_per_request": None,
    "alloc_bytes_per_request": None,
    "native_allocs_per_request": None,
    "gc_per_10k": None,
    "peak_rss_bytes": None,
    "errors": None,
    "instructions_per_request": None,
    "syscalls_per_request": None,
}
# a lone result's row columns kept as series
LONE_METRICS = ("rps", "p50_ns", "p90_ns", "p99_ns", "cpu_ns_per_request", "errors",
                "allocs_per_request", "alloc_bytes_per_request", "gc_per_10k",
                "instructions_per_request", "syscalls_per_request")


def fingerprint(md: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The machine as series key: CPU model, cores, kernel, Python and OpenSSL, and a
    short hash of them (``fingerprint``). Another machine, or the same one with another
    kernel or Python, gets another fingerprint and so its own series."""
    md = dict(md or {})
    now = system_metadata()
    facts = {
        "cpu_model": md.get("cpu_model") or now["cpu_model"],
        "cores": int(md.get("cpus") or now["cpus"]),
        "kernel": md.get("kernel") or now["kernel"],
        "python": md.get("python") or now["python"],
        "openssl": md.get("openssl") or now["openssl"],
    }
    text = "|".join(str(facts[k]) for k in ("cpu_model", "cores", "kernel", "python", "openssl"))
    facts["fingerprint"] = hashlib.sha256(text.encode()).hexdigest()[:12]
    return facts


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if isnan(f) or f in (float("inf"), float("-inf")) else f


def _cell_points(rs: ResultSet) -> list[Point]:
    out: list[Point] = []
    rates: dict[tuple[str, str], list[float]] = {}
    for (c, s, _), r in rs:
        if isinstance(r, MeasureResult):
            rates.setdefault((c, s), []).append(r.calls_per_s)
    for sc in rs.scenarios:
        # the scenario's own set: its cells' repeats are then found among its results only
        for row in cell_rows(rs.select(scenario=sc), sc):
            client = row["client"]
            got = rates.get((client, sc))
            row["rps_ci"] = median_ci(got)[:2] if got else None
            notes = ";".join(sorted(row["notes"])) if row.get("notes") else ""
            for metric, ci_col in CELL_METRICS.items():
                v = _num(row.get(metric))
                if v is None:
                    continue
                lo = hi = None
                ci = row.get(ci_col) if ci_col else None
                if ci and len(ci) == 2 and row["repeats"] > 1:
                    lo, hi = _num(ci[0]), _num(ci[1])
                out.append(Point(client, sc, metric, v, lo, hi, int(row["repeats"]), notes))
    return out


def _shape(r: BenchResult) -> str:
    c = r.config
    proto = f"{c.protocol} -m{c.streams}" if c.protocol in ("h2", "h3") else "http/1.1"
    rate = f"--rate {c.rate:g}" if c.rate else "closed loop"
    ka = "" if c.keepalive else " no keep-alive"
    return f"{r.method} {proto} -c{c.concurrency} -t{c.threads} {rate}{ka}"


def _lone_points(obj: Any) -> list[Point]:
    """One point per (label, run shape, metric); repeats of one (a list with a label twice)
    become their median with its CI, like a compare cell."""
    cells: dict[tuple[str, str, str], list[tuple[float, int | None, str]]] = {}
    for label, _, _, r in entries(obj):
        row = record_row(label, "", 0, r)
        scenario = _shape(r) if isinstance(r, BenchResult) else ""
        samples = int(row["requests"]) if _num(row["requests"]) is not None else None
        for metric in LONE_METRICS:
            v = _num(row.get(metric))
            if v is not None:
                cells.setdefault((label, scenario, metric), []).append(
                    (v, samples, str(row.get("notes") or "")))
    out: list[Point] = []
    for (label, scenario, metric), got in cells.items():
        if len(got) == 1:
            v, n, notes = got[0]
            out.append(Point(label, scenario, metric, v, None, None, n, notes))
            continue
        vals = [g[0] for g in got]
        lo, hi, _ = median_ci(vals)
        out.append(Point(label, scenario, metric, median_spread(vals)[0], _num(lo), _num(hi),
                         len(vals), ";".join(dict.fromkeys(g[2] for g in got if g[2]))))
    return out


def points_of(obj: Any) -> list[Point]:
    """The points of a ResultSet (one per cell and metric) or of lone results."""
    if isinstance(obj, ResultSet):
        return _cell_points(obj)
    return _lone_points(obj)


def _speed(md: Mapping[str, Any]) -> float | None:
    si = md.get("speed_index")
    return _num(si.get("median")) if isinstance(si, Mapping) else None


def new_run(source: str, points: Sequence[Point], md: Mapping[str, Any] | None = None, *,
            label: str = "", cwd: str | None = None, clients: Iterable[str] = (),
            started_unix_ns: int | None = None, extra: Mapping[str, Any] | None = None,
            git: dict[str, Any] | None = None) -> NewRun:
    """A run of ``points`` measured under metadata ``md``: git state of ``cwd`` (default:
    the working directory; ``git`` when already read) and of every client spec ``NAME@PATH``
    naming a local work tree."""
    md = dict(md or {})
    client_git: dict[str, Any] = {}
    for spec in clients:
        name, at, path = str(spec).partition("@")
        if at and os.path.isdir(os.path.expanduser(path)):
            state = git_state(os.path.expanduser(path))
            if state is not None:
                client_git[name.split("[")[0].strip()] = {"path": path, **state}
    meta: dict[str, Any] = {k: md[k] for k in ("platform", "clock_source", "cpus", "noise",
                                                "interrupted", "duration_s") if k in md}
    if isinstance(md.get("speed_index"), Mapping):
        meta["speed_unit"] = md["speed_index"].get("unit")
        ws = md["speed_index"].get("working_set_ns")
        if isinstance(ws, Mapping):
            meta["working_set_ns"] = ws.get("median")
    if client_git:
        meta["client_git"] = client_git
    meta.update(extra or {})
    return NewRun(
        source=source, machine=fingerprint(md), points=list(points), label=label,
        started_unix_ns=int(started_unix_ns or md.get("started_unix_ns") or time.time_ns()),
        git=git if git is not None else git_state(cwd),
        host=str(md.get("hostname") or system_metadata()["hostname"]),
        speed_ns=_speed(md), wakeup=md.get("wakeup_ns"), placement=md.get("placement"),
        versions={"httpbench": __version__, "clients": md.get("client_versions") or {}},
        meta=meta)


def run_of(obj: Any, source: str, *, cwd: str | None = None,
           clients: Iterable[str] = ()) -> NewRun:
    """A compare ResultSet, a BenchResult/MeasureResult or a list of them as a NewRun."""
    pending = git_state_start(cwd)  # git runs while the points are computed
    if isinstance(obj, ResultSet):
        md: dict[str, Any] = dict(obj.metadata)
        clients = list(clients) or list(md.get("clients") or [])
        label = "compare"
    else:
        recs = [obj] if isinstance(obj, (BenchResult, MeasureResult)) else list(obj)
        md = dict(recs[0].metadata) if recs else {}
        label = recs[0].label if recs else ""
        md.setdefault("started_unix_ns", recs[0].start_unix_ns if recs else None)
    points = points_of(obj)
    return new_run(source, points, md, label=label, cwd=cwd, clients=clients,
                   git=git_state_finish(pending) or {})
