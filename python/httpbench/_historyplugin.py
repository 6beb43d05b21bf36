"""The pytest plugin's history: ``--httpbench-history=PATH_OR_URL`` records every measured
test as one run with the repository's commit, ``--httpbench-history-check`` fails a test
whose latest runs (this one included) form a regression change point.

Each measurement is a series per metric under the test's key (its node id, plus
``[name]`` for a named or later measurement), in the rows' metric names and base
units. Tests that failed for any reason other than this check are not recorded
(a broken run's figures are not the code's); a test failed by the check is, so
a regression keeps its runs and is seen again until it is fixed.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import pytest

# Loaded with the plugin in every pytest session: only cheap modules at the top (the rest,
# results and the C extension with them, when --httpbench-history is given).
from ._changepoints import DEFAULT_MAX_PVALUE, DetectorUnavailable, detect
from ._gitinfo import git_state

if TYPE_CHECKING:
    from ._history import SeriesPoint
    from ._historystore import Point

__all__ = ["CHECKED_METRICS", "HistoryState"]

# metrics a history check examines by default: what a code change moves, not tail noise
CHECKED_METRICS = ("cpu_ns_per_request", "p50_ns", "instructions_per_request",
                   "allocs_per_request")

STATE_KEY = pytest.StashKey["HistoryState"]()
HISTORY_TAG = "history:"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("httpbench")
    group.addoption("--httpbench-history", metavar="PATH_OR_URL", default=None,
                    help="record every measured test in a history (SQLite file or "
                         "postgresql:// URL) with the repository's commit")
    group.addoption("--httpbench-history-check", action="store_true", default=False,
                    help="with --httpbench-history, fail a test whose latest runs form a "
                         "regression change point")
    group.addoption("--httpbench-history-metrics", metavar="LIST",
                    default=",".join(CHECKED_METRICS),
                    help="metrics the history check examines (default: %(default)s)")
    group.addoption("--httpbench-history-max-pvalue", metavar="P", type=float,
                    default=DEFAULT_MAX_PVALUE,
                    help="significance a change point needs (default: %(default)s)")
    group.addoption("--httpbench-history-min-change", metavar="PCT", default="0%",
                    help="smallest relative change that counts (default: 0%%)")


class HistoryState:
    """What the history part of the plugin keeps for a session."""

    def __init__(self, config: pytest.Config) -> None:
        from ._historyrun import fingerprint
        from ._historystore import HistoryError, open_store
        from ._plugin_session import parse_tolerance

        opt = config.getoption
        self.target: str = opt("httpbench_history")
        self.check: bool = opt("httpbench_history_check")
        self.metrics = [m.strip() for m in str(opt("httpbench_history_metrics")).split(",")
                        if m.strip()]
        self.max_pvalue: float = opt("httpbench_history_max_pvalue")
        if not 0 < self.max_pvalue < 1:
            raise pytest.UsageError("--httpbench-history-max-pvalue must be in (0, 1)")
        self.min_change = parse_tolerance(opt("httpbench_history_min_change"),
                                          "--httpbench-history-min-change")
        self.root = str(config.rootpath)
        self.machine = fingerprint()
        self.git = git_state(self.root)
        self.run_id: int | None = None
        self.recorded = 0
        self.regressions: list[str] = []
        try:  # a store that cannot be opened stops the session before any test runs
            open_store(self.target).close()
        except HistoryError as exc:
            raise pytest.UsageError(f"--httpbench-history: {exc}") from None
        if self.check:
            try:
                detect([1.0, 1.0, 1.0, 1.0])  # loads the detector: missing, it is said now
            except DetectorUnavailable as exc:
                raise pytest.UsageError(f"--httpbench-history-check: {exc}") from None

    def series_points(self, key: str, metric: str) -> list[SeriesPoint]:
        from ._history import DEFAULT_LAST, History

        fp = self.machine["fingerprint"]
        with History(self.target) as h:
            if not h.store.series(subject=key, scenario="", metric=metric, machine=fp):
                return []  # nothing recorded for this test and metric on this machine yet
            found = h.series(key, "", metric, fp, last=DEFAULT_LAST - 1)
        return list(found[0].points) if found else []

    def regression(self, key: str, result: Any) -> list[str]:
        """Regression texts of this measurement against its history (with it appended)."""
        from ._history import Series, SeriesPoint, findings_of
        from ._historyrun import points_of
        now = {p.metric: p for p in points_of(result)}
        out = []
        for metric in self.metrics:
            cur = now.get(metric)
            if cur is None:
                continue
            past = self.series_points(key, metric)
            if not past:
                continue
            me = SeriesPoint(-1, cur.value, None, None, cur.samples, "",
                             (self.git or {}).get("commit"), (self.git or {}).get("branch"),
                             (self.git or {}).get("dirty"), 0, None)
            s = Series(key, "", metric, self.machine["fingerprint"], (*past, me))
            cps = detect(s.values, max_pvalue=self.max_pvalue, min_change=self.min_change)
            for f in findings_of(s, cps):
                if f.regression:
                    out.append(f"{metric}: {f.describe()}")
        return out


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("httpbench_history_check") and not config.getoption("httpbench_history"):
        raise pytest.UsageError("--httpbench-history-check needs --httpbench-history=PATH_OR_URL")
    if config.getoption("httpbench_history"):
        config.stash[STATE_KEY] = HistoryState(config)


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    st = item.config.stash.get(STATE_KEY, None)
    report = outcome.get_result()
    if st is None or not st.check or report.when != "call" or not report.passed:
        return
    from ._historystore import HistoryError
    from ._plugin_session import SESSION_KEY

    texts = []
    for rec in item.config.stash[SESSION_KEY].for_node(item.nodeid):
        if rec.result is None:
            continue
        try:
            found = st.regression(rec.key, rec.result)
        except (HistoryError, DetectorUnavailable) as exc:
            found = [f"history check impossible: {exc}"]
        if found:
            # "history:" marks a test failed by this check alone (it ran only on a passed
            # test): such a measurement is still recorded, here or by the xdist controller
            rec.regressed.extend(HISTORY_TAG + t.split(":", 1)[0] for t in found)
            rec.outcome = "failed"
            texts += [f"{rec.key} {t}" for t in found]
    if texts:
        st.regressions += texts
        report.outcome = "failed"
        report.longrepr = "httpbench history: " + "\nhttpbench history: ".join(texts)


def _points(config: pytest.Config, st: HistoryState) -> list[Point]:
    from ._historyrun import points_of
    from ._plugin_session import SESSION_KEY
    from ._results import result_from_dict

    s = config.stash[SESSION_KEY]
    out: list[Point] = []
    for r in s._all_records_json():
        ok = r["outcome"] == "passed" or any(str(x).startswith(HISTORY_TAG)
                                             for x in r.get("regressed") or ())
        if r["result"] is None or not ok:
            continue
        out += [p._replace(subject=r["key"], scenario="")
                for p in points_of(result_from_dict(r["result"]))]
    return out


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    st = config.stash.get(STATE_KEY, None)
    if st is None or hasattr(config, "workerinput"):  # xdist: the controller records
        return
    points = _points(config, st)
    if not points:
        return
    from ._historyrun import new_run
    from ._historystore import HistoryError, open_store
    from ._plugin_session import SESSION_KEY

    speed = config.stash[SESSION_KEY].speed_index()
    md: dict[str, Any] = {"speed_index": speed} if speed else {}
    run = new_run("pytest", points, md, label="pytest", cwd=st.root)
    try:
        with contextlib.closing(open_store(st.target)) as store:
            st.run_id = store.record(run)
        st.recorded = len({p.subject for p in points})
    except HistoryError as exc:
        st.regressions.append(f"not recorded: {exc}")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    st = config.stash.get(STATE_KEY, None)
    if st is None or hasattr(config, "workerinput"):
        return
    from ._historystore import display_name

    tr = terminalreporter
    commit = (st.git or {}).get("commit")
    if st.run_id is not None:
        tr.write_line(f"httpbench: recorded {st.recorded} measurement(s) as run {st.run_id} "
                      f"(commit {commit[:7] if commit else 'none'}) in history "
                      f"{display_name(st.target)}")
    for text in st.regressions:
        tr.write_line(f"httpbench history: {text}")
