"""The HTTP/3 server against hostile peers (aioquic's QUIC driven by hand, 127.0.0.1):
each probe bounded in count and time, each asserting a bound on what the server
spends (bytes, memory, stream slots, the share a good client keeps) and the
counter in ``stats()["h3"]`` that shows it."""

from __future__ import annotations

import os
import sys
import threading
import time

import httpbench
import pytest
from httpbench import Server, expected_bytes
from httpbench._features import h3_missing

pytest.importorskip("aioquic", reason="aioquic (writes the hostile peers) is not installed")
pytestmark = pytest.mark.skipif(h3_missing() is not None, reason=str(h3_missing()))

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from _h3peer import Peer, drain, initials, new_socket, rss_kib  # noqa: E402


def _wait(srv, pred, timeout: float) -> dict:
    end = time.monotonic() + timeout
    while True:
        st = srv.stats()
        if pred(st) or time.monotonic() > end:
            return st
        time.sleep(0.05)


def test_peer_helper_gets_an_answer():
    with Server(tls=True, h3=True) as srv:
        p = Peer(srv.h3_port, srv.ca_file)
        try:
            assert p.handshake()
            sid = p.request("/bytes/150")
            p.pump(5, until=lambda: sid in p.ended)
            assert (p.status.get(sid), p.body.get(sid)) == (200, expected_bytes(150))
        finally:
            p.close()


# ---- unvalidated Initials ----

def _flood(port: int, pkts: list[bytes], seconds: float) -> None:
    socks = [new_socket() for _ in range(64)]  # many source ports
    try:
        t0 = time.monotonic()
        for i, d in enumerate(pkts):
            socks[i % len(socks)].sendto(d, ("127.0.0.1", port))
            if i % 50 == 49:
                lag = t0 + (i + 1) * seconds / len(pkts) - time.monotonic()
                if lag > 0:
                    time.sleep(lag)
    finally:
        for s in socks:
            s.close()


@pytest.mark.slow
def test_initial_flood_answered_with_retry_good_client_keeps_its_rate():
    from httpbench._server import start_process

    # a fixed placement (server on one CPU, the good client and the flood on another):
    # left to the scheduler, the two rates can be measured on different placements,
    # whose own rates differ up to 3x on a 2-vCPU VM
    cpus = sorted(os.sched_getaffinity(0))
    mine = set(cpus)
    server_cpu = cpus[0] if len(cpus) >= 2 else None
    if server_cpu is not None:
        os.sched_setaffinity(0, {cpus[1]})
    try:
        with start_process(tls=True, h3=True, cpu=server_cpu) as srv:
            pkts = initials(3000, srv.h3_port)
            url = srv.h3_url + "/bytes/150"
            httpbench.bench(url, duration=0.5, http3=True, ca_file=srv.ca_file)  # warm
            rss0 = rss_kib(srv.pid)
            solo = httpbench.bench(url, duration=2.0, http3=True, ca_file=srv.ca_file)
            th = threading.Thread(target=_flood, args=(srv.h3_port, pkts, 2.0))
            th.start()
            during = httpbench.bench(url, duration=2.0, http3=True, ca_file=srv.ca_file)
            th.join()
            st = _wait(srv, lambda s: s["h3"]["half_open"] == 0, 15.0)
            time.sleep(0.3)
            rss1 = rss_kib(srv.pid)
            h3 = st["h3"]
    finally:
        os.sched_setaffinity(0, mine)
    assert during.errors == 0, during.errors
    # the flood is answered statelessly: Retry packets, few connections
    assert h3["retries"] >= 2000, h3
    assert h3["half_open"] == 0
    assert during.rps >= 0.5 * solo.rps, (solo.rps, during.rps, h3)
    assert rss1 <= rss0 * 1.10 + 1024, (rss0, rss1, h3)
    print(f"flood: solo {solo.rps:.0f} req/s, during {during.rps:.0f} req/s; RSS {rss0} -> "
          f"{rss1} KiB; retries {h3['retries']}, connections {st['connections_by_protocol']}")


def test_fake_initials_counted_as_dropped():
    with Server(tls=True, h3=True) as srv:
        real = initials(100, srv.h3_port)
        fake = [d[:60] + os.urandom(len(d) - 60) for d in real]  # header kept, payload random
        s = new_socket()
        try:
            for d in fake:
                s.sendto(d, ("127.0.0.1", srv.h3_port))
                time.sleep(0.001)
        finally:
            s.close()
        st = _wait(srv, lambda st: st["h3"]["packets_in"] >= 100, 5.0)
        time.sleep(0.2)
        st = srv.stats()
    h3 = st["h3"]
    assert h3["packets_in"] == 100
    assert h3["dropped"] == 100, h3
    assert st["connections_by_protocol"]["h3"] == 0, st["connections_by_protocol"]
    assert h3["errors"] == 0 and h3["half_open"] == 0, h3


# ---- streams pinning memory ----

def test_a_partial_headers_frame_times_out_and_the_slot_comes_back():
    """1 byte of a HEADERS frame on every stream the server allows, from a client that
    ignores STOP_SENDING: each times out from its first byte, is reset, and MAX_STREAMS
    gives the slots back so new requests on the same connection are answered."""
    with Server(tls=True, h3=True, request_timeout=0.5, h2_max_concurrent_streams=4) as srv:
        p = Peer(srv.h3_port, srv.ca_file, ignore_stop_sending=True)
        try:
            assert p.handshake()
            stuck = [p.raw_stream(b"\x01") for _ in range(4)]
            p.pump(4.0, until=lambda: all(s in p.reset or s in p.ended for s in stuck)
                   and srv.stats()["h3"]["stream_timeouts"] >= 4)
            st = srv.stats()
            assert st["h3"]["stream_timeouts"] == 4, st["h3"]
            sids = [p.request("/bytes/100") for _ in range(4)]
            p.pump(6.0, until=lambda: all(s in p.ended for s in sids))
            assert [p.status.get(s) for s in sids] == [200] * 4, (p.status, st["h3"])
        finally:
            p.close()


def test_echo_uploads_bounded_per_connection():
    """Unfinished /echo uploads on one connection: the server holds back flow-control
    credit for what it buffers, so the connection's buffered bodies stay bounded."""
    from httpbench._server import start_process

    with start_process(tls=True, h3=True) as srv:
        p = Peer(srv.h3_port, srv.ca_file)
        try:
            assert p.handshake()
            rss0 = rss_kib(srv.pid)
            chunk = b"x" * (2 << 20)
            for _ in range(20):  # 40 MiB offered
                p.request("/echo", method="POST", body=chunk, end=False)
            last = [-1]

            def settled() -> bool:
                b = srv.stats()["h3"]["body_buffered"]
                done = b == last[0]
                last[0] = b
                return done and b > 0

            p.pump(12.0, until=settled)
            h3 = srv.stats()["h3"]
            rss1 = rss_kib(srv.pid)
        finally:
            p.close()
    assert 0 < h3["body_buffered"] <= 16 << 20, h3
    assert rss1 - rss0 <= 24 << 10, (rss0, rss1, h3)


# ---- closing state ----

def test_closing_state_answers_the_source_and_is_rate_limited():
    """A handshake from V fails (no h3 in ALPN); then 2,000 short datagrams naming its
    connection come from A. V gets no more than 3x what it sent; A gets a few
    CONNECTION_CLOSEs, never more than 3x its bytes."""
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.connection import QuicConnection

    with Server(tls=True, h3=True) as srv:
        v, a = new_socket(), new_socket()
        try:
            q = QuicConnection(configuration=QuicConfiguration(
                is_client=True, alpn_protocols=["h9"], server_name="localhost",
                connection_id_length=18))
            q.connect(("127.0.0.1", srv.h3_port), now=time.monotonic())
            sent_v = 0
            for d, _ in q.datagrams_to_send(now=time.monotonic()):
                v.sendto(d, ("127.0.0.1", srv.h3_port))
                sent_v += len(d)
            n_v0, b_v0 = drain(v, 0.5)
            odcid = q.original_destination_connection_id
            sent_a = 0
            for i in range(2000):
                d = bytes([0x40 | (os.urandom(1)[0] & 0x3F)]) + odcid + os.urandom(4)
                a.sendto(d, ("127.0.0.1", srv.h3_port))
                sent_a += len(d)
                if i % 100 == 99:
                    time.sleep(0.002)  # not past the socket buffers
            n_v1, b_v1 = drain(v, 0.5)
            n_a, b_a = drain(a, 0.1)
            h3 = srv.stats()["h3"]
        finally:
            v.close()
            a.close()
    assert n_v0 >= 1  # the CONNECTION_CLOSE for the failed handshake
    assert b_v0 + b_v1 <= 3 * sent_v, (b_v0, b_v1, sent_v)
    assert b_a <= 3 * sent_a and n_a <= 16, (n_a, b_a, sent_a)  # 1st, 2nd, 4th, ... only
    assert h3["closes_limited"] >= 1000, h3


# ---- 0-RTT across workers ----

def test_0rtt_replay_refused_by_every_worker():
    """A 0-RTT flight replayed from new source ports lands on either worker (SO_REUSEPORT
    hashes the ports): the request runs once, the replays are refused early data."""
    with Server(tls=True, h3=True, threads=2) as srv:
        first = Peer(srv.h3_port, srv.ca_file)
        try:
            assert first.handshake()
            sid = first.request("/bytes/10")
            first.pump(5, until=lambda: sid in first.ended and first.tickets)
            assert first.tickets
        finally:
            first.close()
        p = Peer(srv.h3_port, srv.ca_file, ticket=first.tickets[-1])
        try:
            from aioquic.h3.connection import H3Connection
            p.h3 = H3Connection(p.q)
            sid = p.request("/status/299")
            flight = p.outgoing()
            p.send(flight)
            p.pump(5, until=lambda: sid in p.ended)
            assert p.status.get(sid) == 299 and p.q.tls.early_data_accepted
        finally:
            p.close()
        socks = [new_socket() for _ in range(12)]
        try:
            for s in socks:
                for d in flight:
                    s.sendto(d, ("127.0.0.1", srv.h3_port))
            time.sleep(1.0)
        finally:
            for s in socks:
                s.close()
        st = srv.stats()
    assert st["by_status"].get(299) == 1, (st["by_status"], st["h3"]["early_data"])
    assert st["h3"]["early_replays"] >= 1, st["h3"]


# ---- connection churn ----


def test_connection_id_table_follows_live_connections_not_history():
    """2 x 3,000 connections of one request each, 4 at a time: the connection-ID table
    is rebuilt without its tombstones instead of doubling, so its size follows the
    connections alive (draining ones included), not how many there ever were (the
    old table reached ~64 k slots here, and every free scanned it whole)."""
    with Server(tls=True, h3=True) as srv:
        slots = [srv.stats()["h3"]["cid_slots"]]
        for _ in range(2):
            r = httpbench.bench(srv.h3_url + "/bytes/10", n=3000, concurrency=4,
                                keepalive=False, http3=True, ca_file=srv.ca_file)
            assert r.errors == 0 and r.responses == 3000
            slots.append(srv.stats()["h3"]["cid_slots"])
        st = _wait(srv, lambda s: s["h3"]["connections_closed"] >= 6000, 10.0)
    assert st["connections_by_protocol"]["h3"] == 6000
    assert slots[0] == 64 and slots[2] <= 4096 and slots[2] <= 2 * slots[1], slots


def test_nat_rebinding_is_followed():
    """The client's source port changes mid-connection: the server validates the new
    path and answers there (RFC 9000 9.3), where it kept answering the old port."""
    with Server(tls=True, h3=True) as srv:
        p = Peer(srv.h3_port, srv.ca_file)
        try:
            assert p.handshake()
            sid = p.request("/bytes/100")
            p.pump(5, until=lambda: sid in p.ended)
            assert p.status.get(sid) == 200
            p.rebind()
            sid = p.request("/bytes/200")
            p.pump(5, until=lambda: sid in p.ended)
            assert (p.status.get(sid), p.body.get(sid)) == (200, expected_bytes(200))
        finally:
            p.close()


def test_memory_of_closed_connections_goes_back():
    """100 connections opened and left idle, then closed: the server's RSS comes back
    to within 10 % of where it started (freed memory is handed back to the system
    once the endpoint is empty, not kept in malloc's free lists)."""
    from httpbench._server import start_process

    with start_process(tls=True, h3=True) as srv:
        warm = Peer(srv.h3_port, srv.ca_file)
        assert warm.handshake()
        warm.close()
        _wait(srv, lambda s: s["h3"]["connections_closed"] >= 1, 5.0)
        rss0 = rss_kib(srv.pid)
        peers = []
        try:
            for _ in range(100):
                p = Peer(srv.h3_port, srv.ca_file)
                peers.append(p)
                assert p.handshake()
                sid = p.request("/bytes/10")
                p.pump(3, until=lambda p=p, sid=sid: sid in p.ended)
            rss1 = rss_kib(srv.pid)
        finally:
            for p in peers:
                p.close()
        st = _wait(srv, lambda s: s["h3"]["connections_closed"] >= 101, 10.0)
        time.sleep(0.3)
        rss2 = rss_kib(srv.pid)
    assert st["h3"]["connections_closed"] == 101
    assert rss1 > rss0 and rss2 <= rss0 * 1.10, (rss0, rss1, rss2)
