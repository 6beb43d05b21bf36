"""pytest plugin for httpbench: performance budgets and baselines.

Registered through the ``pytest11`` entry point, so pytest loads it in every
session of an environment with httpbench installed: importing this module
must stay cheap and must never fail. Nothing of httpbench (its C extension)
is imported until a fixture, a marker or an option needs it.

Fixtures
    ``httpbench_server`` (session): the embedded test server, HTTP and HTTPS (and
    HTTP/3 on the HTTPS port when the build has it: ``.h3``) (``.url``, ``.https_url``,
    ``.ca_file``, ``.url_for(path, tls=False)``, ``.stats()``), one per pytest process
    (so one per pytest-xdist worker).
    ``httpbench`` (function): a helper bound to it: ``.url(path)``,
    ``.measure(fn, ...)``, ``.measure_async(coro_fn, ...)``,
    ``.bench(path_or_url, ...)``, ``.client(name, path, protocol=...)``. Every result it
    returns is recorded for the test: checked against the test's marker budget and
    the baseline, saved, and listed in the terminal summary.

Marker
    ``@pytest.mark.httpbench(budget={"p99": "2ms", ...}, tolerance="20%", repeats=3)``:
    the budget applies to every result measured through ``httpbench`` in the
    test (a test with a budget that measures nothing fails).

Options
    ``--httpbench-save=PATH``        store every measured test's results (a ResultSet file)
    ``--httpbench-compare=PATH``     fail tests whose metrics regressed against PATH
    ``--httpbench-tolerance=10%``    allowed change of timing metrics
    ``--httpbench-fail-faster``      also fail when a metric improved beyond tolerance
    ``--httpbench-repeats=3``        runs (best kept) before a timing regression counts
    ``--httpbench-instructions-tolerance=1%``  allowed change of instructions per call
    ``--httpbench-json=PATH``        write the summary lines as JSON
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

from ._machine import DRIFT_LIMIT, machine_change, speed_summary, wakeup_text

__all__ = [
    "CALIBRATION_WORKLOAD",
    "Httpbench",
    "HttpbenchServer",
    "HttpbenchSession",
    "Record",
    "calibrate",
]

# --httpbench-history and its check live in their own module, loaded with this one
pytest_plugins = ["httpbench._historyplugin"]

BASELINE_KEY = "pytest_baseline"  # ResultSet.metadata key of the plugin's own data
CALIBRATION_WORKLOAD = "hb-calib-2"  # bump when _calibration_workload changes
CALIBRATION_RUNS = 10  # calibration runs before and after each measurement (~5 ms each side)
SPEED_UNIT = f"ns per plugin calibration workload ({CALIBRATION_WORKLOAD}, mean)"


def _wakeup_ns() -> dict[str, Any] | None:
    """The machine's wake-up round trips (same CPU, across two), for the saved metadata."""
    from ._machine import wakeup_cost

    try:
        w = wakeup_cost()
    except (OSError, ValueError):
        return None
    return {"same_cpu": w["same_cpu"], "cross_cpu": w["cross_cpu"]}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("httpbench", "httpbench performance budgets and baselines")
    group.addoption("--httpbench-save", metavar="PATH", default=None,
                    help="store every measured test's results in PATH (httpbench results JSON)")
    group.addoption("--httpbench-compare", metavar="PATH", default=None,
                    help="compare every measured test with the baseline in PATH; "
                         "fail tests that regressed beyond the tolerance")
    group.addoption("--httpbench-tolerance", metavar="PCT", default="10%",
                    help="allowed change of timing metrics against the baseline, after "
                         "scaling by the calibration run (default: 10%%)")
    group.addoption("--httpbench-fail-faster", action="store_true", default=False,
                    help="with --httpbench-compare, also fail tests whose metrics got better "
                         "beyond the tolerance (the baseline is stale)")
    group.addoption("--httpbench-repeats", metavar="N", type=int, default=3,
                    help="runs of a measurement (best kept) before a timing regression "
                         "against the baseline counts (default: 3)")
    group.addoption("--httpbench-instructions-tolerance", metavar="PCT", default="1%",
                    help="allowed change of instructions per call against the baseline "
                         "(default: 1%%; syscalls, allocations and GC counts compare exactly)")
    group.addoption("--httpbench-json", metavar="PATH", default=None,
                    help="write the httpbench summary (one entry per measurement) to PATH")


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
            "wakeup_ns": _wakeup_ns(),
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


def _session(config: pytest.Config) -> HttpbenchSession:
    return config.stash[SESSION_KEY]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "httpbench(budget=None, tolerance=None, repeats=None): performance budget "
        "(e.g. budget={'p99': '2ms', 'rps': '>=5000'}) and baseline options applied to every "
        "result measured through the httpbench fixture in this test",
    )
    config.stash[SESSION_KEY] = HttpbenchSession(config)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    s = config.stash.get(SESSION_KEY, None)
    if s is None or not (s.save_path or s.compare_path):
        return None
    lines = []
    if s.compare_path:
        lines.append(f"httpbench: comparing with {s.compare_path} "
                     f"(tolerance {s.tolerance * 100:g}%, repeats {s.repeats}"
                     f"{', fail-faster' if s.fail_faster else ''})")
    if s.save_path:
        lines.append(f"httpbench: saving results to {s.save_path}")
    wake = _wakeup_ns()
    if wake:  # what a sequential request costs this machine before any client code runs
        lines.append(f"httpbench: {wakeup_text(wake)}")
    return lines


_MARKER_KWARGS = ("budget", "tolerance", "repeats")


def _marker_options(item: pytest.Item) -> tuple[Any, dict[str, Any]]:
    """Parse the item's ``httpbench`` marker: (limits or None, {tolerance, repeats})."""
    marker = item.get_closest_marker("httpbench")
    if marker is None:
        return None, {}
    where = f"{item.nodeid}: @pytest.mark.httpbench"
    if marker.args:
        raise pytest.UsageError(f"{where} takes keyword arguments only ({', '.join(_MARKER_KWARGS)})")
    unknown = set(marker.kwargs) - set(_MARKER_KWARGS)
    if unknown:
        raise pytest.UsageError(f"{where}: unknown argument(s) {', '.join(sorted(unknown))}; "
                                f"accepted: {', '.join(_MARKER_KWARGS)}")
    from ._budget import BudgetError, parse_budget

    limits = None
    if marker.kwargs.get("budget") is not None:
        try:
            limits = parse_budget(marker.kwargs["budget"])
        except BudgetError as exc:
            raise pytest.UsageError(f"{where}(budget=...): {exc}") from None
    opts: dict[str, Any] = {}
    if marker.kwargs.get("tolerance") is not None:
        opts["tolerance"] = parse_tolerance(marker.kwargs["tolerance"], f"{where}: tolerance")
    if marker.kwargs.get("repeats") is not None:
        rep = marker.kwargs["repeats"]
        if isinstance(rep, bool) or not isinstance(rep, int) or rep < 1:
            raise pytest.UsageError(f"{where}: repeats must be a positive integer, not {rep!r}")
        opts["repeats"] = rep
    return limits, opts


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("httpbench") is None:
        return
    limits, opts = _marker_options(item)
    item.stash[BUDGET_KEY] = limits
    item.stash[MARKER_KEY] = opts


@pytest.hookimpl(trylast=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    # Runs after the test body passed (a failing body never gets here). A budget that was
    # never applied to anything must not pass silently.
    if item.stash.get(BUDGET_KEY, None) and not _session(item.config).for_node(item.nodeid):
        pytest.fail(
            "@pytest.mark.httpbench(budget=...) is set but the test measured nothing through "
            "the httpbench fixture (use httpbench.measure(...) or httpbench.bench(...))",
            pytrace=False,
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" or (report.when == "setup" and not report.passed):
        recs = _session(item.config).for_node(item.nodeid)
        for rec in recs:
            rec.outcome = report.outcome
        # A budget the test checked itself (result.assert_budget) shows in the verdict too.
        exc = call.excinfo.value if call.excinfo is not None else None
        if recs and exc is not None and type(exc).__name__ == "BudgetExceeded":
            failed = [r.limit.metric.name for r in getattr(exc, "failed", [])]
            target = next((r for r in recs if r.result is not None
                           and getattr(r.result, "label", None) == exc.label), recs[-1])
            if not target.budget_failed:
                target.budget_failed = failed


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    s = session.config.stash.get(SESSION_KEY, None)
    if s is None:
        return
    if s.is_worker:
        # pytest-xdist: ship this worker's records to the controller, which writes the files.
        comparing = s.baseline is not None
        session.config.workeroutput["httpbench"] = json.dumps(
            [r.to_json(s.fail_faster, comparing) for r in s.records], allow_nan=False,
            default=str)
        return
    if s.save_path:
        s.save()
    if s.json_path:
        s.write_json()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist controller: collect a finished worker's records."""
    s = node.config.stash.get(SESSION_KEY, None)
    data = getattr(node, "workeroutput", {}).get("httpbench")
    if s is not None and data:
        s.worker_records.extend(json.loads(data))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    s = config.stash.get(SESSION_KEY, None)
    if s is None or s.is_worker:
        return
    recs = s._all_records_json()
    if not recs:
        return
    tr = terminalreporter
    tr.write_sep("=", "httpbench")
    width = max(len(r["key"]) for r in recs)
    for r in recs:
        tr.write_line(f"{r['key'].ljust(width)}  {r['figures']}  {r['verdict']}")
    change = s.machine_change()
    if change is not None and abs(change) > DRIFT_LIMIT:
        tr.write_line(f"httpbench: machine {abs(change):.0%} "
                      f"{'slower' if change > 0 else 'faster'} than when the baseline was "
                      "saved (calibration workload): timings were compared scaled by it, so "
                      "the verdicts above are the code's change, not the machine's")
    if s.save_path:
        skipped = f" ({s.not_saved} of failed or skipped tests not saved)" if s.not_saved else ""
        tr.write_line(f"httpbench: saved {s.saved} measurement(s) to {s.save_path}{skipped}")
    if s.json_path:
        tr.write_line(f"httpbench: summary written to {s.json_path}")


# --- fixtures ---------------------------------------------------------------------------------


class HttpbenchServer:
    """The embedded test server of the session: HTTP and HTTPS, each started on first use.

    Starting lazily keeps sessions that only ``measure()`` pure callables free of servers.
    """

    def __init__(self) -> None:
        self._http: Any = None
        self._https: Any = None

    def _start(self, tls: bool) -> Any:
        from ._features import h3_missing
        from ._server import Server

        # the TLS server also serves HTTP/3 (UDP, the same port number) when the build can
        # HTTP/3 served but not advertised: a client that follows Alt-Svc stays on TCP, so an
        # HTTPS test measures what it did before; protocol="h3" asks for QUIC explicitly
        srv = Server(tls=tls, h3=tls and h3_missing() is None, alt_svc=False)
        enter = getattr(srv, "__enter__", None)
        return enter() if enter is not None else srv

    def _plain(self) -> Any:
        if self._http is None:
            self._http = self._start(False)
        return self._http

    def _tls(self) -> Any:
        if self._https is None:
            self._https = self._start(True)
        return self._https

    @property
    def url(self) -> str:
        """Base URL of the plain-HTTP server (no trailing slash)."""
        return self._plain().url.rstrip("/")

    @property
    def https_url(self) -> str:
        """Base URL of the HTTPS server (no trailing slash)."""
        return self._tls().url.rstrip("/")

    @property
    def ca_file(self) -> str:
        """PEM file with the HTTPS server's certificate (pass as ``ca_file=``)."""
        return self._tls().ca_file

    @property
    def h3(self) -> bool:
        """Whether the HTTPS server also serves HTTP/3 (on UDP at the same port number)."""
        return bool(self._tls().h3)

    def url_for(self, path: str = "/", tls: bool = False) -> str:
        """Full URL of ``path`` on the HTTP (or, with ``tls``, HTTPS) server."""
        if not path.startswith("/"):
            path = "/" + path
        return (self.https_url if tls else self.url) + path

    def stats(self, tls: bool = False) -> Any:
        """Server-side statistics of the HTTP (or HTTPS) server."""
        return (self._tls() if tls else self._plain()).stats()

    def close(self) -> None:
        """Stop whichever servers were started."""
        for srv in (self._http, self._https):
            if srv is not None:
                exit_ = getattr(srv, "__exit__", None)
                if exit_ is not None:
                    exit_(None, None, None)
                else:
                    srv.close()
        self._http = self._https = None


class Httpbench:
    """Helper of the ``httpbench`` fixture: measure against the session's server.

    Every result returned by :meth:`measure`, :meth:`measure_async` and
    :meth:`bench` is recorded for the current test, checked against the test's
    ``@pytest.mark.httpbench(budget=...)`` (raising ``BudgetExceeded``) and,
    with ``--httpbench-compare``, against the baseline (raising
    ``BaselineRegression`` after ``repeats`` runs).
    """

    def __init__(self, request: pytest.FixtureRequest, server: HttpbenchServer) -> None:
        self.server = server
        self._request = request
        self._node = request.node
        self._session = _session(request.config)
        self.results: list[Any] = []

    def url(self, path: str = "/", tls: bool = False) -> str:
        """Full URL of ``path`` on the session's server (HTTPS with ``tls=True``)."""
        return self.server.url_for(path, tls=tls)

    def client(self, name: str, path: str = "/", *, tls: bool | None = None,
               protocol: str = "http/1.1", **params: Any) -> Any:
        """A client adapter (``httpbench._adapters``) set up for ``path`` on the session server.

        ``name``: "native", "http.client", "urllib3", "requests", "httpx", "httpx-async",
        "aiohttp", "pycurl", ... or "package.module:Class". ``params`` go to the
        adapter's ``setup`` (method, body, keep_alive, ...). Each ``request()`` call makes
        one request; measure it with ``httpbench.measure(c.request)`` (async adapters:
        ``httpbench.measure_async(c.request)``, set up on measure_async's default loop).
        The adapter is closed at the end of the test. A client whose library is not
        installed skips the test.

        ``protocol="h3"`` (implies ``tls``): the request goes over HTTP/3 to the HTTPS
        server's UDP side, as compare's h3 scenarios make it; the test is skipped,
        saying why, when the adapter declares no HTTP/3, its library lacks it, or this
        build of httpbench has no HTTP/3.
        """
        from ._adapters import AdapterUnavailable, load_adapter, require_protocol

        if protocol not in ("http/1.1", "h3"):
            raise ValueError(f"httpbench.client: protocol must be 'http/1.1' or 'h3', "
                             f"got {protocol!r}")
        if protocol == "h3":
            if tls is False:
                raise ValueError("httpbench.client: protocol='h3' needs TLS (HTTP/3 is "
                                 "always TLS); leave tls out or pass tls=True")
            tls = True
        try:
            cls = load_adapter(name)
            params.update(require_protocol(cls, name, protocol))
        except AdapterUnavailable as exc:
            pytest.skip(f"httpbench client {exc}")
        if protocol == "h3":
            from ._features import H3_CLIENT_MISSING

            if not self.server.h3:
                pytest.skip(f"httpbench client {name} over HTTP/3: {H3_CLIENT_MISSING}")
        if not path.startswith("/"):
            path = "/" + path
        base = self.server.https_url if tls else self.server.url
        ca_file = self.server.ca_file if tls else None
        adapter = cls()
        try:
            if adapter.kind == "async":
                from ._measure import event_loop

                loop = event_loop()
                loop.run_until_complete(adapter.asetup(base, ca_file, path=path, **params))
                self._request.addfinalizer(lambda: loop.run_until_complete(adapter.aclose()))
            else:
                adapter.setup(base, ca_file, path=path, **params)
                self._request.addfinalizer(adapter.close)
        except AdapterUnavailable as exc:  # a library built without the protocol
            pytest.skip(f"httpbench client {exc}")
        return adapter

    def measure(self, fn: Callable[..., Any], *, name: str | None = None, **kwargs: Any) -> Any:
        """``httpbench.measure(fn, **kwargs)``, recorded for this test (see the class doc)."""
        from ._measure import measure

        __tracebackhide__ = True
        kwargs = self._deterministic_kwargs(kwargs, name)
        return self._run("measure", lambda: measure(fn, **kwargs), name, kwargs)

    def measure_async(self, coro_fn: Callable[..., Any], *, name: str | None = None,
                      **kwargs: Any) -> Any:
        """``httpbench.measure_async(coro_fn, **kwargs)``, recorded for this test."""
        from ._measure import measure_async

        __tracebackhide__ = True
        return self._run("measure", lambda: measure_async(coro_fn, **kwargs), name,
                         kwargs)

    def bench(self, path_or_url: str = "/", *, name: str | None = None, **kwargs: Any) -> Any:
        """``httpbench.bench(url, **kwargs)`` where a path ("/bytes/150") means this server.

        ``tls=True`` selects the HTTPS server; an https URL of the session
        server is verified against its CA file unless ``ca_file``/``verify`` are given.
        """
        from ._bench import bench

        __tracebackhide__ = True
        tls = bool(kwargs.pop("tls", False))
        url = path_or_url if "://" in path_or_url else self.url(path_or_url, tls=tls)
        if url.startswith("https://") and "ca_file" not in kwargs and kwargs.get("verify", True) \
                and self.server._https is not None and url.startswith(self.server.https_url):
            kwargs["ca_file"] = self.server.ca_file
        return self._run("bench", lambda: bench(url, **kwargs), name, kwargs)

    def _deterministic_kwargs(self, kwargs: dict[str, Any], name: str | None) -> dict[str, Any]:
        """Count instructions / syscalls when the marker budget or the baseline entry
        names them and the caller did not say otherwise."""
        wanted: set[str] = set()
        for lim in self._node.stash.get(BUDGET_KEY, None) or ():
            wanted.add(lim.metric.name)
        s = self._session
        if s.baseline is not None:
            n = self._name_peek(name)
            key = f"{self._node.nodeid}[{n}]" if n else self._node.nodeid
            wanted.update((s.baseline.entries.get(key) or {}).get("metrics", {}))
        out = dict(kwargs)
        if "instructions_per_request" in wanted:
            out.setdefault("instructions", True)
        if "syscalls_per_request" in wanted:
            out.setdefault("syscalls", True)
        return out

    def _name_peek(self, name: str | None) -> str:
        if name:
            return str(name)
        n = len(self._session.for_node(self._node.nodeid))
        return "" if n == 0 else f"#{n}"

    # the recording / checking core
    def _name(self, name: str | None) -> str:
        """The measurement's name within the test: given, or "" / "#1", "#2"... by order."""
        if name:
            name = str(name)
            if any(r.name == name for r in self._session.for_node(self._node.nodeid)):
                raise ValueError(f"measurement name {name!r} is used twice in this test; "
                                 "names key the baseline, give each measurement its own")
            return name
        n = len(self._session.for_node(self._node.nodeid))
        return "" if n == 0 else f"#{n}"

    def _run(self, kind: str, run: Callable[[], Any], name: str | None,
             kwargs: dict[str, Any]) -> Any:
        from ._baseline import BaselineRegression, compare_metrics
        from ._budget import BudgetExceeded, check_budget, result_metrics

        __tracebackhide__ = True  # failures point at the test's call, not at the plugin
        s = self._session
        name = self._name(name)
        key = f"{self._node.nodeid}[{name}]" if name else self._node.nodeid
        opts = self._node.stash.get(MARKER_KEY, {})
        limits = self._node.stash.get(BUDGET_KEY, None)
        result, cal = s.calibrated(run)
        metrics = result_metrics(result)
        # A fixed count (not also cut short by a duration) makes request counts comparable.
        bounded = kwargs.get("n") is not None and kwargs.get("duration") is None
        rec = Record(key=key, nodeid=self._node.nodeid, name=name, kind=kind,
                     metrics=metrics, bounded=bounded, calibration=cal, result=result,
                     functions=_functions_of(result))
        if cal is not None and s.speeds:
            rec.speed_ns = s.speeds[-1]
        s.add(rec)
        self.results.append(result)

        error: AssertionError | None = None
        if limits:
            rows = check_budget(metrics, limits)
            rec.budget_rows = rows
            rec.budget_failed = [r.limit.metric.name for r in rows if not r.ok]
            if rec.budget_failed:
                error = BudgetExceeded(rows, label=key)

        entry = s.baseline.entries.get(key) if s.baseline is not None else None
        rec.has_baseline = entry is not None
        if entry is not None and error is None:  # a broken budget already fails the test
            tol = opts.get("tolerance", s.tolerance)
            repeats = opts.get("repeats", s.repeats)
            both_bounded = bounded and bool(entry.get("bounded", False))
            scale = s.scale_for(entry, cal)
            rec.machine = scale - 1.0 if scale != 1.0 else None

            def compare() -> list[Any]:
                return compare_metrics(entry["metrics"], metrics, kind=kind, scale=scale,
                                       tolerance=tol, bounded=both_bounded,
                                       instructions_tolerance=s.instructions_tolerance)

            rows = compare()
            # Timing noise: re-run while a timing metric looks slower, keeping the best of each
            # (every run's timings brought to the first run's calibration).
            while rec.runs < repeats and any(r.verdict == "slower" and not r.metric.deterministic
                                             for r in rows):
                again, cal_i = s.calibrated(run)
                rec.runs += 1
                adjust = (cal / cal_i) if cal and cal_i else 1.0
                for m, v in result_metrics(again).items():
                    if m in metrics and not _is_deterministic(m) and m != "requests":
                        if _upper(m):
                            metrics[m] = min(metrics[m], v * adjust)
                        else:
                            metrics[m] = max(metrics[m], v / adjust)
                rows = compare()
            rec.compare_rows = rows
            rec.regressed = [r.metric.name for r in rows if r.verdict == "slower"]
            rec.improved = [r.metric.name for r in rows if r.verdict == "faster"]
            if rec.regressed or (s.fail_faster and rec.improved):
                from ._baseline import function_movers

                detail = ""
                if "instructions_per_request" in rec.regressed + rec.improved:
                    detail = function_movers(entry.get("functions") or {}, rec.functions)
                error = BaselineRegression(rows, key=key, scale=scale, fail_faster=s.fail_faster,
                                           detail=detail)
        if error is not None:
            raise error
        return result


def _functions_of(result: Any) -> dict[str, float]:
    """Inclusive instructions per call of the top functions (measure(instructions=True))."""
    top = getattr(result, "metadata", {}).get("callgrind_top") or []
    return {str(t[0]): float(t[1]) for t in top if isinstance(t, (list, tuple)) and len(t) >= 2}


def _is_deterministic(name: str) -> bool:
    from ._budget import METRICS

    return METRICS[name].deterministic


def _upper(name: str) -> bool:
    from ._budget import METRICS

    return METRICS[name].upper


@pytest.fixture(scope="session")
def httpbench_server() -> Any:
    """The session's embedded httpbench test server (HTTP; HTTPS on first use)."""
    srv = HttpbenchServer()
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def httpbench(request: pytest.FixtureRequest, httpbench_server: HttpbenchServer) -> Httpbench:
    """Measure callables and load-test the session server; results are budget- and
    baseline-checked and appear in the httpbench terminal summary."""
    return Httpbench(request, httpbench_server)
