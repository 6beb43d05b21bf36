"""Exact per-call costs: instructions under callgrind, syscalls under strace, and
the budgets and baselines built on them."""

from __future__ import annotations

import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import zlib

import httpbench
import pytest
from httpbench import _core, _deterministic
from httpbench import _results as R
from httpbench._baseline import compare_metrics, function_movers
from httpbench._budget import BudgetError, BudgetExceeded, parse_budget, result_metrics

pytest_plugins = ["pytester"]

needs_valgrind = pytest.mark.skipif(
    shutil.which("valgrind") is None or not _core._callgrind_built(),
    reason="valgrind (with valgrind/callgrind.h at build time) not available")
needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")

_DATA = b"httpbench" * 4000


# Workloads: module level, so the counting child imports them by pickle.
def getpids(k: int) -> None:
    for _ in range(k):
        os.getpid()


def crc() -> int:
    return zlib.crc32(_DATA)


def spin(k: int) -> int:
    s = 0
    for i in range(k):
        s += i
    return s


class NativeGet:
    """A picklable callable making one GET with the native Client (created lazily,
    so in the child during warm-up)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = None

    def __getstate__(self) -> dict:
        return {"url": self.url, "client": None}

    def __call__(self) -> None:
        if self.client is None:
            self.client = httpbench.Client()
        self.client.get(self.url)


# --------------------------------------------------------------------------
# syscalls


@needs_strace
@pytest.mark.slow
@pytest.mark.parametrize("k", [0, 1, 5])
def test_k_getpid_calls_show_exactly_k_getpid_per_call(k):
    d = _deterministic.count_syscalls(functools.partial(getpids, k), n=10, warmup=3)
    assert d.calls == 10
    assert all(c.get("getpid", 0) == k for c in d.syscalls)
    assert all(sum(c.values()) == k for c in d.syscalls)  # nothing else, markers excluded


def test_strace_parser_counts_between_markers_per_thread(tmp_path):
    trace = tmp_path / "t"
    trace.write_text(textwrap.dedent("""\
        10 getpid() = 10
        10 write(-1, "httpbench:det:begin", 19) = -1 EBADF (Bad file descriptor)
        10 write(-1, "httpbench:det:call", 18) = -1 EBADF (Bad file descriptor)
        10 getpid() = 10
        11 futex(0x1, FUTEX_WAKE, 1) = 0
        10 read(3,  <unfinished ...>
        10 <... read resumed>"x", 1) = 1
        10 write(-1, "httpbench:det:call", 18) = -1 EBADF (Bad file descriptor)
        10 getpid() = 10
        10 write(-1, "httpbench:det:end", 17) = -1 EBADF (Bad file descriptor)
        10 getpid() = 10
        """))
    d = _deterministic.parse_strace(str(trace))
    assert [dict(c) for c in d.syscalls] == [{"getpid": 1, "read": 1}, {"getpid": 1}]
    assert dict(d.other_threads) == {"futex": 1}


def test_strace_parser_refuses_a_thread_started_in_the_window(tmp_path):
    trace = tmp_path / "t"
    trace.write_text('10 write(-1, "httpbench:det:begin", 19) = -1 EBADF\n'
                     '10 write(-1, "httpbench:det:call", 18) = -1 EBADF\n'
                     '10 clone3({flags=CLONE_VM}, 88) = 12\n')
    with pytest.raises(RuntimeError, match="clone3.*not allowed"):
        _deterministic.parse_strace(str(trace))


# --------------------------------------------------------------------------
# instructions


@needs_valgrind
@pytest.mark.slow
def test_instructions_of_a_known_workload_match_a_separate_callgrind_run(tmp_path):
    # Our window (client requests) vs callgrind's own function toggle on the C
    # function doing the work, in a run of the same code without httpbench.
    d = _deterministic.count_instructions(crc, n=10, warmup=20)
    assert len(set(d.instructions)) == 1  # every call costs exactly the same
    ours = {name: incl for name, (incl, _self) in d.functions.items() if "crc32" in name}
    assert ours, sorted(d.functions)[:20]
    fname = max(ours, key=ours.get)
    out = tmp_path / "cg.out"
    script = (f"import zlib\ndata = {_DATA!r}\n"
              "for _ in range(10):\n    zlib.crc32(data)\n")
    subprocess.run(["valgrind", "--tool=callgrind", "--quiet", f"--toggle-collect={fname}",
                    f"--callgrind-out-file={out}", sys.executable, "-c", script],
                   check=True, timeout=300)
    total = next(int(line.split()[1]) for line in out.read_text().splitlines()
                 if line.startswith(("summary:", "totals:")))
    # The separate run also counts the warm-up-free first call; the loop has 10.
    assert ours[fname] == pytest.approx(total / 10, rel=1e-3)
    assert d.instructions[0] >= ours[fname]


@needs_valgrind
@pytest.mark.slow
def test_instructions_grow_linearly_with_known_iterations():
    a = statistics.mean(_deterministic.count_instructions(
        functools.partial(spin, 1000), n=5, warmup=20).instructions)
    b = statistics.mean(_deterministic.count_instructions(
        functools.partial(spin, 2000), n=5, warmup=20).instructions)
    c = statistics.mean(_deterministic.count_instructions(
        functools.partial(spin, 3000), n=5, warmup=20).instructions)
    assert (c - b) == pytest.approx(b - a, rel=1e-3)


@needs_valgrind
@needs_strace
@pytest.mark.slow
def test_native_get_instruction_count_repeats_within_a_tenth_of_a_percent():
    with httpbench.start_process() as srv:
        fn = NativeGet(srv.url + "/bytes/150")
        # the first run per call (a dump per call), the others in one window each
        runs = [httpbench.measure(fn, n=30, instructions="per-call" if i == 0 else True,
                                  syscalls=(i == 0), alloc=False, gc=False) for i in range(3)]
    per = [r.instructions_per_call for r in runs]
    cv = statistics.pstdev(per) / statistics.mean(per)
    assert cv <= 1e-3, per
    r = runs[0]
    assert len(r.instructions_by_call) == 30
    assert runs[1].instructions_by_call is None
    assert r.metadata["callgrind_top"]
    sc = r.syscalls_per_call
    assert sc and r.syscalls_total_per_call >= 2  # at least a send and a receive
    assert len(r.syscalls_by_call) == 30
    # results know both metrics: JSON round trip, DataFrame row, report
    again = R.loads(r.to_json())
    assert again.instructions_per_call == r.instructions_per_call
    assert again.syscalls_per_call == r.syscalls_per_call
    m = result_metrics(r)
    assert m["instructions_per_request"] == r.instructions_per_call
    assert "instructions/call" in r.summary()


@needs_valgrind
@pytest.mark.slow
def test_measure_keeps_the_callgrind_file_and_accepts_module_function_strings(tmp_path):
    out = tmp_path / "keep.out"
    r = httpbench.measure("test_deterministic:crc", n=5, instructions="per-call",
                          callgrind_file=str(out))
    assert r.label == "test_deterministic:crc"
    assert out.exists() and r.metadata["callgrind_file"] == str(out)
    assert len(r.instructions_by_call) == 5


# --------------------------------------------------------------------------
# bad input


def test_valgrind_missing_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(_deterministic.ToolMissing, match="Debian package 'valgrind'"):
        httpbench.measure(crc, n=5, instructions=True)
    with pytest.raises(_deterministic.ToolMissing, match="Debian package 'strace'"):
        httpbench.measure(crc, n=5, syscalls=True)


@needs_valgrind
def test_unpicklable_callable_is_a_clear_error():
    with pytest.raises(TypeError, match="picklable"):
        httpbench.measure(lambda: None, n=5, instructions=True)
    with pytest.raises(ValueError, match="module:function"):
        httpbench.measure("no_colon_here", n=5, instructions=True)
    with pytest.raises(ValueError, match="callgrind_file needs instructions"):
        httpbench.measure(crc, n=5, callgrind_file="x")
    with pytest.raises(ValueError, match="'per-call'"):
        httpbench.measure(crc, n=5, instructions="each")


# --------------------------------------------------------------------------
# results, budgets, baselines (no valgrind needed)


def _fake(instr: float | None = 2_000_000.0, sys_: dict | None = None, gc=(2, 0, 0)):
    base = httpbench.measure(crc, n=50, calibrate=False)
    import dataclasses

    return dataclasses.replace(
        base, instructions_per_call=instr,
        instructions_by_call=None if instr is None else (int(instr),) * 50,
        syscalls_per_call=sys_ if sys_ is not None else {"sendto": 1.0, "recvfrom": 2.0},
        syscalls_by_call=(3,) * 50, gc_collections=gc)


def test_version_2_file_loads_with_the_new_fields_absent():
    d = httpbench.measure(crc, n=20).to_dict()
    for k in ("instructions_per_call", "instructions_by_call", "syscalls_per_call",
              "syscalls_by_call"):
        d.pop(k)
    doc = json.dumps({"format": R.FILE_FORMAT, "schema_version": 2,
                      "httpbench_version": "0.1.0", "saved_unix_ns": 0, "record": d})
    r = R.loads(doc)
    assert r.instructions_per_call is None and r.syscalls_per_call is None
    assert r.syscalls_total_per_call is None
    row = r.to_dataframe().iloc[0] if _has_pandas() else None
    if row is not None:
        assert row["instructions_per_request"] != row["instructions_per_request"]  # NaN


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def test_fields_round_trip_and_show_in_rows():
    from httpbench._rows import record_row

    r = _fake()
    again = R.loads(r.to_json())
    assert again == r
    assert again.syscalls_total_per_call == 3.0
    row = record_row("c", "s", 0, r)
    assert row["instructions_per_request"] == 2_000_000.0
    assert row["syscalls_per_request"] == 3.0


def test_budgets_on_instructions_syscalls_allocations_and_gc():
    r = _fake()
    r.assert_budget(instructions="<2.5M", syscalls="<=3", gc="<=0.04",
                    allocations="<=100000")
    assert [lim.metric.name for lim in parse_budget("instructions<2.5M, syscalls<=3")] == [
        "instructions_per_request", "syscalls_per_request"]
    with pytest.raises(BudgetExceeded, match="instructions_per_request"):
        r.assert_budget(instructions="<1.5M")
    with pytest.raises(BudgetExceeded, match="syscalls_per_request"):
        r.assert_budget(syscalls="<3")
    with pytest.raises(BudgetError, match="unknown budget metric 'cycles'"):
        r.assert_budget(cycles="<1M")
    # not measured: a failure, never a silent pass
    with pytest.raises(BudgetExceeded):
        _fake(instr=None).assert_budget(instructions="<2.5M")


def test_baseline_tolerance_is_one_percent_for_instructions_and_exact_for_syscalls():
    base = result_metrics(_fake())
    ok = compare_metrics(base, result_metrics(_fake(instr=2_019_000.0)), kind="measure",
                         scale=1.0, tolerance=0.1)
    assert {r.metric.name: r.verdict for r in ok}["instructions_per_request"] == "ok"
    bad = compare_metrics(base, result_metrics(_fake(instr=2_021_000.0)), kind="measure",
                          scale=1.0, tolerance=0.1)
    assert {r.metric.name: r.verdict for r in bad}["instructions_per_request"] == "slower"
    wider = compare_metrics(base, result_metrics(_fake(instr=2_021_000.0)), kind="measure",
                            scale=1.0, tolerance=0.1, instructions_tolerance=0.02)
    assert {r.metric.name: r.verdict for r in wider}["instructions_per_request"] == "ok"
    more = compare_metrics(base, result_metrics(_fake(sys_={"sendto": 1.0, "recvfrom": 2.02})),
                           kind="measure", scale=1.0, tolerance=0.1)
    assert {r.metric.name: r.verdict for r in more}["syscalls_per_request"] == "slower"
    # GC: one collection either way is where gen 0's counter stood at the start
    gc_one = compare_metrics(base, result_metrics(_fake(gc=(3, 0, 0))), kind="measure",
                             scale=1.0, tolerance=0.1)
    assert {r.metric.name: r.verdict for r in gc_one}["gc_per_request"] == "ok"
    gc_more = compare_metrics(base, result_metrics(_fake(gc=(4, 0, 0))), kind="measure",
                              scale=1.0, tolerance=0.1)
    assert {r.metric.name: r.verdict for r in gc_more}["gc_per_request"] == "slower"


def test_function_movers_lists_what_got_more_expensive():
    text = function_movers({"parse": 1000.0, "send": 500.0, "gone": 10.0},
                           {"parse": 1600.0, "send": 490.0, "new": 50.0})
    lines = text.splitlines()
    assert lines[0] == "top movers:"
    assert "parse" in lines[2] and "+600" in lines[2]  # biggest mover first
    assert function_movers({}, {"a": 1.0}) == ""


# --------------------------------------------------------------------------
# the pytest plugin: a syscalls budget turns on the count, and can fail


PLUGIN_TEST = '''
import os
import pytest


def three():
    for _ in range(3):
        os.getpid()


@pytest.mark.httpbench(budget="syscalls<=3")
def test_holds(httpbench):
    r = httpbench.measure(three, n=5, warmup=2)
    assert r.syscalls_per_call == {"getpid": 3.0}


@pytest.mark.httpbench(budget="syscalls<3")
def test_breaks(httpbench):
    httpbench.measure(three, n=5, warmup=2)
'''


@needs_strace
@pytest.mark.slow
def test_plugin_syscalls_budget_pass_and_fail(pytester):
    pytester.makepyfile(test_sys=PLUGIN_TEST)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    res.assert_outcomes(passed=1, failed=1)
    res.stdout.fnmatch_lines(["*syscalls_per_request*< 3*FAIL*"])
