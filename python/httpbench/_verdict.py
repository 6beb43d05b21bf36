"""The verdict of a compare run: per scenario, its clients ranked by the scenario's
primary figure, each with its ratio to the best and that ratio's interval, and one
generated sentence of findings.

Computed from the same :func:`~httpbench._rows.cell_rows` the tables print, so the
ranking can never disagree with the table under it. The primary figure is the
question the scenario asks: CPU per request for one request at a time (the
client's own cost), requests per second with several in flight, and the time
per transfer for downloads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from . import _units as U
from ._results import ResultSet
from ._rows import cell_rows

__all__ = ["PRIMARY", "Standing", "Verdict", "is_compare_run", "primary_metric", "verdict",
           "verdicts"]

# row key -> (name in prose, higher is better, short name)
PRIMARY: dict[str, tuple[str, bool, str]] = {
    "cpu_ns_per_request": ("CPU per request", False, "CPU/req"),
    "rps": ("requests per second", True, "req/s"),
    "p50_ns": ("median time per transfer", False, "p50"),
}


def primary_metric(scenario: dict[str, Any] | None) -> str:
    """The row key that answers ``scenario``'s question (its stored definition)."""
    sc = scenario or {}
    if sc.get("download"):
        return "p50_ns"
    if int(sc.get("concurrency") or 1) > 1:
        return "rps"
    return "cpu_ns_per_request"


@dataclass(frozen=True, slots=True)
class Standing:
    """One client's place: its primary figure (base units) with the median's interval,
    and how many times the best it is (>= 1; for a rate, best / its rate) with the
    interval of that ratio (None for the best or with one repeat)."""

    client: str
    value: float
    ci: tuple[float, float] | None
    ratio: float
    ratio_ci: tuple[float, float] | None
    row: dict[str, Any]

    @property
    def tied(self) -> bool:
        """True when the ratio's interval reaches 1: not told apart from the best."""
        return self.ratio_ci is not None and self.ratio_ci[0] <= 1.0


@dataclass(frozen=True, slots=True)
class Verdict:
    """A scenario's clients ranked by its primary figure, best first."""

    scenario: str
    metric: str
    standings: tuple[Standing, ...]
    sentence: str
    coverage: float

    @property
    def title(self) -> str:
        """The primary figure's name ('CPU per request')."""
        return PRIMARY[self.metric][0]

    @property
    def ranking(self) -> list[str]:
        """The clients, best first."""
        return [s.client for s in self.standings]


def _ci(row: dict[str, Any], key: str) -> tuple[float, float] | None:
    ci = row.get(key + "_ci")
    if row.get("repeats", 1) < 2 or not ci or any(_bad(x) for x in ci):
        return None
    return float(ci[0]), float(ci[1])


def _bad(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _ratio(value: float, best: float, higher: bool) -> float:
    if higher:
        return best / value if value > 0 else math.inf
    return value / best if best > 0 else (1.0 if value == best else math.inf)


def _ratio_ci(ci: tuple[float, float] | None, best_ci: tuple[float, float] | None,
              higher: bool) -> tuple[float, float] | None:
    """The ratio's interval from the two medians' intervals (their extreme quotients:
    wide, never narrower than what the repeats support)."""
    if ci is None or best_ci is None:
        return None
    lo, hi = ci
    blo, bhi = best_ci
    if higher:
        if lo <= 0 or hi <= 0:
            return None
        return blo / hi, bhi / lo
    if blo <= 0 or bhi <= 0:
        return None
    return lo / bhi, hi / blo


def format_value(metric: str, v: float) -> str:
    """The primary figure as tables print it ('5.32 µs', '94.6k req/s', '5.03 ms')."""
    if metric == "rps":
        return f"{U.format_count(v, 3)} req/s"
    return U.format_duration(v)


def format_ratio(s: Standing) -> str:
    """'2.12× (2.05–2.20)', 'best', or '1.03× (0.98–1.10, tied)'."""
    if s.ratio == 1.0 and s.ratio_ci is None:
        return "best"
    r = f"{s.ratio:.2f}×" if s.ratio < 10 else f"{s.ratio:.0f}×"
    if s.ratio_ci is None:
        return r
    lo, hi = s.ratio_ci
    fmt = (lambda x: f"{x:.2f}") if hi < 10 else (lambda x: f"{x:.0f}")
    return f"{r} ({fmt(lo)}–{fmt(hi)}{', tied' if s.tied else ''})"


def verdict(rows: list[dict[str, Any]], scenario: str, metric: str) -> Verdict | None:
    """Rank ``rows`` (a scenario's :func:`cell_rows`) by ``metric``; None when no row has
    it. A client with errors in every request still ranks by its figure; its row says so."""
    name, higher, _short = PRIMARY[metric]
    have = [r for r in rows if not _bad(r.get(metric)) and float(r[metric]) > 0]
    if not have:
        return None
    have.sort(key=lambda r: (-float(r[metric]) if higher else float(r[metric]), r["client"]))
    best = have[0]
    best_v = float(best[metric])
    best_ci = _ci(best, metric)
    out = []
    for i, r in enumerate(have):
        v = float(r[metric])
        ci = _ci(r, metric)
        ratio = 1.0 if i == 0 else _ratio(v, best_v, higher)
        rci = None if i == 0 else _ratio_ci(ci, best_ci, higher)
        out.append(Standing(r["client"], v, ci, ratio, rci, r))
    coverage = max((float(r.get("ci_coverage") or 0.0) for r in have), default=0.0)
    return Verdict(scenario, metric, tuple(out), _sentence(scenario, metric, out), coverage)


def _sentence(scenario: str, metric: str, st: list[Standing]) -> str:
    """'get-150b: CPU per request 5.32 µs with native, 11.3 µs with pycurl (2.1×),
    128 µs with urllib3 (24×) … 427 µs with requests (80×); Python allocations per
    request from 2 (native) to 2,087 (requests).'"""
    name = PRIMARY[metric][0]

    def bit(i: int, s: Standing) -> str:
        out = f"{format_value(metric, s.value)} with {s.client}"
        if i:
            out += f" ({s.ratio:.1f}×)" if s.ratio < 10 else f" ({s.ratio:.0f}×)"
        return out

    bits = [bit(i, s) for i, s in enumerate(st)]
    listed = ", ".join(bits) if len(bits) <= 4 else ", ".join(bits[:3]) + " … " + bits[-1]
    head = f"{scenario}: {name} {listed}"
    extra = []
    tied = [s.client for s in st[1:] if s.tied]
    if tied:
        extra.append(f"{', '.join(tied)} not told apart from {st[0].client} "
                     "(the ratio's interval reaches 1)")
    allocs = [(float(s.row["allocs_per_request"]), s.client) for s in st
              if not _bad(s.row.get("allocs_per_request"))]
    if len(allocs) >= 2:
        lo, hi = min(allocs), max(allocs)
        if hi[0] > max(2 * lo[0], lo[0] + 10):
            extra.append(f"Python allocations per request from {_count(lo[0])} ({lo[1]}) "
                         f"to {_count(hi[0])} ({hi[1]})")
    errs = [s.client for s in st if s.row.get("errors")]
    if errs:
        extra.append("errors in " + ", ".join(errs))
    return head + ("; " + "; ".join(extra) if extra else "") + "."


def _count(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else U.format_count(v, 3)


def is_compare_run(rs: ResultSet) -> bool:
    """True for a compare run (its scenarios defined in its metadata): its rows are rival
    clients. A pytest baseline's rows are different tests, never ranked."""
    md = rs.metadata
    return md.get("source") is None and isinstance(md.get("scenarios"), dict) \
        and bool(md["scenarios"])


def verdicts(rs: ResultSet) -> list[Verdict]:
    """One :class:`Verdict` per scenario of a compare run that has measured rows, in the
    run's scenario order; none for other sets (see :func:`is_compare_run`)."""
    if not is_compare_run(rs):
        return []
    md = rs.metadata
    order = list(md.get("scenario_order") or rs.scenarios)
    order += [s for s in rs.scenarios if s not in order]
    defs = md.get("scenarios") or {}
    out = []
    for s in order:
        v = verdict(cell_rows(rs, s), s, primary_metric(defs.get(s)))
        if v is not None:
            out.append(v)
    return out
