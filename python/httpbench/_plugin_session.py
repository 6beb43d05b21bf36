"""The pytest plugin's session state: calibration, per-measurement records, the baseline
file, and the session object kept on ``config.stash``.

Imported when pytest loads the plugin (every session of an environment with httpbench
installed), so it stays cheap: nothing of the C extension until a measurement needs it.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from ._machine import machine_change, speed_summary

__all__ = [
    "BASELINE_KEY",
    "BUDGET_KEY",
    "CALIBRATION_WORKLOAD",
    "MARKER_KEY",
    "SESSION_KEY",
    "Baseline",
    "HttpbenchSession",
    "Record",
    "calibrate",
    "load_baseline",
    "parse_tolerance",
    "session_of",
    "wakeup_ns",
]

BASELINE_KEY = "pytest_baseline"  # ResultSet.metadata key of the plugin's own data
CALIBRATION_WORKLOAD = "hb-calib-2"  # bump when _calibration_workload changes
CALIBRATION_RUNS = 10  # calibration runs before and after each measurement (~5 ms each side)
SPEED_UNIT = f"ns per plugin calibration workload ({CALIBRATION_WORKLOAD}, mean)"


def wakeup_ns() -> dict[str, Any] | None:
    """The machine's wake-up round trips (same CPU, across two), for the saved metadata."""
    from ._machine import wakeup_cost

    try:
        w = wakeup_cost()
    except (OSError, ValueError):
        return None
    return {"same_cpu": w["same_cpu"], "cross_cpu": w["cross_cpu"]}


def parse_tolerance(text: Any, where: str = "--httpbench-tolerance") -> float:
    """``"10%"`` -> 0.1, ``"0.1"`` -> 0.1; UsageError (naming ``where``) on anything else."""
    s = str(text).strip()
    try:
        value = float(s[:-1]) / 100 if s.endswith("%") else float(s)
    except ValueError:
        raise pytest.UsageError(f"{where}={text!r}: expected a percentage like '10%'") from None
    if not math.isfinite(value) or value < 0:
        raise pytest.UsageError(f"{where}={text!r}: must be a positive percentage")
    return value


# --- calibration ------------------------------------------------------------------------------


def _calibration_workload(n: int = 2000) -> int:
    # Fixed pure-Python work (dicts, strings, ints, calls): the interpreter-bound kind of cost
    # the measured clients have, so its time tracks the machine's speed for them.
    d: dict[str, int] = {}
    for i in range(n):
        d[str(i)] = i * 7
    total = 0
    for k, v in d.items():
        total += len(k) + (v % 13)
    return total + len(sorted(d, key=len))


def _calibration_runs(k: int) -> list[int]:
    """ns of ``k`` runs of the calibration workload (after one warm-up run)."""
    _calibration_workload()  # warm caches and the allocator
    out = []
    for _ in range(k):
        t0 = time.perf_counter_ns()
        _calibration_workload()
        out.append(time.perf_counter_ns() - t0)
    return out


def calibrate(repeats: int = 20) -> float:
    """Seconds the fixed calibration workload takes here: the median of ``repeats`` short runs.

    Each run is ~0.5 ms. The median (like the p50 it scales) tracks how fast the
    machine is right now, shared CPUs included; the plugin calibrates right before and
    after every measurement and uses the median of both sets of runs.
    """
    runs = sorted(_calibration_runs(repeats))
    return runs[len(runs) // 2] / 1e9


def _median_s(runs: list[int]) -> float:
    runs = sorted(runs)
    return runs[len(runs) // 2] / 1e9


# --- records and session ------------------------------------------------------------------------


@dataclass
class Record:
    """One measurement made through the ``httpbench`` fixture."""

    key: str  # nodeid, plus "[name]" when named or not the test's first
    nodeid: str
    name: str  # "" for a test's first unnamed measurement, "#1", "#2"... for later ones
    kind: str  # "measure" | "bench"
    metrics: dict[str, float]
    bounded: bool  # a fixed request/call count (so request counts compare exactly)
    calibration: float | None
    result: Any = None  # the BenchResult / MeasureResult (not shipped across xdist)
    runs: int = 1
    budget_rows: list[Any] = field(default_factory=list)
    budget_failed: list[str] = field(default_factory=list)
    compare_rows: list[Any] = field(default_factory=list)
    functions: dict[str, float] = field(default_factory=dict)  # inclusive instructions/call
    regressed: list[str] = field(default_factory=list)
    improved: list[str] = field(default_factory=list)
    has_baseline: bool = False
    outcome: str = "passed"
    # how much slower the machine ran than when the baseline was saved (calibration ratio - 1)
    machine: float | None = None
    speed_ns: float | None = None  # the mean calibration run around it (the speed index)

    def verdict(self, fail_faster: bool, comparing: bool) -> str:
        """Short verdict for the summary line."""
        parts = []
        if self.budget_failed:
            parts.append("budget exceeded: " + ",".join(self.budget_failed))
        if self.regressed:
            parts.append("regressed: " + ",".join(self.regressed))
        if self.improved:
            parts.append(("improved (stale baseline): " if fail_faster else "improved: ")
                         + ",".join(self.improved))
        if comparing and not self.has_baseline:
            parts.append("no baseline")
        head = "FAIL" if self.outcome != "passed" else "PASS"
        if self.outcome == "skipped":
            head = "SKIP"
        return head + (" (" + "; ".join(parts) + ")" if parts else "")

    def summary_figures(self) -> str:
        """Headline figures of the measurement, in readable units."""
        from ._budget import METRICS, format_value

        names = (("rps", "p50", "p99", "cpu_per_request", "errors") if self.kind == "bench"
                 else ("p50", "p99", "cpu_per_request", "allocs_per_request", "rps"))
        labels = {"cpu_per_request": "cpu/req", "allocs_per_request": "allocs/req",
                  "rps": "req/s" if self.kind == "bench" else "calls/s"}
        out = []
        for n in names:
            if n in self.metrics:
                value = format_value(METRICS[n].kind, self.metrics[n])
                if n == "rps":
                    value = value.removesuffix("/s")
                out.append(f"{labels.get(n, n)} {value}")
        return "  ".join(out)

    def to_json(self, fail_faster: bool, comparing: bool) -> dict[str, Any]:
        """The record as a JSON-ready dict (summary file and xdist transport)."""
        return {
            "key": self.key, "nodeid": self.nodeid, "name": self.name, "kind": self.kind,
            "metrics": self.metrics, "bounded": self.bounded, "calibration": self.calibration,
            "functions": self.functions, "runs": self.runs, "outcome": self.outcome,
            "verdict": self.verdict(fail_faster, comparing),
            "figures": self.summary_figures(),
            "budget_failed": self.budget_failed, "regressed": self.regressed,
            "improved": self.improved, "has_baseline": self.has_baseline,
            "machine_change": self.machine, "speed_ns": self.speed_ns,
            "result": None if self.result is None else self.result.to_dict(),
        }


@dataclass
class Baseline:
    """What a ``--httpbench-compare`` file holds for each measurement key."""

    path: str
    entries: dict[str, dict[str, Any]]  # key -> {"metrics", "kind", "bounded", "calibration"}
    calibration: float | None
    metadata: dict[str, Any] = field(default_factory=dict)  # the saved run's


def load_baseline(path: str) -> Baseline:
    """Read a file written by ``--httpbench-save``; UsageError when it is not one."""
    from . import _results

    try:
        rs = _results.load(path)
    except FileNotFoundError:
        raise pytest.UsageError(f"--httpbench-compare: no such file: {path}") from None
    except (OSError, ValueError) as exc:
        raise pytest.UsageError(f"--httpbench-compare: {exc}") from None
    meta = rs.metadata.get(BASELINE_KEY) if isinstance(rs, _results.ResultSet) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("entries"), dict):
        raise pytest.UsageError(
            f"--httpbench-compare: {path} is an httpbench results file but not one written by "
            f"--httpbench-save (no {BASELINE_KEY!r} metadata)")
    if meta.get("workload") != CALIBRATION_WORKLOAD:
        raise pytest.UsageError(
            f"--httpbench-compare: {path} was calibrated with workload {meta.get('workload')!r}, "
            f"this httpbench uses {CALIBRATION_WORKLOAD!r}; re-save the baseline")
    return Baseline(path, meta["entries"], meta.get("calibration"), dict(rs.metadata))


class HttpbenchSession:
    """The plugin's per-session state, kept on ``config.stash``."""

    def __init__(self, config: pytest.Config) -> None:
        opt = config.getoption
        self.config = config
        self.save_path: str | None = opt("httpbench_save")
        self.compare_path: str | None = opt("httpbench_compare")
        self.json_path: str | None = opt("httpbench_json")
        self.tolerance = parse_tolerance(opt("httpbench_tolerance"))
        self.instructions_tolerance = parse_tolerance(
            opt("httpbench_instructions_tolerance"), "--httpbench-instructions-tolerance")
        self.fail_faster: bool = opt("httpbench_fail_faster")
        self.repeats: int = opt("httpbench_repeats")
        if self.repeats < 1:
            raise pytest.UsageError("--httpbench-repeats must be at least 1")
        if self.fail_faster and not self.compare_path:
            raise pytest.UsageError("--httpbench-fail-faster needs --httpbench-compare=PATH")
        self.is_worker = hasattr(config, "workerinput")  # a pytest-xdist worker
        self.baseline: Baseline | None = None
        if self.compare_path:
            self.baseline = load_baseline(self.compare_path)
        self.records: list[Record] = []
        self.worker_records: list[dict[str, Any]] = []  # from xdist workers (controller)
        self._calibration: float | None = None
        self.speeds: list[float] = []  # every measurement's mean calibration run, ns
        self._by_node: dict[str, list[Record]] = {}
        self.saved = self.not_saved = 0

    @property
    def needs_calibration(self) -> bool:
        return bool(self.save_path or self.compare_path
                    or self.config.getoption("httpbench_history", None))

    def calibrated(self, run: Callable[[], Any]) -> tuple[Any, float | None]:
        """``run()``, with calibration runs right before and after it when baselines are in
        use: (its result, the calibration time in s, or None)."""
        if not self.needs_calibration:
            return run(), None
        before = _calibration_runs(CALIBRATION_RUNS)
        result = run()
        runs = before + _calibration_runs(CALIBRATION_RUNS)
        cal = _median_s(runs)
        if self._calibration is None:
            self._calibration = cal
        # the speed index takes the mean: a CPU shared with another process slows some
        # runs whole time slices, which the median (the scale of a p50) rightly ignores
        self.speeds.append(sum(runs) / len(runs))
        return result, cal

    def speed_index(self) -> dict[str, Any] | None:
        """The session's machine-speed index: its calibration times (ns per workload)."""
        speeds = self.speeds + [float(r["speed_ns"]) for r in self.worker_records
                                if r.get("speed_ns")]  # xdist workers' too
        out = speed_summary(speeds)
        if out is not None:
            out["unit"] = SPEED_UNIT
        return out

    def machine_change(self) -> float | None:
        """How much slower this session's machine ran than the baseline's (None: unknown)."""
        if self.baseline is None:
            return None
        then = self.baseline.metadata.get("speed_index")
        if not isinstance(then, dict) or then.get("unit") != SPEED_UNIT:
            return None  # saved before the index, or by another workload
        return machine_change({"speed_index": then}, {"speed_index": self.speed_index()})

    def add(self, rec: Record) -> None:
        self.records.append(rec)
        self._by_node.setdefault(rec.nodeid, []).append(rec)

    def for_node(self, nodeid: str) -> list[Record]:
        return self._by_node.get(nodeid, [])

    def scale_for(self, entry: dict[str, Any], now: float | None) -> float:
        """Calibration ratio now/then for a baseline entry (1.0 when either is unknown)."""
        then = entry.get("calibration") or (self.baseline.calibration if self.baseline else None)
        if not now or not then:
            return 1.0
        return now / float(then)

    # files
    def save(self) -> None:
        """Write the passed tests' measurements to ``save_path`` (a failed test's numbers
        would make a broken run the baseline)."""
        from . import _results
        from ._metadata import system_metadata
        from ._version import __version__

        recs = self._all_records_json()
        results = {}
        entries = {}
        self.saved = self.not_saved = 0
        for r in recs:
            if r["result"] is None or r["outcome"] != "passed":
                self.not_saved += 1
                continue
            self.saved += 1
            results[(r["nodeid"], r["name"] or "-", 0)] = _results.result_from_dict(r["result"])
            entries[r["key"]] = {k: r[k] for k in ("metrics", "kind", "bounded", "calibration",
                                                   "nodeid", "name")}
            if r.get("functions"):
                entries[r["key"]]["functions"] = r["functions"]
        placed = [r["result"].get("metadata", {}) for r in recs if r["result"]]
        placed = [m for m in placed if m.get("placement")]
        meta = {
            **system_metadata(),
            "speed_index": self.speed_index(),
            "wakeup_ns": wakeup_ns(),
            **({"placement": placed[0]["placement"]} if placed else {}),
            "source": "pytest --httpbench-save",
            "httpbench_version": __version__,
            BASELINE_KEY: {
                "workload": CALIBRATION_WORKLOAD,
                "calibration": self._calibration,
                "entries": entries,
            },
        }
        path = self.save_path
        assert path is not None
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        _results.save(_results.ResultSet(results=results, metadata=meta), path)

    def write_json(self) -> None:
        assert self.json_path is not None
        doc = {"format": "httpbench-pytest-summary", "version": 1,
               "tolerance": self.tolerance, "baseline": self.compare_path,
               "measurements": [{k: v for k, v in r.items() if k != "result"}
                                for r in self._all_records_json()]}
        os.makedirs(os.path.dirname(os.path.abspath(self.json_path)), exist_ok=True)
        with open(self.json_path, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, allow_nan=False, default=str)

    def _all_records_json(self) -> list[dict[str, Any]]:
        comparing = self.baseline is not None
        own = [r.to_json(self.fail_faster, comparing) for r in self.records]
        if self.worker_records:  # xdist: workers finish in any order
            return sorted(own + self.worker_records, key=lambda r: r["key"])
        return own


SESSION_KEY = pytest.StashKey[HttpbenchSession]()
BUDGET_KEY = pytest.StashKey[Any]()  # item -> parsed marker budget (list of Limit) or None
MARKER_KEY = pytest.StashKey[dict]()  # item -> marker options (tolerance, repeats)


def session_of(config: pytest.Config) -> HttpbenchSession:
    """The session object the plugin keeps on ``config``."""
    return config.stash[SESSION_KEY]
