"""compare's progress says which (client, scenario, repeat) is running and when it should end."""

from __future__ import annotations

import re
import time

import httpbench
import pytest
from httpbench import _runner


def test_eta_from_the_mean_round_time():
    t0 = time.time() - 10.0  # 2 of 6 rounds took 10 s: 4 more take about 20 s
    assert _runner._eta(t0, 2, 6) == "  ETA 20s"
    assert _runner._eta(time.time() - 60.0, 1, 3) == "  ETA 2m00s"
    assert _runner._eta(t0, 0, 6) == ""  # nothing to go on yet
    assert _runner._eta(t0, 6, 6) == ""  # finished


@pytest.mark.slow
def test_progress_names_the_running_round_and_an_eta():
    lines: list[str] = []
    httpbench.compare(clients=["native", "http.client"], scenarios=["get-150b"], n=20,
                      repeat=2, plots=False, warmup=1, progress=lines.append)
    running = [ln for ln in lines if "] running " in ln]
    got = [re.match(r"\[(\d)/4\] running (\S+) (\S+) #(\d)/2", ln).groups() for ln in running]
    assert got == [("1", "get-150b", "native", "1"), ("2", "get-150b", "http.client", "1"),
                   ("3", "get-150b", "native", "2"), ("4", "get-150b", "http.client", "2")]
    assert "ETA" not in running[0]  # no round finished yet
    assert all(re.search(r"ETA (\d+m\d\ds|\d+s)$", ln) for ln in running[1:]), running
    # each round's result line follows its running line
    done = [ln for ln in lines if ln.startswith("[") and "] get-150b" in ln]
    assert len(done) == 4
    assert lines.index(running[0]) < lines.index(done[0]) < lines.index(running[1])


def test_progress_is_one_summary_line_when_stderr_is_not_a_terminal():
    import io

    from httpbench._compare import _Progress

    log = io.StringIO()  # not a terminal
    p = _Progress(log)
    for i in range(50):
        p(f"[{i}/50] get-150b  native  #1   9,000 req/s  p50 44 µs  ETA 3s")
    p("re-run get-150b native #2: disturbed")
    p("FAILED native/get-150b #3: worker crashed")
    p.done()
    p.summary()
    lines = log.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].endswith("] FAILED native/get-150b #3: worker crashed")
    assert lines[1] == ("compare: 50 rounds measured, 1 re-run(s) for noise or too "
                             "few requests, 1 failure(s) (progress is shown on a terminal; "
                        "-q: none)")


def test_progress_rewrites_one_line_on_a_terminal():
    import io

    from httpbench._compare import _Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    p = _Progress(tty)
    for i in range(5):
        p(f"[{i}/5] running get-150b native #1/1")
    p.done()
    p.summary()  # a terminal saw the progress as it went
    out = tty.getvalue()
    assert out.count("\r") == 5 and out.count("\n") == 1


@pytest.mark.slow
def test_compare_cli_writes_one_stderr_line_to_a_log(tmp_path, capfd):
    from httpbench._compare import cli_main

    rc = cli_main(["--clients", "native,http.client", "--scenarios", "get-150b", "--repeat",
                   "2", "--n", "5", "--no-out"])
    cap = capfd.readouterr()
    assert rc == 0, cap.err
    lines = cap.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("compare: 4 rounds measured"), lines


@pytest.mark.slow
def test_eta_counts_work_left_and_never_jumps_within_a_burst():
    lines: list[str] = []
    httpbench.compare(clients=["native", "http.client"], scenarios=["get-150b"], repeat=2,
                      scale=0.4, slices=2, plots=False, warmup=1, progress=lines.append)
    done = [ln for ln in lines if " req/s  p50 " in ln]
    assert len(done) == 4
    # the rounds are reported after all their slices: the work left is nil, no ETA
    assert not [ln for ln in done if "ETA" in ln], done


def test_round_weights_follow_the_scenario_budgets():
    from httpbench._runner import Runner, RunOptions
    from httpbench._scenarios import SCENARIOS

    r = Runner(RunOptions(repeat=1, scale=1.0))
    w = r._round_weights([SCENARIOS["get-150b"], SCENARIOS["download-7m"]])
    assert w == {"get-150b": SCENARIOS["get-150b"].duration,
                 "download-7m": SCENARIOS["download-7m"].duration}
