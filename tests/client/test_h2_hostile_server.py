"""The HTTP/2 client (native Client and the load generator) against servers
that flood it: its read loop returns to its timers after a budget, so a
request timeout or a run's duration ends on time whatever the server sends;
floods that would make it work forever hit limits and are typed errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpbench
import pytest
from _h2raw import CONTINUATION, HEADERS, SETTINGS, frame, settings
from _raw import Conn, RawServer
from httpbench import Client, ProtocolError

pytestmark = pytest.mark.own_server

STATUS_103 = b"\x08\x03103"  # HPACK: :status (static index 8) literal "103"
STATUS_200 = b"\x88"


def _read_preface(c: Conn) -> None:
    c.sock.settimeout(5)
    while len(c.buf) < 24 + 9:
        if not c._fill():
            return


def flood(kind: str, stop_after: float = 30.0):
    """A handler that answers the client's preface with SETTINGS and then
    floods the connection with one kind of frame until the client leaves."""

    def handler(c: Conn) -> None:
        _read_preface(c)
        c.send(settings(max_concurrent_streams=100))
        if kind == "unknown":  # frames of an unknown type: ignored, one after another
            chunk = frame(0xFA, 0, 0, b"x" * 8) * 4096
        elif kind == "continuation":  # a header block that never ends
            c.send(frame(HEADERS, 0, 1, STATUS_200))
            chunk = frame(CONTINUATION, 0, 1) * 4096
        elif kind == "1xx":  # 103 Early Hints, again and again, on stream 1
            chunk = frame(HEADERS, 0x4, 1, STATUS_103) * 4096
        elif kind == "settings":  # SETTINGS, never reading the ACKs
            chunk = frame(SETTINGS, 0, 0) * 4096
        else:
            raise AssertionError(kind)
        end = time.monotonic() + stop_after
        while not c.server.stopping and time.monotonic() < end:
            c.sock.sendall(chunk)

    return handler


def test_timeout_fires_on_time_under_a_frame_flood():
    with RawServer(flood("unknown")) as srv, Client(http2=True, timeout=2) as c:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            c.get(srv.url("/x"))
        took = time.monotonic() - t0
    assert 1.9 <= took < 2.5, took


@pytest.mark.parametrize("kind,match", [
    ("continuation", "over 128 CONTINUATION frames.*ENHANCE_YOUR_CALM"),
    ("1xx", r"protocol \(ENHANCE_YOUR_CALM\)"),
    ("settings", r"SETTINGS flood; sent GOAWAY\(ENHANCE_YOUR_CALM\)"),
])
def test_floods_hit_limits_as_protocol_errors(kind, match):
    with RawServer(flood(kind)) as srv, Client(http2=True, timeout=20) as c:
        t0 = time.monotonic()
        with pytest.raises(ProtocolError, match=match):
            c.get_many([srv.url("/x")])
        took = time.monotonic() - t0
    assert took < 10, took


def _cli(url: str, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "httpbench", url, *args], capture_output=True,
                       timeout=60)
    return p, time.monotonic() - t0


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["unknown", "1xx", "continuation"])
def test_cli_duration_ends_on_time_under_a_flood(kind, server):
    # the control: the same command against a well-behaved server (start-up,
    # the 3 s run, the report), run just before and just after (the machine is
    # shared: the slower of the two). Without the embedded h2 server the control runs the
    # same 3 s over HTTP/1.1: what it times is start-up, the run and the report.
    proto = ("--h2",) if httpbench.features()["http2-server"] else ()
    ctl = (server.url + "/bytes/10", *proto, "-d", "3s", "--timeout", "2s")
    p0, control = _cli(*ctl)
    with RawServer(flood(kind)) as srv:
        p, took = _cli(srv.url("/x"), "--h2", "-d", "3s", "--timeout", "2s")
    p1, after = _cli(*ctl)
    assert p0.returncode == 0 and p1.returncode == 0, (p0.stderr, p1.stderr)
    control = max(control, after)
    assert p.returncode in (0, 1), p.stderr  # never a crash
    assert b"Traceback" not in p.stderr, p.stderr
    assert took < control + 0.5, (took, control, p.stdout[-300:], p.stderr[-300:])


# The generator in a process of its own at nice 19: it prints how long the
# engine's 3 s run took. Python's start-up and the result's metadata (uname
# and friends) take seconds of their own at nice 19 on a busy machine, so the
# engine call is what is timed.
TIMED_RUN = (
    "import sys, time, httpbench\n"
    "from httpbench import _core\n"
    "run, spans = _core.run_bench, []\n"
    "def timed(**kw):\n"
    "    t = time.monotonic()\n"
    "    try:\n"
    "        return run(**kw)\n"
    "    finally:\n"
    "        spans.append(time.monotonic() - t)\n"
    "_core.run_bench = timed\n"
    "r = httpbench.bench(sys.argv[1], duration=3, http2=True, timeout=2)\n"
    "print(spans[0], r.errors)\n"
)


@pytest.mark.slow
def test_duration_ends_on_time_short_of_cpu():
    """The generator at nice 19 beside a busy loop still ends a flooded 3 s run on time."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with RawServer(flood("unknown")) as srv:
            p = subprocess.run(["nice", "-n", "19", sys.executable, "-c", TIMED_RUN, srv.url("/x")],
                               capture_output=True, timeout=120)
    finally:
        busy.kill()
        busy.wait()
    assert p.returncode == 0, p.stderr
    took, errors = p.stdout.split()
    assert float(took) < 3.5, took
    assert int(errors) >= 1  # its requests timed out (2 s) meanwhile


def test_bench_timeout_under_a_frame_flood_counts_timeouts():
    with RawServer(flood("unknown")) as srv:
        t0 = time.monotonic()
        r = httpbench.bench(srv.url("/x"), n=4, concurrency=2, http2=True, timeout=1)
        took = time.monotonic() - t0
    assert r.responses == 0
    assert r.errors == 4 and r.error_counts.get("timeout") == 4, r.error_counts
    # two connections, two rounds of one-second timeouts
    assert took < 2 * 1 + 1.5, took


@pytest.mark.h2_server
@pytest.mark.skipif(os.cpu_count() is None, reason="no CPU count")
def test_read_budget_keeps_well_behaved_downloads_whole(server):
    """The budget only pauses reading: large bodies arrive whole, byte-exact."""
    with Client(http2=True) as c:
        rs = c.get_many([f"{server.url}/bytes/{n}" for n in (3_000_000, 1, 700_000)])
    assert [r.body for r in rs] == [httpbench.expected_bytes(n) for n in (3_000_000, 1, 700_000)]


def no_streams(c: Conn) -> None:
    """Allows no streams and answers nothing (the client's first stream went
    out before these SETTINGS)."""
    _read_preface(c)
    c.send(settings(max_concurrent_streams=0))
    while not c.server.stopping and c._fill():
        pass


def test_a_server_allowing_no_streams_ends_the_run():
    with RawServer(no_streams) as srv:
        t0 = time.monotonic()
        with pytest.raises(ProtocolError, match="allows no streams"):
            httpbench.bench(srv.url("/x"), n=40, concurrency=2, http2=True, timeout=1)
        took = time.monotonic() - t0
    assert took < 2 * 1, took  # not n x timeout / c (20 s)


@pytest.mark.slow
def test_cli_against_a_server_allowing_no_streams_exits_1():
    with RawServer(no_streams) as srv:
        p = subprocess.run([sys.executable, "-m", "httpbench", srv.url("/x"), "--h2", "-n", "40",
                            "-c", "2", "--timeout", "2s"], capture_output=True, timeout=60)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert b"allows no streams" in p.stderr
