"""bench(cluster=...): shards on Dask workers, merged exactly.

Totals are checked against the embedded server's own counters (the server runs
in another process); the merged latency histogram against the test's own merge
of the shards' encoded histograms; a killed worker, an unreachable scheduler and
Ctrl-C against what the result must then say.
"""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import httpbench
import pytest
from httpbench import BenchResult, Histogram
from httpbench import _distributed as D
from httpbench._bench import cli_main
from httpbench.report import format_report

distributed = pytest.importorskip("distributed")

PS = (0, 1, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.99, 100)
KEYS = ("requests", "bytes_in", "bytes_out", "connections_accepted")


@pytest.fixture(scope="module", autouse=True)
def _workers_import_this_httpbench():
    """Worker processes spawned from here inherit sys.path, from which conftest took
    the source tree; put back the directory this httpbench was imported from."""
    where = os.path.dirname(os.path.dirname(httpbench.__file__))
    added = where not in sys.path
    if added:
        sys.path.append(where)
    yield
    if added:
        sys.path.remove(where)


@pytest.fixture(scope="module")
def server():
    s = httpbench.start_process(threads=1)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None,
                                       silence_logs=40)
    c = distributed.Client(cluster, set_as_default=False)
    yield c
    c.close()
    cluster.close()


def _settled(server, timeout: float = 3.0) -> dict:
    """Server stats once its counters stop moving."""
    end = time.monotonic() + timeout
    prev = server.stats()
    while time.monotonic() < end:
        time.sleep(0.05)
        cur = server.stats()
        if all(cur[k] == prev[k] for k in KEYS):
            return cur
        prev = cur
    return prev


@pytest.fixture
def shards(monkeypatch):
    """The shard results the coordinator merged, as it received them."""
    seen: list[BenchResult] = []
    real = D._merge

    def spy(parts, *a, **kw):
        seen[:] = [r for _, r in parts]
        return real(parts, *a, **kw)

    monkeypatch.setattr(D, "_merge", spy)
    return seen


def _union(shard_results: list[BenchResult], name: str = "latency") -> Histogram:
    """The test's own merge of the shards' encoded histograms."""
    blobs = [base64.b64decode(r.to_dict()[name]["data"]) for r in shard_results]
    hs = [Histogram.decode(b) for b in blobs]
    out = hs[0].copy()
    for h in hs[1:]:
        out.merge(h)
    return out


def _check_sums(r: BenchResult) -> None:
    ok = [w for w in r.workers if w.status not in ("lost", "cancelled")]
    assert r.responses == sum(w.responses for w in ok)
    assert r.successes == sum(w.successes for w in ok)
    assert r.errors == sum(w.errors for w in ok)
    assert r.bytes_in == sum(w.bytes_in for w in ok)
    assert r.cpu_user_ns + r.cpu_sys_ns == sum(w.cpu_user_ns + w.cpu_sys_ns for w in ok)
    # series: every shard's seconds land in the merged ones (a one-process run, too,
    # drops responses completing after its last covered second)
    assert sum(r.series_responses) == sum(sum(w.series_responses) for w in ok)
    assert r.config.concurrency == sum(w.concurrency for w in r.workers)


def _check_counters(r: BenchResult, shard_results: list[BenchResult]) -> None:
    """The merged run's rate and connection counters are the shards' sums."""
    for name in ("sends", "sends_late", "unsent", "connect_attempts", "connect_failures",
                 "connect_fd_exhausted"):
        vals = [getattr(s, name) for s in shard_results]
        want = None if all(v is None for v in vals) else sum(v or 0 for v in vals)
        assert getattr(r, name) == want, name


# -- the split (no cluster) ---------------------------------------------


def test_split_sums_are_exact():
    for total in (1, 2, 3, 7, 1000, 1001, 10**9 + 7):
        for parts in (1, 2, 3, 5, 16):
            s = D.split(total, parts)
            assert sum(s) == total and max(s) - min(s) <= 1 and len(s) == parts
    plan = D._plan(n=1001, concurrency=5, threads=3, rate=None, nworkers=2)
    assert [p["n"] for p in plan] == [501, 500]
    assert [p["concurrency"] for p in plan] == [3, 2]
    assert [p["threads"] for p in plan] == [2, 1]
    # at least one connection per shard: fewer shards than workers when c (or n) is small
    assert len(D._plan(n=None, concurrency=1, threads=1, rate=None, nworkers=4)) == 1
    assert len(D._plan(n=3, concurrency=8, threads=1, rate=None, nworkers=4)) == 3
    # rate: even shares, schedules shifted so the slots interleave into the whole's
    plan = D._plan(n=None, concurrency=4, threads=1, rate=300.0, nworkers=3)
    assert sum(p["rate"] for p in plan) == 300.0
    slots = sorted(p["phase_s"] + k / p["rate"] for p in plan for k in range(100))
    assert slots == pytest.approx([j / 300.0 for j in range(300)], abs=1e-12)


def test_histogram_merge_equals_union_of_samples():
    rng = random.Random(7)
    samples = [int(rng.lognormvariate(12, 1.5)) for _ in range(30000)]
    whole = Histogram()
    whole.record_many(samples)
    shard_hists = []
    for i in range(3):
        h = Histogram()
        h.record_many(samples[i::3])
        shard_hists.append(Histogram.decode(h.encode()))  # as shards ship them
    merged = D._merge_hist(shard_hists)
    assert merged == whole
    assert merged.count == whole.count and merged.min == whole.min and merged.max == whole.max
    for p in PS:
        assert merged.percentile(p) == whole.percentile(p), p


def test_missing_dask_names_the_extra(monkeypatch, server):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r'pip install "httpbench\[distributed\]"'):
        httpbench.bench(server.url + "/", n=1, cluster="local:1")


@pytest.mark.slow  # waits out the connect timeout
def test_unreachable_scheduler_fails_within_the_connect_timeout(monkeypatch, server):
    monkeypatch.setattr(D, "CONNECT_TIMEOUT", 2.0)
    t0 = time.monotonic()
    with pytest.raises(httpbench.ConnectError, match="127.0.0.1:9"):
        httpbench.bench(server.url + "/", n=10, cluster="tcp://127.0.0.1:9")
    assert time.monotonic() - t0 < 8


# -- LocalCluster, 2 worker processes -----------------------------------


@pytest.mark.slow  # a local Dask cluster takes seconds to start
def test_n_exact_and_percentiles_of_the_union(server, client, shards):
    before = server.stats()
    r = httpbench.bench(server.url + "/bytes/100", n=2001, concurrency=4, threads=2,
                        cluster=client)
    after = _settled(server)
    assert r.responses == r.successes == 2001 and r.errors == 0 and not r.partial
    assert after["requests"] - before["requests"] == 2001
    assert after["bytes_out"] - before["bytes_out"] == r.bytes_in
    assert after["bytes_in"] - before["bytes_in"] == r.bytes_out
    assert after["connections_accepted"] - before["connections_accepted"] == 4 == r.connections
    assert [w.n for w in r.workers] == [1001, 1000]
    assert [w.responses for w in r.workers] == [1001, 1000]
    assert {w.status for w in r.workers} == {"ok"}
    assert r.metadata["body_bytes_in"] == 2001 * 100
    _check_sums(r)
    # merged histograms == the test's own merge of the shards' encodings
    assert len(shards) == 2 and sum(s.latency.count for s in shards) == 2001
    for name in ("latency", "ttfb", "processing", "connect"):
        u = _union(shards, name)
        assert getattr(r, name) == u, name
    u = _union(shards)
    for p in PS:
        assert r.latency.percentile(p) == u.percentile(p)
    assert r.p99 == u.percentile(99)
    # clocks of processes on one host agree within the measured uncertainty
    for w in r.workers:
        assert abs(w.clock_offset_ns) <= w.clock_uncertainty_ns + 2_000_000
        assert w.host and w.cpu_user_ns + w.cpu_sys_ns > 0


@pytest.mark.slow
def test_duration_exact_against_server(server, client):
    before = server.stats()
    r = httpbench.bench(server.url + "/", duration=1.0, concurrency=4, cluster=client)
    after = _settled(server)
    served = after["requests"] - before["requests"]
    done = r.responses + r.errors
    assert r.successes > 0 and not r.interrupted and not r.partial
    # what the server answered is what the shards completed, plus at most what
    # was still in flight when they stopped (as in one process)
    assert done <= served <= done + r.in_flight_at_stop
    _check_sums(r)
    # both shards ran the same wall-clock second
    starts = [w.start_unix_ns for w in r.workers]
    assert max(starts) - min(starts) < 50_000_000
    assert 0.95e9 <= r.duration_ns <= 1.5e9
    assert len(r.series_responses) in (1, 2)


@pytest.mark.slow
def test_rate_split_exact(server, client, shards):
    before = server.stats()
    r = httpbench.bench(server.url + "/", n=301, rate=600, concurrency=4, cluster=client)
    after = _settled(server)
    assert r.successes == 301 and after["requests"] - before["requests"] == 301
    _check_counters(r, shards)
    assert r.sends == 301 and r.connect_attempts >= 4 and r.connect_failures == 0
    assert [w.n for w in r.workers] == [151, 150]
    assert sum(w.rate for w in r.workers) == 600.0 == r.config.rate
    assert r.latency.count == r.latency_uncorrected.count == 301
    # the aggregate schedule is the asked rate: 301 slots at 600/s take ~0.5 s
    assert 0.4e9 <= r.duration_ns <= 1.0e9
    before = server.stats()
    r = httpbench.bench(server.url + "/", duration=1.0, rate=400, concurrency=4,
                        cluster=client)
    after = _settled(server)
    sent = r.responses + r.errors + r.in_flight_at_stop
    assert after["requests"] - before["requests"] <= sent
    assert abs(sent - 400) <= 4, sent


@pytest.mark.slow
def test_json_round_trip_and_report(server, client, tmp_path):
    r = httpbench.bench(server.url + "/", n=50, concurrency=2, cluster=client, label="d")
    p = tmp_path / "r.json"
    r.save(p)
    back = httpbench.load(p)
    assert back == r and back.workers == r.workers and not back.partial
    text = format_report(r)
    assert "Workers (2 shards)" in text and r.workers[1].worker in text
    # a one-process result keeps the schema it always had
    one = httpbench.bench(server.url + "/", n=5)
    d = one.to_dict()
    assert "workers" not in d and "partial" not in d
    assert "Workers" not in format_report(one)


@pytest.mark.slow
def test_version_mismatch_is_refused_before_the_run(server, client, monkeypatch):
    monkeypatch.setattr(D, "_local_version", lambda: "0.0.0+other")
    before = server.stats()["requests"]
    with pytest.raises(RuntimeError, match=r"tcp://127\.0\.0\.1:\d+: httpbench "):
        httpbench.bench(server.url + "/", n=10, cluster=client)
    assert server.stats()["requests"] == before


@pytest.mark.slow
def test_shard_error_is_raised(client):
    with pytest.raises(httpbench.ConnectError):
        httpbench.bench("http://no-such-host.invalid/", n=4, concurrency=2, cluster=client)


@pytest.mark.slow
def test_ctrl_c_returns_the_partial_merge(server, client):
    main = threading.get_ident()
    timer = threading.Timer(1.5, lambda: signal.pthread_kill(main, signal.SIGINT))
    before = server.stats()
    t0 = time.monotonic()
    timer.start()
    try:
        r = httpbench.bench(server.url + "/", duration=60, concurrency=2, cluster=client)
    finally:
        timer.cancel()
    took = time.monotonic() - t0
    after = _settled(server)
    assert r.interrupted and r.successes > 0 and not r.partial
    assert {w.status for w in r.workers} == {"interrupted"}
    assert took < 10
    done = r.responses + r.errors
    assert done <= after["requests"] - before["requests"] <= done + r.in_flight_at_stop


# -- a real `dask scheduler` and 2 `dask worker` processes ---------------


def _dask_bin() -> str:
    return os.path.join(os.path.dirname(sys.executable), "dask")


class _RealCluster:
    def __init__(self, tmp_path, workers: int = 2) -> None:
        self.procs: list[subprocess.Popen] = []
        sf = tmp_path / "scheduler.json"
        log = open(tmp_path / "dask.log", "w")
        self.log = log
        self.procs.append(subprocess.Popen(
            [_dask_bin(), "scheduler", "--host", "127.0.0.1", "--port", "0",
             "--no-dashboard", "--scheduler-file", str(sf)], stdout=log, stderr=log))
        end = time.monotonic() + 60
        while not sf.exists() or not sf.read_text().strip():
            assert time.monotonic() < end, "dask scheduler did not start"
            time.sleep(0.1)
        time.sleep(0.2)  # the file may be written in more than one go
        self.address = json.loads(sf.read_text())["address"]
        for _ in range(workers):
            self.procs.append(subprocess.Popen(
                [_dask_bin(), "worker", self.address, "--nthreads", "1", "--no-nanny",
                 "--no-dashboard", "--host", "127.0.0.1", "--death-timeout", "60"],
                stdout=log, stderr=log))
        with distributed.Client(self.address, timeout=30, set_as_default=False) as c:
            c.wait_for_workers(workers, timeout=60)
            self.worker_pids = c.run(os.getpid)

    def close(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self.log.close()


@pytest.fixture
def real_cluster(tmp_path):
    c = _RealCluster(tmp_path)
    yield c
    c.close()


@pytest.mark.slow
def test_real_scheduler_and_workers(server, real_cluster, capsys):
    before = server.stats()
    r = httpbench.bench(server.url + "/", n=1000, concurrency=2, cluster=real_cluster.address)
    after = _settled(server)
    assert r.successes == 1000 and after["requests"] - before["requests"] == 1000
    assert sorted(w.worker for w in r.workers) == sorted(real_cluster.worker_pids)
    _check_sums(r)
    before = server.stats()
    r = httpbench.bench(server.url + "/", duration=1.0, concurrency=2,
                        cluster=real_cluster.address)
    after = _settled(server)
    done = r.responses + r.errors
    assert done <= after["requests"] - before["requests"] <= done + r.in_flight_at_stop
    # the CLI
    before = server.stats()
    rc = cli_main([server.url + "/", "-n", "200", "-c", "2", "--dask", real_cluster.address])
    out = capsys.readouterr().out
    assert rc == 0
    assert "Complete requests:      200" in out and "Workers (2 shards)" in out
    assert _settled(server)["requests"] - before["requests"] == 200


@pytest.mark.slow
def test_worker_killed_mid_run_gives_partial_result(server, real_cluster):
    # rate-limited so the run lasts ~4 s; worker of shard 1 is killed after ~1 s
    addrs = sorted(real_cluster.worker_pids)
    victim = real_cluster.worker_pids[addrs[1]]
    timer = threading.Timer(1.2, lambda: os.kill(victim, signal.SIGKILL))
    before = server.stats()
    timer.start()
    try:
        r = httpbench.bench(server.url + "/", n=8000, rate=2000, concurrency=2,
                            cluster=real_cluster.address)
    finally:
        timer.cancel()
    after = _settled(server)
    assert r.partial and not r.interrupted
    ok, lost = r.workers
    assert lost.status == "lost" and lost.n == 4000 and lost.worker == addrs[1]
    assert r.lost == (lost,)
    # the survivor's share complete and exactly what the merge holds
    assert ok.status == "ok" and ok.responses == ok.successes == 4000
    assert r.responses == r.successes == 4000 and r.latency.count == 4000
    served = after["requests"] - before["requests"]
    assert 4000 <= served < 8000  # plus what the victim got through before it died
    assert "PARTIAL" in format_report(r)


@pytest.mark.slow
def test_fewer_connections_than_workers_is_said(server, client, capsys):
    r = httpbench.bench(server.url + "/", n=50, concurrency=1, cluster=client)
    assert r.successes == 50 and len(r.workers) == 1
    assert r.metadata["distributed"]["workers"] == 2
    from httpbench.report import format_report

    assert ("Workers (1 shard; 1 of 2 workers idle: -c 1 is fewer connections than workers; "
            "use -c 2 or more to load every worker)") in format_report(r)


@pytest.mark.slow
def test_dask_local_2_with_c_1_warns(server, capsys):
    rc = cli_main([server.url + "/", "-n", "40", "-c", "1", "--dask-local", "2"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "Complete requests:      40" in out and "Workers (1 shard; " in out
    assert ("httpbench: warning: 1 of 2 workers idle: -c 1 is fewer connections than "
            "workers; use -c 2 or more to load every worker") in err
