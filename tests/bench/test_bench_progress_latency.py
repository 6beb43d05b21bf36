"""The progress snapshots carry current p50/p99, read from a lock-free coarse copy of
the latency histogram while the run goes on: the exact value lies in [p, p * 1.0625)."""

from __future__ import annotations

import pytest
from httpbench import bench
from httpbench._loadgen import Progress, _stderr_progress

PRECISION = 1.0625  # a progress bucket spans 1/16 of its lower bound


@pytest.mark.slow
def test_progress_percentiles_bounded_by_the_final_max(server):
    seen: list[Progress] = []
    r = bench(server.url + "/bytes/100", duration=0.8, concurrency=2, threads=2,
              progress=seen.append)
    with_lat = [p for p in seen if p.completed and not p.warming_up]
    assert with_lat, seen
    for p in with_lat:
        assert 0 < p.p50_ns <= p.p99_ns <= r.latency.max, (p, r.latency.max)
    # each figure is the floor of a bucket holding a real sample, at most 1/16 below it
    assert all(p.p50_ns >= r.latency.min / PRECISION for p in with_lat)


@pytest.mark.slow
def test_progress_p50_on_a_20ms_delay(server):
    seen: list[Progress] = []
    bench(server.url + "/delay/20", duration=1.0, concurrency=4, progress=seen.append)
    p = [p for p in seen if p.completed >= 10][-1]
    # the true median is a little over 20 ms; the bucket's lower bound is within 1/16 below
    assert 20e6 / PRECISION <= p.p50_ns <= 20e6 * 1.25, p
    assert p.p50_ns <= p.p99_ns < 200e6, p


def test_terminal_line_shows_percentiles(capsys):
    show = _stderr_progress()
    p = Progress(completed=500, ok=500, failed=0, bytes_in=0, elapsed_s=2.5,
                 warming_up=False, total=None, duration_s=10.0, p50_ns=20_000_000,
                 p99_ns=25_000_000)
    show(p._replace(completed=0, elapsed_s=0.0, p50_ns=0, p99_ns=0))
    first = capsys.readouterr().err
    assert "p50" not in first  # nothing measured yet: no percentiles shown
    show(p)
    line = capsys.readouterr().err.split("\r\x1b[2K")[-1]
    assert "p50 20" in line and "p99 25" in line and "ms" in line
    assert "2.5s/10s" in line


def test_tqdm_bar_shows_percentiles(capsys):
    pytest.importorskip("tqdm")
    from httpbench import report as RP

    bar = RP.progress_bar("bench", enable=True)
    bar(Progress(10, 10, 0, 0, 0.5, False, 100, None, 20_000_000, 25_000_000))
    bar.close()
    err = capsys.readouterr().err
    assert "p50=20" in err and "p99=25" in err, err


@pytest.mark.slow
def test_cli_progress_line_shows_percentiles_on_a_tty(server):
    import sys

    from _raw import run_with_tty_stderr

    p, err = run_with_tty_stderr([sys.executable, "-m", "httpbench", server.url + "/delay/5",
                                  "-d", "0.8s", "-c", "2"])
    assert p.returncode == 0
    assert b"p50 " in err and b"p99 " in err and b" ms" in err, err
