"""A run that gets no response ends soon and says why: a refused or unreachable target
stops after the first second without a connection; timeouts and a server that accepts
but never answers exit 1 with a message naming what happened."""

from __future__ import annotations

import socket
import threading
import time

import httpbench
import pytest
from httpbench._bench import cli_main
from httpbench._loadgen import NO_CONNECTION_S


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nobody listens there now
    return port


class _Silent:
    """A listener that accepts every connection and never answers (bounded: closes all
    at exit)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.conns.append(c)

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.t.join(5)
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.mark.parametrize("limit", [["-n", "1000"], []])  # without -n: a 10 s run by default
def test_refused_port_stops_within_a_second_and_a_half(limit, capsys):
    port = _free_port()
    t0 = time.monotonic()
    rc = cli_main([f"http://127.0.0.1:{port}/", *limit, "-c", "16"])
    took = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert rc == 1
    # The stop fires after 1 s (the message below proves it was that stop); the bound
    # leaves room for a loaded CI machine and still fails the old 7.2 s / 10 s runs.
    assert took <= 2.5, took
    assert f"(STOPPED: no connection in the first {NO_CONNECTION_S:g} s)" in out
    # a refused connect carried no request: counted as a failed connection, not a request
    assert "Complete requests:      0 (no request sent)" in out
    assert "Failed requests:        0\n" in out and "Failed connections:     " in out
    assert "Time per request:       – (no response)" in out
    assert "µs/request" in out and ", – µs/request" in out
    assert f"no connection to 127.0.0.1:{port} in the first 1 s (connection refused; " in err


def test_refused_bench_result_is_stopped_not_interrupted():
    r = httpbench.bench(f"http://127.0.0.1:{_free_port()}/", duration=5, concurrency=4)
    assert r.metadata["gave_up_s"] == NO_CONNECTION_S
    assert not r.interrupted and r.responses == 0 and r.connections == 0
    assert r.connect_attempts == r.connect_failures > 0
    assert r.duration_ns < 2.5e9  # stopped at ~1 s, not after the 5 s duration


def test_a_run_that_connects_is_never_stopped_early(server):
    r = httpbench.bench(server.url + "/delay/1200", n=2, concurrency=2, timeout=5)
    assert r.successes == 2 and "gave_up_s" not in r.metadata  # slow answers are answers


def test_silent_server_duration_run_exits_1_naming_it(capsys):
    with _Silent() as srv:
        rc = cli_main([f"http://127.0.0.1:{srv.port}/", "-d", "1s", "-c", "4"])
    out, err = capsys.readouterr()
    assert rc == 1
    assert ("no response in 1.0 s: 4 connection(s) opened, 4 request(s) still unanswered "
            "at the end (the server accepts but does not answer") in err
    assert "Time per request:       – (no response)" in out


def test_every_request_timing_out_is_named_no_answer(capsys):
    with _Silent() as srv:
        rc = cli_main([f"http://127.0.0.1:{srv.port}/", "-n", "4", "-c", "2",
                       "--timeout", "300ms"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "no answer: every request timed out (timeout: 4)" in err


def test_unreachable_target_stops_within_a_second_and_a_half(capsys):
    """A listener whose accept queue is full drops every SYN: connects neither succeed
    nor fail, as with a firewalled or absent host."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = srv.getsockname()[1]
    fill = []
    try:
        for _ in range(4):  # fill the accept queue (never accepted)
            c = socket.socket()
            c.setblocking(False)
            try:
                c.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            fill.append(c)
        time.sleep(0.2)
        t0 = time.monotonic()
        rc = cli_main([f"http://127.0.0.1:{port}/", "-n", "100", "-c", "4", "--timeout", "5s"])
        took = time.monotonic() - t0
    finally:
        for c in fill:
            c.close()
        srv.close()
    err = capsys.readouterr().err
    assert rc == 1 and took <= 2.5, took  # the 1 s stop, with room for a loaded machine (5 s before)
    assert (f"no connection to 127.0.0.1:{port} in the first 1 s (no answer to the connection "
            "attempts; ") in err
