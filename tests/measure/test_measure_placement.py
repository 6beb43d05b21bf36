"""measure() next to a server this process started: the calling thread and the server's
threads are placed by the wake-up calibration for the span, recorded, and put back."""

from __future__ import annotations

import os
import statistics

import httpbench
import pytest
from httpbench import _machine, _server

CPUS = sorted(os.sched_getaffinity(0))
TWO = pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs")


def _probe(client, url, seen):
    def call():
        if not seen:  # inside the measured span: where things run now
            seen.append(sorted(os.sched_getaffinity(0)))
        client.get(url)
    return call


@TWO
@pytest.mark.parametrize("kind", ["in-process", "process"])
def test_server_and_caller_placed_for_the_span_and_restored(kind):
    srv = httpbench.Server().start() if kind == "in-process" else _server.start_process()
    try:
        c = httpbench.Client()
        url = srv.url + "/bytes/150"
        srv_before, mine_before = srv.cpus, sorted(os.sched_getaffinity(0))
        seen: list = []
        srv_during: list = []

        def call():
            if not seen:
                seen.append(sorted(os.sched_getaffinity(0)))
                srv_during.append(srv.cpus)
            c.get(url)

        r = httpbench.measure(call, n=200, warmup=0)
        want = _machine.choose_placement("auto", True, r.metadata["wakeup_ns"], CPUS)
        assert r.metadata["placement"] == want
        si = r.metadata["speed_index"]  # controls right before and after the span
        assert len(si["rounds"]) == 2 and si["min"] <= si["median"] <= si["max"]
        assert r.metadata["wakeup_ns"]["same_cpu"] > 0 and r.metadata["wakeup_ns"]["cross_cpu"] > 0
        assert seen == [want["client_cpus"]] and srv_during == [want["server_cpus"]]
        assert sorted(os.sched_getaffinity(0)) == mine_before
        assert srv.cpus == srv_before
        s = httpbench.measure(call, n=50, warmup=0, placement="split")
        assert s.metadata["placement"] == {"mode": "split", "server_cpus": [CPUS[0]],
                                           "client_cpus": [CPUS[-1]]}
        c.close()
    finally:
        srv.stop()


def test_unpinned_or_no_server_moves_nothing():
    with httpbench.Server() as srv:
        c = httpbench.Client()
        url = srv.url + "/bytes/150"
        seen: list = []
        r = httpbench.measure(_probe(c, url, seen), n=50, warmup=0, placement="unpinned")
        assert "placement" not in r.metadata and seen == [CPUS]
        with pytest.raises(ValueError, match="placement"):
            httpbench.measure(lambda: None, n=5, placement="elsewhere")
        c.close()
    if not _server.local_servers():  # (other tests of this process may keep theirs)
        r = httpbench.measure(lambda: None, n=50)  # no server of ours: nothing to place
        assert "placement" not in r.metadata and "wakeup_ns" not in r.metadata


@TWO
def test_async_concurrent_is_split():
    with httpbench.Server() as srv:
        async def noop():
            return None

        r = httpbench.measure_async(noop, n=64, concurrency=8)
        assert r.metadata["placement"]["mode"] == "split"
        one = httpbench.measure_async(noop, n=16, concurrency=1)
        assert one.metadata["placement"] == _machine.choose_placement(
            "auto", True, one.metadata["wakeup_ns"], CPUS)
        assert srv.running


def test_server_set_cpus_checks_its_arguments():
    with httpbench.Server() as srv:
        srv.set_cpus([CPUS[-1]])
        assert srv.cpus == [CPUS[-1]]
        with pytest.raises(ValueError):
            srv.set_cpus([max(CPUS) + 1])
        with pytest.raises(ValueError):
            srv.set_cpus([])
    with pytest.raises(RuntimeError):
        srv.set_cpus([CPUS[0]])
    assert srv.cpus is None


@pytest.mark.slow
@TWO
def test_in_process_and_process_server_agree():
    # the quickstart's pattern (an in-process Server) gives the client's figure, as a
    # server in its own process does: 10 alternating trials, medians within 1.25x
    srv, sp = httpbench.Server().start(), _server.start_process()
    try:
        ci, cp = httpbench.Client(), httpbench.Client()
        ui, up = srv.url + "/bytes/150", sp.url + "/bytes/150"
        a, b = [], []
        for _ in range(10):
            a.append(httpbench.measure(lambda: ci.get(ui), duration=0.1).cpu_ns_per_call)
            b.append(httpbench.measure(lambda: cp.get(up), duration=0.1).cpu_ns_per_call)
        ratio = statistics.median(a) / statistics.median(b)
        assert 1 / 1.25 <= ratio <= 1.25, (a, b)
    finally:
        sp.stop()
        srv.stop()
