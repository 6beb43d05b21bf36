"""compare --deterministic and measure_async's counts: instructions (callgrind)
and syscalls (strace) per request from counting children, and the scaled
deadline that keeps a hanging call from hanging the run."""

from __future__ import annotations

import asyncio
import os
import shutil
import time

import httpbench
import pytest
from httpbench import _core, _deterministic
from httpbench.report import cell_rows, format_tables

needs_tools = pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("strace") is None
    or not _core._callgrind_built(),
    reason="valgrind (with valgrind/callgrind.h at build time) and strace needed")


# Workloads: module level, so the counting child imports them by pickle.
async def two_getpids() -> None:
    os.getpid()
    os.getpid()
    await asyncio.sleep(0)


def hang() -> None:
    time.sleep(3600)


def _compare() -> httpbench.ResultSet:
    return httpbench.compare(["native", "http.client"], ["get-150b"], repeat=1, n=200,
                             out=None, plots=False, deterministic=True, deterministic_n=50)


@pytest.mark.slow
@needs_tools
def test_compare_deterministic_columns_and_exact_native_syscalls() -> None:
    runs = [_compare(), _compare()]
    per_call = []
    for rs in runs:
        rows = {r["client"]: r for r in cell_rows(rs, "get-150b")}
        assert set(rows) == {"native", "http.client"}
        for row in rows.values():
            assert row["instructions_per_request"] > 1000
            assert row["syscalls_per_request"] >= 2
        # the native client does more in C: fewer user-space instructions
        assert (rows["native"]["instructions_per_request"]
                < rows["http.client"]["instructions_per_request"])
        mr = rs.get("native", "get-150b")
        per_call.append(mr.syscalls_per_call)
        # every counted GET of the native client makes the same syscalls
        assert set(mr.syscalls_by_call) == {sum(mr.syscalls_per_call.values())}
        assert mr.metadata["deterministic_calls"] == 50
        text = format_tables(rs)
        assert "instr/req" in text and "syscalls/req" in text
        df_cols = set(rs.to_dataframe().columns) if _has_pandas() else set()
        if df_cols:
            assert {"instructions_per_request", "syscalls_per_request"} <= df_cols
        d = rs.to_dict()
        assert any(r["result"].get("instructions_per_call") for r in d["results"])
    # a keep-alive GET of the native client: a MSG_PEEK recvfrom checking the pooled
    # connection is still open (EAGAIN), the request's sendmsg, one ppoll, the
    # recvfrom of the whole response
    assert per_call[0] == {"sendmsg": 1.0, "recvfrom": 2.0, "ppoll": 1.0}
    assert per_call[0] == per_call[1]


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def test_compare_deterministic_off_keeps_the_table() -> None:
    rows = [{"client": "x", "rps": 1.0, "p50_ns": 1.0, "p99_ns": 1.0,
             "cpu_ns_per_request": 1000.0, "allocs_per_request": 1.0,
             "native_allocs_per_request": 1.0, "alloc_bytes_per_request": 1024.0,
             "gc_per_10k": 0.0, "peak_rss_bytes": 1.0, "notes": {}, "repeats": 1,
             "instructions_per_request": None, "syscalls_per_request": None}]
    from httpbench.report import compare_table

    assert "instr/req" not in compare_table(rows)
    rows[0]["instructions_per_request"] = 1234.0
    assert "instr/req" in compare_table(rows) and "syscalls/req" not in compare_table(rows)


@pytest.mark.slow
@needs_tools
def test_measure_async_counts() -> None:
    r = httpbench.measure_async(two_getpids, n=30, instructions=True, syscalls=True)
    assert r.instructions_per_call and r.instructions_per_call > 0
    # the event loop adds its own; the two calls of the coroutine are there exactly
    assert r.syscalls_per_call["getpid"] >= 2.0
    assert set(r.syscalls_by_call) == {sum(r.syscalls_per_call.values())}
    again = httpbench.measure_async(two_getpids, n=30, syscalls=True)
    assert again.syscalls_per_call == r.syscalls_per_call


def test_scaled_timeout_grows_with_calls_and_slowdown() -> None:
    t = _deterministic.scaled_timeout(0.001, 220)
    assert t > _deterministic.SLOWDOWN * 0.001 * 220
    assert _deterministic.scaled_timeout(0.01, 220) > t


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
def test_a_hanging_call_ends_with_a_clear_timeout_error() -> None:
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"did not finish .* in 3 s and was killed.*scaled"):
        _deterministic.count_syscalls(hang, n=2, warmup=0, timeout=3)
    assert time.monotonic() - t0 < 30


def test_cli_flags_and_bad_count() -> None:
    from httpbench._compare import _parser

    args = _parser().parse_args(["--deterministic", "--deterministic-n", "50"])
    assert args.deterministic and args.deterministic_n == 50
    assert not _parser().parse_args([]).deterministic
    with pytest.raises(ValueError, match="deterministic_n"):
        httpbench.compare(["native"], ["get-150b"], deterministic=True, deterministic_n=0)
