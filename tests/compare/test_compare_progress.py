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
