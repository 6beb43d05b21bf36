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
from typing import Any

import pytest

from ._machine import DRIFT_LIMIT, wakeup_text
from ._plugin_fixture import Httpbench, HttpbenchServer
from ._plugin_session import (
    BUDGET_KEY,
    CALIBRATION_WORKLOAD,
    MARKER_KEY,
    SESSION_KEY,
    HttpbenchSession,
    Record,
    calibrate,
    parse_tolerance,
    session_of,
    wakeup_ns,
)

# --httpbench-history and its check live in their own module, loaded with this one
pytest_plugins = ["httpbench._historyplugin"]

__all__ = [
    "CALIBRATION_WORKLOAD",
    "Httpbench",
    "HttpbenchServer",
    "HttpbenchSession",
    "Record",
    "calibrate",
]


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
    wake = wakeup_ns()
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
    if item.stash.get(BUDGET_KEY, None) and not session_of(item.config).for_node(item.nodeid):
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
        recs = session_of(item.config).for_node(item.nodeid)
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
