"""Comparing a run with a baseline: one module, two policies.

* Significance (:func:`diff`, ``httpbench diff A B`` / ``httpbench report A
  --baseline B``): two saved results with repeats; each metric's repeats are
  tested (Mann–Whitney U or Welch's t) and a change counts when it is
  significant at ``alpha`` and at least ``min_change``.
* Calibrated tolerance (:func:`compare_metrics`, the pytest plugin's baseline
  check): one measurement against a stored one, timing metrics scaled by the
  machine's calibration ratio and allowed ``tolerance``; deterministic counts
  compared tightly.

Both read the same quantities (``_rows`` / ``_budget.result_metrics``) and say
"slower"/"faster" (or "worse"/"better") the same way: a change against the
metric's good direction.
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import _units as U
from ._budget import METRICS, Metric, format_value
from ._machine import DRIFT_LIMIT, machine_change
from ._results import ResultSet
from ._rows import as_set, isnan, result_rows
from ._stats import mann_whitney_u, median_ci, welch_t_test
from ._tables import median_cell, render_table
from ._unlike import (
    build_difference,
    cell_cautions,
    machine_line,
    noise_notes,
    run_metadata,
    stack_causes,
    unlike_settings,
)

__all__ = [
    "DETERMINISTIC_COMPARED",
    "DIFF_METRICS",
    "NO_CHANGE",
    "NOT_TESTED",
    "TIMING_COMPARED",
    "BaselineRegression",
    "Change",
    "CompareRow",
    "Comparison",
    "change_text",
    "compare_metrics",
    "diff",
    "function_movers",
    "format_compare_table",
]

# --------------------------------------------------------------------------
# significance policy: two saved results with repeats

# metric key -> (title, kind, higher_is_better, verdict words (better, worse))
DIFF_METRICS: dict[str, tuple[str, str, bool, tuple[str, str]]] = {
    "rps": ("req/s", "rate", True, ("faster", "slower")),
    "p50_ns": ("p50", "duration", False, ("faster", "slower")),
    "p99_ns": ("p99", "duration", False, ("faster", "slower")),
    "p999_ns": ("p99.9", "duration", False, ("faster", "slower")),
    "cpu_ns_per_request": ("CPU/req", "duration", False, ("faster", "slower")),
    "allocs_per_request": ("allocs/req", "count", False, ("better", "worse")),
    "alloc_bytes_per_request": ("alloc/req", "size", False, ("better", "worse")),
    "native_allocs_per_request": ("native allocs/req", "count", False, ("better", "worse")),
    "gc_per_10k": ("GC/10k req", "count", False, ("better", "worse")),
    "peak_rss_bytes": ("peak RSS", "size", False, ("better", "worse")),
    "errors": ("errors", "count", False, ("better", "worse")),
}
NO_CHANGE = "no significant change"


def change_text(rel: float) -> str:
    """A relative change as text ("+12%"); "from 0" when the baseline was 0."""
    return "from 0" if rel == math.inf else U.format_change(rel)

NOT_TESTED = "not tested"


@dataclass(frozen=True, slots=True)
class Change:
    """One metric of one (client, scenario): baseline vs current across repeats.

    ``change``: median(current)/median(baseline) - 1; ``p_value`` and ``test``
    ("mann-whitney", "welch", or "" when not tested); ``verdict``: "faster" /
    "slower" (time and rate metrics), "better" / "worse" (allocation, memory,
    error metrics), "no significant change", or "not tested" (fewer than 2
    repeats on a side - rerun with ``repeat >= 3``).
    """

    client: str
    scenario: str
    metric: str
    baseline: tuple[float, ...]
    current: tuple[float, ...]
    change: float
    p_value: float
    test: str
    verdict: str
    improved: bool | None
    # why the cell's figures are weak ("disturbed in current", "thin in baseline") or
    # what else explains the change (a changed transport stack, the machine's speed):
    # a significant verdict on such a cell is shown, marked, and not counted
    caution: str = ""
    # a timing metric's change once the machine's speed change is taken out (NaN when
    # either run has no speed index, or for counts)
    normalised: float = math.nan

    @property
    def title(self) -> str:
        """Human name of the metric."""
        return DIFF_METRICS[self.metric][0]

    @property
    def significant(self) -> bool:
        """True for a significant change (faster/slower/better/worse)."""
        return self.verdict not in (NO_CHANGE, NOT_TESTED)

    @property
    def counted(self) -> bool:
        """A significant change on a cell both runs measured well (not marked)."""
        return self.significant and not self.caution

    @property
    def shown_verdict(self) -> str:
        """The verdict as tables print it: a marked one says why it is not counted."""
        if self.caution and self.significant:
            return f"{self.verdict}? ({self.caution}: not counted)"
        return self.verdict

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN as None)."""
        def f(x: float) -> float | None:
            return None if x is None or not math.isfinite(x) else x
        return {
            "client": self.client, "scenario": self.scenario, "metric": self.metric,
            "baseline": [f(x) for x in self.baseline], "current": [f(x) for x in self.current],
            "change": f(self.change), "p_value": f(self.p_value), "test": self.test,
            "verdict": self.verdict, "improved": self.improved, "caution": self.caution,
            "speed_normalised_change": f(self.normalised),
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """Result of :func:`diff`: every :class:`Change`, plus what was
    only on one side."""

    changes: tuple[Change, ...]
    alpha: float
    min_change: float
    only_baseline: tuple[tuple[str, str], ...] = ()
    only_current: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    # the machine line: both runs' speed index and wake-up costs
    machine: str = ""
    # timings must move more than this: two runs of one command differ by it
    run_noise: float = 0.0

    @property
    def regressions(self) -> list[Change]:
        """Significant changes for the worse (on cells both runs measured well)."""
        return [c for c in self.changes if c.counted and c.improved is False]

    @property
    def improvements(self) -> list[Change]:
        """Significant changes for the better (on cells both runs measured well)."""
        return [c for c in self.changes if c.counted and c.improved]

    @property
    def marked(self) -> list[Change]:
        """Significant changes resting on a disturbed or thin cell: shown, not counted."""
        return [c for c in self.changes if c.significant and c.caution]

    @property
    def summary(self) -> str:
        """'2 regressions, 5 improvements (...)', with the marked verdicts not counted."""
        line = f"{len(self.regressions)} regressions, {len(self.improvements)} improvements"
        if self.marked:
            line += (f"; {len(self.marked)} more marked '?' and not counted (a disturbed "
                     "or thin cell, or explained by a changed stack, build or machine speed)")
        floor = (f", timings within {self.run_noise:.0%} run-to-run noise"
                 if self.run_noise > self.min_change else "")
        return line + (f" (alpha={self.alpha:g}, changes under {self.min_change:.0%} "
                       f"ignored{floor})")

    def get(self, client: str, scenario: str, metric: str) -> Change | None:
        """The change of one metric, or None."""
        for c in self.changes:
            if (c.client, c.scenario, c.metric) == (client, scenario, metric):
                return c
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "alpha": self.alpha, "min_change": self.min_change,
            "changes": [c.to_dict() for c in self.changes],
            "only_baseline": [list(k) for k in self.only_baseline],
            "only_current": [list(k) for k in self.only_current],
            "notes": list(self.notes),
            "machine": self.machine,
        }

    def _row(self, c: Change) -> list[str]:
        kind = DIFF_METRICS[c.metric][1]
        return [c.client, c.scenario, c.title, median_cell(c.baseline, kind),
                median_cell(c.current, kind), change_text(c.change),
                "—" if math.isnan(c.normalised) else change_text(c.normalised),
                "—" if math.isnan(c.p_value) else f"{c.p_value:.3f}", c.shown_verdict]

    _HEAD = ("client", "scenario", "metric", "baseline", "current", "change",
             "speed-normalised", "p", "verdict")

    def format(self, fmt: str = "text", full: bool = False) -> str:
        """The tally first, the machine line, what makes the runs unlike, then the
        significant changes (counted and marked); the rest is one line unless ``full``
        (``--all``), then every compared metric."""
        if fmt == "json":
            return json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"
        md = fmt == "md"
        out = [f"**{self.summary}**" if md else self.summary]
        if self.machine:
            out.append(self.machine)
        if self.notes:
            bullet = "- " if md else "  * "
            out.append(("**Unlike runs: read the verdicts with these in mind**" if md
                        else "Unlike runs: read the verdicts with these in mind") + "\n"
                       + "\n".join(bullet + n for n in self.notes))
        align = "lll" + "r" * 6
        sig = [c for c in self.changes if c.significant]
        rest = [c for c in self.changes if not c.significant]
        if not self.changes:
            out.append("(nothing in common to compare)")
        elif full:
            out.append(render_table(list(self._HEAD), [self._row(c) for c in self.changes], fmt,
                                    align=align))
        else:
            if sig:
                out.append(render_table(list(self._HEAD), [self._row(c) for c in sig], fmt,
                                        align=align))
            if rest:
                untested = sum(1 for c in rest if c.verdict == NOT_TESTED)
                out.append(f"{len(rest)} more compared metrics: "
                           f"{len(rest) - untested} with no significant change"
                           + (f", {untested} not tested (one repeat)" if untested else "")
                           + " (--all lists them)")
        for what, keys in (("only in baseline", self.only_baseline),
                           ("only in current", self.only_current)):
            if keys:
                out.append(f"{what}: " + ", ".join(f"{c}/{s}" for c, s in keys))
        return "\n\n".join(out) + "\n"

    def __str__(self) -> str:
        return self.format("text")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        head = list(self._HEAD)
        colour = {"slower": "#c0392b", "worse": "#c0392b", "faster": "#1e8449",
                  "better": "#1e8449"}

        def table(changes: Sequence[Change]) -> str:
            out = ['<table class="httpbench">', "<tr>" + "".join(
                f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
            for r in (self._row(c) for c in changes):
                style = colour.get(r[-1])
                cells = [f'<td style="text-align:{"left" if j < 3 else "right"}">'
                         f"{html.escape(v)}</td>" for j, v in enumerate(r[:-1])]
                verdict = html.escape(r[-1])
                if style:
                    verdict = f'<b style="color:{style}">{verdict}</b>'
                out.append("<tr>" + "".join(cells) + f"<td>{verdict}</td></tr>")
            return "\n".join(out + ["</table>"])

        sig = [c for c in self.changes if c.significant]
        rest = [c for c in self.changes if not c.significant]
        out = [f"<p><b>{html.escape(self.summary)}</b></p>",
               f"<p>{html.escape(self.machine)}</p>" if self.machine else "",
               "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in self.notes) + "</ul>"
               if self.notes else "", table(sig) if sig else ""]
        if rest:  # the tally first, the rest folded (as the HTML report does)
            out.append(f"<details><summary>{len(rest)} more compared metrics</summary>"
                       + table(rest) + "</details>")
        return {"text/plain": self.format("text"), "text/html": "\n".join(out)}


# Two runs of the same command on a shared 2-vCPU VM move a timing by 5-7 % (a machine
# state no repeat inside one run samples); a pair of runs cannot see less: a history can.
RUN_NOISE = 0.08


def diff(baseline: Any, current: Any, *, alpha: float = 0.05,
         min_change: float = 0.02, metrics: Sequence[str] | None = None,
         test: str = "auto", run_noise: float = RUN_NOISE) -> Comparison:
    """Compare two runs metric by metric with a significance verdict across repeats.

    ``baseline``/``current``: ResultSets, records, lists of records or file
    paths. For each (client, scenario) in both and each metric present, the
    repeats' values are compared: ``test="auto"`` uses the Mann–Whitney U test
    when both sides have >= 4 repeats (exact p for small samples) and Welch's
    t-test for 2-3 repeats (where U cannot reach alpha=0.05); a change is
    significant when p < ``alpha`` after the Benjamini-Hochberg correction over the
    cell's metrics (so two runs of one command do not differ by chance), the medians
    differ by at least ``min_change`` (default 2%, below which timing noise dominates)
    and by more than either side's own run-to-run noise (half its median's confidence
    interval); a timing (durations and rates) also by at least ``run_noise`` (default
    8%: what two runs of one command differ by on a shared VM, which repeats inside
    one run do not sample; a history finds smaller steps). Sides with one repeat are
    "not tested".
    """
    if not 0 <= run_noise < 1:
        raise ValueError(f"run_noise must be in [0, 1), not {run_noise!r}")
    if test not in ("auto", "mann-whitney", "welch"):
        raise ValueError(f"unknown test {test!r}; use auto, mann-whitney or welch")
    base, cur = as_set(baseline), as_set(current)
    want = list(metrics) if metrics is not None else list(DIFF_METRICS)
    for m in want:
        if m not in DIFF_METRICS:
            raise ValueError(f"unknown metric {m!r}; one of {list(DIFF_METRICS)}")

    def group(rs: ResultSet) -> dict[tuple[str, str], list[dict[str, Any]]]:
        g: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in result_rows(rs):
            g.setdefault((row["client"], row["scenario"]), []).append(row)
        return g

    gb, gc = group(base), group(cur)
    changes = []
    for key in gb:
        if key not in gc:
            continue
        for m in want:
            bv = tuple(float(r[m]) for r in gb[key] if not isnan(r[m]))
            cv = tuple(float(r[m]) for r in gc[key] if not isnan(r[m]))
            if not bv or not cv:
                continue
            floor = (max(min_change, run_noise) if DIFF_METRICS[m][1] in ("duration", "rate")
                     else min_change)
            changes.append(_change(key, m, bv, cv, alpha, floor, test))
    changes = _false_discoveries_dropped(changes, alpha)
    # a tail percentile of a short round rests on its last few samples: not a verdict
    fewest = {k: min((float(r.get("requests") or 0) for r in gb[k] + gc.get(k, [])),
                     default=0.0) for k in gb}
    changes = [dataclasses.replace(c, caution=f"{c.title} of rounds of {fewest[k]:,.0f} "
                                              "requests: its last few samples")
               if c.significant and fewest[k] < _TAIL_REQUESTS.get(c.metric, 0) else c
               for c in changes for k in [(c.client, c.scenario)]]
    cautions = cell_cautions(cur, "current")
    for k, why in cell_cautions(base, "baseline").items():
        cautions[k] = f"{why}, {cautions[k]}" if k in cautions else why
    stacks = stack_causes(base, cur)
    build = build_difference(run_metadata(base), run_metadata(cur))
    speed = machine_change(run_metadata(base), run_metadata(cur))
    changes = [_explained(c, cautions.get((c.client, c.scenario), ""), stacks.get(c.client),
                          build, speed, min_change, alpha) for c in changes]
    changes = _wall_only(changes, run_metadata(cur).get("scenarios") or {})
    notes = [f"settings differ: {s}" for s in unlike_settings(base, cur)]
    notes += [f"transport stack of {c} differs: {why}" for c, why in stacks.items()]
    notes += noise_notes("baseline", base) + noise_notes("current", cur)
    return Comparison(
        changes=tuple(changes), alpha=alpha, min_change=min_change, run_noise=run_noise,
        only_baseline=tuple(k for k in gb if k not in gc),
        only_current=tuple(k for k in gc if k not in gb),
        notes=tuple(notes),
        machine=machine_line(base, cur),
    )


_TIMING = ("rps", "p50_ns", "p99_ns", "p999_ns", "cpu_ns_per_request")
# a tail percentile's verdict needs this many requests per round (ten samples beyond it)
_TAIL_REQUESTS = {"p99_ns": 1_000, "p999_ns": 10_000}


def _wall_only(changes: list[Change], scenarios: dict[str, Any]) -> list[Change]:
    """One request at a time, req/s is 1 / (time per call): a req/s change that neither
    the median latency nor the CPU per request shows is time between or around the
    calls (the process descheduled by a busy machine), not the client's work: marked."""
    moved = {(c.client, c.scenario) for c in changes
             if c.metric in ("p50_ns", "cpu_ns_per_request") and c.significant}
    out = []
    for c in changes:
        sc = scenarios.get(c.scenario) if isinstance(scenarios, dict) else None
        sequential = isinstance(sc, dict) and int(sc.get("concurrency") or 1) == 1
        if c.metric == "rps" and c.significant and not c.caution and sequential \
                and (c.client, c.scenario) not in moved:
            c = dataclasses.replace(c, caution="req/s alone moved (neither p50 nor CPU/req): "
                                               "the machine's scheduling")
        out.append(c)
    return out


def _explained(c: Change, caution: str, stack: str | None, build: str, speed: float | None,
               min_change: float, alpha: float) -> Change:
    """``c`` with its speed-normalised change and the causes that explain it: a changed
    transport stack (every metric of that client), changed build features (peak RSS),
    a machine-speed change the timing change does not exceed."""
    why = [x for x in (c.caution, caution) if x]
    norm = math.nan
    if c.metric in _TIMING and speed is not None and math.isfinite(c.change):
        norm = ((1 + c.change) * (1 + speed) if c.metric == "rps"
                else (1 + c.change) / (1 + speed)) - 1
        # the same test on the current values put on the baseline machine's speed
        f = (1 + speed) if c.metric == "rps" else 1 / (1 + speed)
        cv = tuple(v * f for v in c.current)
        p = (mann_whitney_u(c.baseline, cv)[1] if c.test == "mann-whitney"
             else welch_t_test(c.baseline, cv)) if c.test else math.nan
        # a speed index tracks the machine only roughly: a residual under a third of its
        # move is within that approximation
        if c.significant and (abs(norm) < max(min_change, abs(speed) / 3)
                              or (norm > 0) != (c.change > 0) or not p < alpha):
            why.append(f"within the machine's speed change ({speed:+.1%})")
    if stack:
        why.append("its transport stack differs")
    if build and c.metric == "peak_rss_bytes":
        why.append("the builds differ")
    return dataclasses.replace(c, caution=", ".join(why), normalised=norm)


def _false_discoveries_dropped(changes: list[Change], alpha: float) -> list[Change]:
    """Benjamini-Hochberg within each (client, scenario) cell: a cell compares ~10
    metrics, and at p < alpha each on its own two runs of one command would differ by
    chance. A change stays significant only when its p is under its rank's share of
    alpha (false discovery rate alpha per cell; a real change moves several metrics)."""
    cells: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(changes):
        if c.test and math.isfinite(c.p_value):
            cells.setdefault((c.client, c.scenario), []).append(i)
    keep: set[int] = set()
    for idx in cells.values():
        tested = sorted((changes[i].p_value, i) for i in idx)
        cutoff = -1.0
        for k, (p, _i) in enumerate(tested, 1):
            if p <= alpha * k / len(tested):
                cutoff = p
        keep.update(i for p, i in tested if p <= cutoff)
    return [dataclasses.replace(c, verdict=NO_CHANGE, improved=None)
            if c.significant and i not in keep else c for i, c in enumerate(changes)]


def _noise(values: tuple[float, ...]) -> float:
    """Half the width of the median's confidence interval, relative to the median: the
    run-to-run noise of one side."""
    lo, hi, _cov = median_ci(values)
    med = statistics.median(values)
    return (hi - lo) / 2 / abs(med) if med and math.isfinite(lo) else 0.0


def _change(key: tuple[str, str], metric: str, bv: tuple[float, ...], cv: tuple[float, ...],
            alpha: float, min_change: float, test: str) -> Change:
    _title, _kind, higher_better, (good, bad) = DIFF_METRICS[metric]
    mb, mc = statistics.median(bv), statistics.median(cv)
    if mb == 0:
        rel = 0.0 if mc == 0 else math.inf
    else:
        rel = mc / mb - 1.0
    if len(bv) < 2 or len(cv) < 2:
        return Change(key[0], key[1], metric, bv, cv, rel, math.nan, "", NOT_TESTED, None)
    use = test
    if use == "auto":
        use = "mann-whitney" if min(len(bv), len(cv)) >= 4 else "welch"
    if use == "mann-whitney":
        _u, p = mann_whitney_u(bv, cv)
    else:
        p = welch_t_test(bv, cv)
    verdict, improved = NO_CHANGE, None
    # beyond the run-to-run noise: more than either side's own median interval
    beyond = abs(rel) > max(_noise(bv), _noise(cv))
    if p < alpha and abs(rel) >= min_change and mc != mb and beyond:
        improved = (mc > mb) == higher_better
        verdict = good if improved else bad
    return Change(key[0], key[1], metric, bv, cv, rel, p, use, verdict, improved)


# --------------------------------------------------------------------------
# calibrated-tolerance policy: one measurement against a stored baseline

# Timing metrics a baseline comparison checks, by result kind; they are scaled by the
# calibration ratio. p50 rather than p99: tails of short runs are too noisy to gate CI on.
TIMING_COMPARED = {
    "measure": ("p50", "cpu_per_request"),
    "bench": ("rps", "p50", "cpu_per_request"),
}
# Deterministic metrics, compared tightly (not scaled): (relative, absolute) slack.
# Instruction counts move by a few hundred per call with the environment (paths,
# environment variables), so they get a relative tolerance (see compare_metrics).
DETERMINISTIC_COMPARED = {
    "allocs_per_request": (0.02, 0.5),
    "alloc_bytes_per_request": (0.02, 16.0),
    "errors": (0.0, 0.0),
    "requests": (0.0, 0.0),
    "instructions_per_request": (0.01, 0.0),
    "syscalls_per_request": (0.0, 0.0),
    "gc_per_request": (0.0, 0.0),
}


@dataclass(frozen=True)
class CompareRow:
    """One metric compared with its baseline.

    ``expected`` is the baseline value scaled by the calibration ratio (timing
    metrics) or the baseline itself (deterministic ones); ``verdict`` is
    "ok", "slower" (worse beyond tolerance) or "faster" (better beyond
    tolerance; an error only with fail-faster).
    """

    metric: Metric
    baseline: float
    expected: float
    measured: float
    allowed: str
    verdict: str

    @property
    def change(self) -> str:
        """Relative change of the measurement against ``expected``."""
        if self.expected:
            return f"{(self.measured - self.expected) / self.expected * 100:+.1f}%"
        return "+0" if self.measured == self.expected else \
            f"{self.measured - self.expected:+g}"


def compare_metrics(
    baseline: Mapping[str, float],
    current: Mapping[str, float],
    *,
    kind: str,
    scale: float,
    tolerance: float,
    bounded: bool = False,
    instructions_tolerance: float | None = None,
    noise: Mapping[str, float] | None = None,
) -> list[CompareRow]:
    """Compare ``current`` metrics with ``baseline`` ones (both from :func:`result_metrics`).

    Timing metrics of ``kind`` ("measure" or "bench") are expected at
    ``baseline * scale`` (durations) or ``baseline / scale`` (rates), where
    ``scale`` is this machine's calibration time over the baseline's, and may
    differ by ``tolerance`` (a fraction). Deterministic metrics
    (:data:`DETERMINISTIC_COMPARED`) are compared with a small fixed slack,
    whatever the tolerance; ``requests`` only when the run had a fixed count
    (``bounded``); ``instructions_tolerance`` replaces the instruction count's
    default 1 %. ``noise``: a timing metric's run-to-run noise measured for this test
    (relative); a change within it is not a verdict, whatever the tolerance. A metric
    missing on either side is not compared.
    """
    rows = []
    for name in TIMING_COMPARED.get(kind, ()):
        if name not in baseline or name not in current:
            continue
        m = METRICS[name]
        base, cur = float(baseline[name]), float(current[name])
        expected = base * scale if m.upper else base / scale
        noisy = float((noise or {}).get(name) or 0.0)
        tol = max(tolerance, noisy)
        if m.upper:
            worse = cur > expected * (1 + tol)
            better = cur < expected / (1 + tol)
        else:
            worse = cur < expected / (1 + tol)
            better = cur > expected * (1 + tol)
        verdict = "slower" if worse else "faster" if better else "ok"
        band = f"{tol * 100:,.0f}" if tol >= 1 else f"{round(tol * 100, 1):g}"
        allowed = f"±{band}%" + (" (noise)" if noisy > tolerance else "")
        rows.append(CompareRow(m, base, expected, cur, allowed, verdict))
    for name, (rel, absolute) in DETERMINISTIC_COMPARED.items():
        if name not in baseline or name not in current or (name == "requests" and not bounded):
            continue
        m = METRICS[name]
        if name == "instructions_per_request" and instructions_tolerance is not None:
            rel = instructions_tolerance
        base, cur = float(baseline[name]), float(current[name])
        if name == "gc_per_request" and current.get("requests"):
            # Where the gen-0 counter stood when the run began shifts one collection.
            absolute = 1.0 / float(current["requests"])
        slack = max(abs(base) * rel, absolute)
        diff = cur - base if m.upper else base - cur  # > 0: worse
        verdict = "slower" if diff > slack else "faster" if diff < -slack else "ok"
        allowed = "exact" if slack == 0 else f"±{format_value(m.kind, slack)}"
        if name == "gc_per_request" and slack:
            allowed = "±1 collection"
        rows.append(CompareRow(m, base, base, cur, allowed, verdict))
    return rows


def format_compare_table(rows: list[CompareRow]) -> str:
    """Comparison rows as an aligned text table."""
    headers = ("metric", "baseline", "expected", "measured", "change", "allowed", "")
    cells = [headers] + [
        (
            r.metric.name,
            format_value(r.metric.kind, r.baseline),
            format_value(r.metric.kind, r.expected),
            format_value(r.metric.kind, r.measured),
            r.change,
            r.allowed,
            {"ok": "ok", "slower": "REGRESSED", "faster": "IMPROVED"}[r.verdict],
        )
        for r in rows
    ]
    return render_table(cells[0], cells[1:], style="bare")


def function_movers(baseline: Mapping[str, float], current: Mapping[str, float],
                    k: int = 8) -> str:
    """The functions whose inclusive instructions per call moved most, as a table
    (empty when either side has no per-function figures)."""
    if not baseline or not current:
        return ""
    names = set(baseline) | set(current)
    moves = [(current.get(n, 0.0) - baseline.get(n, 0.0), n) for n in names]
    moves = [m for m in moves if m[0]]
    moves.sort(key=lambda m: (-abs(m[0]), m[1]))
    if not moves:
        return ""
    rows = [[n if len(n) <= 60 else n[:57] + "...", U.format_count(baseline.get(n, math.nan)),
             U.format_count(current.get(n, math.nan)), f"{d:+,.0f}"] for d, n in moves[:k]]
    head = ["function (inclusive instructions/call)", "baseline", "measured", "change"]
    note = ("(top functions by inclusive cost on either side; a function outside one "
            "side's top list shows n/a there)")
    return "top movers:\n" + render_table(head, rows, style="bare") + "\n" + note


class BaselineRegression(AssertionError):
    """A measurement regressed against its saved baseline (or, with fail-faster, improved).

    ``rows`` holds every compared metric; ``scale`` the calibration ratio used;
    ``detail`` is appended to the message (the per-function movers).
    """

    __module__ = "httpbench"  # as users import it (and as pytest names it in a failure)

    def __init__(self, rows: list[CompareRow], *, key: str, scale: float,
                 fail_faster: bool = False, detail: str = "") -> None:
        self.rows = list(rows)
        self.key = key
        self.scale = scale
        bad = [r for r in self.rows
               if r.verdict == "slower" or (fail_faster and r.verdict == "faster")]
        worse = [r.metric.name for r in bad if r.verdict == "slower"]
        better = [r.metric.name for r in bad if r.verdict == "faster"]
        what = []
        if worse:
            what.append("regressed: " + ", ".join(worse))
        if better:
            what.append("improved beyond tolerance (stale baseline? re-save it): "
                        + ", ".join(better))
        super().__init__(
            f"{key} vs baseline: {'; '.join(what)}\n"
            f"(timing baselines scaled by this machine's calibration ratio {scale:.3f}"
            + (f": the machine ran {abs(scale - 1):.0%} {'slower' if scale > 1 else 'faster'} "
               "than when the baseline was saved; the rows are the change beyond that"
               if abs(scale - 1) > DRIFT_LIMIT else "") + ")\n"
            + format_compare_table(self.rows)
            + ("\n" + detail if detail else "")
        )


def __tracebackhide__(excinfo: Any) -> bool:
    """pytest leaves this module's frames out of a failure's traceback when the error is
    a baseline regression (the test's line is the one to read)."""
    return bool(excinfo.errisinstance(BaselineRegression))
