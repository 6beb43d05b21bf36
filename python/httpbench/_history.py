"""A history of runs, read back as series and checked for change points.

A series is one (subject, scenario, metric, machine) over the runs that measured
it, oldest first: the machine fingerprint is part of the key, so a run on other
hardware (or another kernel, Python, OpenSSL) starts its own series and is never
taken for a change of the code. Every point carries its run's speed index; a
point whose speed index moved more than :data:`SPEED_MOVED` from the series'
median is annotated, and ``METRIC@speed`` names the speed-adjusted series (the
figures scaled by the run's speed index against that median), which exists only
under that name.

:meth:`History.check` runs Otava on the newest ``last`` points of every series
and names, for each change point, the last run before it and the first after,
the relative change with its 95 % CI and the p-value. A regression is a change
point for the worse that is the series' latest one (the code still runs at the
worse level) with at least ``min_after`` runs after it and ``min_before`` before it,
so one noisy run never makes one, nor does a series too young to show its own spread.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._changepoints import (
    DEFAULT_MAX_PVALUE,
    DEFAULT_WINDOW,
    ChangePoint,
    detect,
    higher_is_better,
)
from ._conveniences import call
from ._historyrun import run_of
from ._historystore import HistoryError, Store, open_store

__all__ = ["SPEED_MOVED", "SPEED_SUFFIX", "CheckReport", "Finding", "History", "Series",
           "check_target", "open_history", "record_results",
           "SeriesPoint", "short"]

SPEED_MOVED = 0.03  # a run's speed index this far from its series' median is annotated
SPEED_SUFFIX = "@speed"
DEFAULT_LAST = 200  # points of each series a check looks at
DEFAULT_MIN_AFTER = 3  # runs after a change before it is a regression: one noisy run never is
DEFAULT_MIN_BEFORE = 8  # runs before it: a handful of runs do not show a series' own spread


def short(commit: str | None) -> str:
    return commit[:7] if commit else "?"


@dataclass(frozen=True)
class SeriesPoint:
    """One run's figure in a series."""

    run_id: int
    value: float
    ci_low: float | None
    ci_high: float | None
    samples: int | None
    notes: str
    commit: str | None
    branch: str | None
    dirty: bool | None
    recorded_unix_ns: int
    speed_ns: float | None
    speed_change: float | None = None  # run speed index / series median - 1

    @property
    def where(self) -> str:
        """The run as a reader names it: short commit (+ '*' when dirty), else its id."""
        if self.commit:
            return short(self.commit) + ("*" if self.dirty else "")
        return f"run {self.run_id}"


@dataclass(frozen=True)
class Series:
    """One (subject, scenario, metric, machine) series, oldest point first."""

    subject: str
    scenario: str
    metric: str
    machine: str
    points: tuple[SeriesPoint, ...]

    @property
    def values(self) -> list[float]:
        return [p.value for p in self.points]

    @property
    def name(self) -> str:
        sc = f" {self.scenario}" if self.scenario else ""
        return f"{self.subject}{sc} {self.metric} [{self.machine}]"

    def __len__(self) -> int:
        return len(self.points)


@dataclass(frozen=True)
class Finding:
    """A change point of a series, placed between two runs."""

    series: Series
    change_point: ChangePoint
    before: SeriesPoint  # last run before the change
    after: SeriesPoint  # first run after it
    regression: bool  # a change for the worse that is the series' latest, with enough runs
    worse: bool  # the change is for the worse (whether or not it is the latest)
    speed_notes: tuple[str, ...] = ()

    def describe(self) -> str:
        """E.g. ``regression since abc1234 (+7.9 % ± 2.1 %, p = 0.001; 12 runs before, 5 after)``."""
        cp = self.change_point
        word = "regression" if self.regression else ("worse" if self.worse else "better")
        p = (f"= {cp.pvalue:.2g}" if cp.pvalue >= 1e-4 else f"= {cp.pvalue:.0e}"
             if cp.pvalue > 0 else "< 1e-16")  # an exact series' t-test underflows to 0
        text = (f"{word} since {self.after.where} ({cp.change * 100:+.1f} % ± "
                f"{cp.ci_halfwidth * 100:.1f} %, p {p}; {cp.before} runs before, "
                f"{cp.after} after; last before {self.before.where})")
        if self.speed_notes:
            text += "; " + "; ".join(self.speed_notes)
        return text

    def to_dict(self) -> dict[str, Any]:
        cp = self.change_point
        s = self.series
        return {"subject": s.subject, "scenario": s.scenario, "metric": s.metric,
                "machine": s.machine, "regression": self.regression, "worse": self.worse,
                "change": cp.change, "ci": list(cp.ci), "pvalue": cp.pvalue,
                "runs_before": cp.before, "runs_after": cp.after,
                "mean_before": cp.mean_before, "mean_after": cp.mean_after,
                "last_before": {"run": self.before.run_id, "commit": self.before.commit},
                "first_after": {"run": self.after.run_id, "commit": self.after.commit},
                "speed_notes": list(self.speed_notes), "text": self.describe()}


@dataclass
class CheckReport:
    """What :meth:`History.check` found over the series it looked at."""

    store: str
    series_checked: int
    findings: list[Finding] = field(default_factory=list)

    @property
    def regressions(self) -> list[Finding]:
        return [f for f in self.findings if f.regression]

    def __bool__(self) -> bool:  # true when the check passes
        return not self.regressions

    def to_dict(self) -> dict[str, Any]:
        return {"store": self.store, "series_checked": self.series_checked,
                "regressions": len(self.regressions),
                "findings": [f.to_dict() for f in self.findings]}


def _annotate(points: list[SeriesPoint]) -> list[SeriesPoint]:
    speeds = [p.speed_ns for p in points if p.speed_ns]
    if not speeds:
        return points
    ref = statistics.median(speeds)
    return [SeriesPoint(**{**p.__dict__, "speed_change": (p.speed_ns / ref - 1)
                           if p.speed_ns else None}) for p in points]


def _speed_adjusted(metric: str, points: list[SeriesPoint]) -> list[SeriesPoint]:
    """Figures as if every run had the series' median speed index (runs without one left out)."""
    out = []
    better_high = higher_is_better(metric)
    for p in points:
        if p.speed_change is None:
            continue
        f = 1 + p.speed_change
        scale = f if better_high else 1 / f
        out.append(SeriesPoint(**{**p.__dict__, "value": p.value * scale,
                                  "ci_low": None if p.ci_low is None else p.ci_low * scale,
                                  "ci_high": None if p.ci_high is None else p.ci_high * scale}))
    return out


def findings_of(series: Series, cps: Sequence[ChangePoint], min_after: int = DEFAULT_MIN_AFTER,
                min_before: int = DEFAULT_MIN_BEFORE) -> list[Finding]:
    """Change points of ``series`` as findings (which are regressions, speed notes)."""
    out = []
    for k, cp in enumerate(cps):
        worse = (cp.change < 0) if higher_is_better(series.metric) else (cp.change > 0)
        latest = k == len(cps) - 1
        around = series.points[max(0, cp.index - 1):cp.index + 1]
        notes = tuple(f"speed index {p.speed_change * 100:+.0f} % at {p.where}"
                      for p in around
                      if p.speed_change is not None and abs(p.speed_change) > SPEED_MOVED)
        out.append(Finding(series, cp, series.points[cp.index - 1], series.points[cp.index],
                           regression=(worse and latest and cp.after >= min_after
                                       and cp.before >= min_before),
                           worse=worse, speed_notes=notes))
    return out


class History:
    """A history store opened for reading and recording (``httpbench.history(...)``).

    ``target``: a SQLite path or a ``postgresql://`` URL; default ``$HTTPBENCH_HISTORY``.
    """

    def __init__(self, target: str | os.PathLike[str] | None = None, *,
                 create: bool = False) -> None:
        self._store = open_store(target, create=create)

    @property
    def store(self) -> Store:
        return self._store

    @property
    def name(self) -> str:
        return self._store.name

    def __repr__(self) -> str:
        return f"History({self._store.name!r})"

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # recording
    def record(self, results: Any, *, source: str | None = None,
               cwd: str | None = None) -> int:
        """Record a compare ResultSet or bench/measure results as one run; returns its id."""
        from ._results import ResultSet

        src = source or ("compare" if isinstance(results, ResultSet) else "bench")
        return self._store.record(run_of(results, src, cwd=cwd))

    # reading
    def runs(self, *, last: int | None = None, source: str | None = None,
             branch: str | None = None, commit: str | None = None,
             machine: str | None = None) -> list[dict[str, Any]]:
        """Recorded runs, oldest first, as dicts (id, time, git state, machine, speed...)."""
        return self._store.runs(last=last, source=source, branch=branch, commit=commit,
                                machine=machine)

    def machines(self) -> dict[str, dict[str, Any]]:
        """Fingerprint -> the machine facts behind it."""
        return self._store.machines()

    def series(self, subject: str | None = None, scenario: str | None = None,
               metric: str | None = None, machine: str | None = None, *,
               last: int | None = None) -> list[Series]:
        """The series matching every filter given (``metric="cpu_ns_per_request@speed"``
        for the speed-adjusted one); :class:`HistoryError` when filters match nothing."""
        base_metric, adjusted = metric, False
        if metric is not None and metric.endswith(SPEED_SUFFIX):
            base_metric, adjusted = metric[:-len(SPEED_SUFFIX)], True
        keys = self._store.series(subject=subject, scenario=scenario, metric=base_metric,
                                  machine=machine)
        if not keys and any(v is not None for v in (subject, scenario, metric, machine)):
            wanted = ", ".join(f"{k}={v!r}" for k, v in (("subject", subject),
                               ("scenario", scenario), ("metric", metric),
                               ("machine", machine)) if v is not None)
            known = sorted({k[3] for k in self._store.series()})
            raise HistoryError(self.name, f"no series matches {wanted} (metrics recorded: "
                               f"{', '.join(known) or 'none'})")
        pts = self._store.points([k[0] for k in keys], last=last)
        run_ids = {p[0] for rows in pts.values() for p in rows}
        runs = {r["id"]: r for r in self._store.runs(ids=sorted(run_ids))} if run_ids else {}
        out = []
        for sid, subj, sc, m, mach in keys:
            points = []
            for run_id, value, lo, hi, n, notes in pts.get(sid, []):
                r = runs.get(run_id, {})
                points.append(SeriesPoint(run_id, value, lo, hi, n, notes, r.get("commit_sha"),
                                          r.get("branch"), r.get("dirty"),
                                          int(r.get("recorded_unix_ns") or 0), r.get("speed_ns")))
            points = _annotate(points)
            if adjusted:
                points = _speed_adjusted(m, points)
                m = m + SPEED_SUFFIX
            out.append(Series(subj, sc, m, mach, tuple(points)))
        return out

    def __iter__(self) -> Iterator[Series]:
        return iter(self.series())

    def check(self, subject: str | None = None, scenario: str | None = None,
              metric: str | None = None, machine: str | None = None, *,
              max_pvalue: float = DEFAULT_MAX_PVALUE, min_change: float = 0.0,
              last: int = DEFAULT_LAST, min_after: int = DEFAULT_MIN_AFTER,
              min_before: int = DEFAULT_MIN_BEFORE, window: int = DEFAULT_WINDOW
              ) -> CheckReport:
        """Change points of every matching series over its newest ``last`` points."""
        if last < 4:
            raise ValueError(f"last must be at least 4 runs, not {last!r}")
        if min_after < 1 or min_before < 1:
            raise ValueError(f"min_after and min_before must be at least 1, not "
                             f"{min_after!r} and {min_before!r}")
        found = self.series(subject, scenario, metric, machine, last=last)
        report = CheckReport(self.name, len(found))
        for s in found:
            cps = detect(s.values, max_pvalue=max_pvalue, min_change=min_change, window=window)
            report.findings += findings_of(s, cps, min_after, min_before)
        return report

    def to_dataframe(self, subject: str | None = None, scenario: str | None = None,
                     metric: str | None = None, machine: str | None = None) -> Any:
        """One row per point: the series key, the value with its CI and the run's git state."""
        import pandas as pd

        return pd.DataFrame(self.rows(subject, scenario, metric, machine),
                            columns=list(ROW_COLUMNS))

    def rows(self, subject: str | None = None, scenario: str | None = None,
             metric: str | None = None, machine: str | None = None) -> list[dict[str, Any]]:
        """The points as plain dicts (:data:`ROW_COLUMNS`), series by series."""
        out = []
        for s in self.series(subject, scenario, metric, machine):
            for p in s.points:
                out.append({"subject": s.subject, "scenario": s.scenario, "metric": s.metric,
                            "machine": s.machine, "run_id": p.run_id, "commit": p.commit,
                            "branch": p.branch, "dirty": p.dirty,
                            "recorded_unix_ns": p.recorded_unix_ns, "value": p.value,
                            "ci_low": p.ci_low, "ci_high": p.ci_high, "samples": p.samples,
                            "notes": p.notes, "speed_ns": p.speed_ns,
                            "speed_change": p.speed_change})
        return out

    def plot(self, subject: str | None = None, scenario: str | None = None,
             metric: str | None = None, machine: str | None = None, *, path: str | None = None,
             max_pvalue: float = DEFAULT_MAX_PVALUE, min_change: float = 0.0,
             last: int | None = None) -> Any:
        """Trend of the matching series with CI bands and change points marked (matplotlib
        Figure; also written to ``path`` when given)."""
        found = self.series(subject, scenario, metric, machine, last=last)
        marks = {}
        for s in found:
            cps = detect(s.values, max_pvalue=max_pvalue, min_change=min_change)
            marks[s.name] = findings_of(s, cps)
        # drawn by the presentation layer, which registers it (the history never imports it)
        return call("history_plot", self, found, marks, path=path, title=self.name)


ROW_COLUMNS = ("subject", "scenario", "metric", "machine", "run_id", "commit", "branch", "dirty",
               "recorded_unix_ns", "value", "ci_low", "ci_high", "samples", "notes", "speed_ns",
               "speed_change")


def open_history(target: str | os.PathLike[str] | None = None, *,
                 create: bool = False) -> History:
    """The history at a SQLite path or ``postgresql://`` URL (default ``$HTTPBENCH_HISTORY``),
    for reading (``.runs()``, ``.series()``, ``.check()``, ``.to_dataframe()``, ``.plot()``)
    and recording (``.record(results)``); :class:`HistoryError` when it cannot be opened.
    A SQLite file that does not exist is an error unless ``create=True``."""
    return History(target, create=create)


def check_target(target: str | os.PathLike[str]) -> None:
    """Open and close the store at ``target`` (created when missing): a bad store is a
    :class:`HistoryError` before any measuring starts."""
    open_store(target).close()


def record_results(target: str | os.PathLike[str], results: Any, source: str, *,
                   clients: Sequence[str] = (), cwd: str | None = None) -> int | None:
    """Record a compare ResultSet or bench/measure results as one run in the store at
    ``target``; its id, or None for an interrupted (partial) run, which is not recorded."""
    from ._results import ResultSet

    if (results.metadata.get("interrupted") if isinstance(results, ResultSet)
            else getattr(results, "interrupted", False)):
        return None
    with open_store(target) as st:
        return st.record(run_of(results, source, cwd=cwd, clients=clients))
