"""The C HTTP/3 server's connections and streams, against libcurl (pycurl's ngtcp2 +
nghttp3) with counts exact against the server's own stats: many requests on one
connection, many connections, concurrent streams on one connection, HEAD and the
streamed routes byte-exact, fault routes as stream resets, a client that vanishes
(the idle timeout frees it), datagrams that are not QUIC (counted, dropped, no harm),
Alt-Svc on the TCP side, and stop while connections and streams are open."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
import zlib

import httpbench
import pytest
from httpbench import Server, expected_bytes
from httpbench._features import h3_missing

pycurl = pytest.importorskip("pycurl")
pytestmark = [
    pytest.mark.skipif(h3_missing() is not None, reason=str(h3_missing())),
    pytest.mark.skipif(not pycurl.version_info()[4] & pycurl.VERSION_HTTP3,
                       reason="pycurl's libcurl has no HTTP/3 here"),
]


@pytest.fixture
def srv():
    with Server(tls=True, h3=True, request_timeout=5.0) as s:
        yield s


def _curl(srv, path: str = "/bytes/150", **opts):
    c = pycurl.Curl()
    c.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_3ONLY)
    c.setopt(pycurl.CAINFO, srv.ca_file)
    c.setopt(pycurl.TIMEOUT_MS, 10000)
    c.setopt(pycurl.URL, srv.h3_url + path)
    for k, v in opts.items():
        c.setopt(getattr(pycurl, k), v)
    return c


def _get(c, path: str | None = None, url: str | None = None) -> tuple[int, bytes]:
    if url is not None:
        c.setopt(pycurl.URL, url)
    buf = io.BytesIO()
    c.setopt(pycurl.WRITEDATA, buf)
    c.perform()
    assert c.getinfo(pycurl.INFO_HTTP_VERSION) == pycurl.CURL_HTTP_VERSION_3
    return c.getinfo(pycurl.RESPONSE_CODE), buf.getvalue()


def _wait(srv, pred, timeout: float = 10.0) -> dict:
    end = time.monotonic() + timeout
    while True:
        st = srv.stats()
        if pred(st) or time.monotonic() > end:
            return st
        time.sleep(0.02)


def _invariants(st: dict) -> None:
    assert st["requests"] == sum(st["by_route"].values()) == sum(st["by_status"].values())
    assert st["requests"] == sum(st["by_protocol"].values())


def test_urls_and_alt_svc(srv):
    assert srv.h3_port == srv.port and srv.h3_url == srv.url
    assert Server(tls=True).h3_url is None
    heads: list[bytes] = []
    for version, proto in ((pycurl.CURL_HTTP_VERSION_1_1, "http/1.1"),
                           (pycurl.CURL_HTTP_VERSION_2TLS, "h2")):
        c = pycurl.Curl()  # one each: libcurl would reuse the first connection
        c.setopt(pycurl.CAINFO, srv.ca_file)
        c.setopt(pycurl.URL, srv.url + "/bytes/10")
        heads.clear()
        c.setopt(pycurl.HTTP_VERSION, version)
        c.setopt(pycurl.HEADERFUNCTION, heads.append)
        c.setopt(pycurl.WRITEDATA, io.BytesIO())
        c.perform()
        alt = [h for h in heads if h.lower().startswith(b"alt-svc:")]
        assert alt == [f'alt-svc: h3=":{srv.port}"\r\n'.encode()] or \
            alt == [f'Alt-Svc: h3=":{srv.port}"\r\n'.encode()], (proto, heads)
        c.close()
    st = srv.stats()
    if httpbench.features()["http2-server"]:
        assert st["by_protocol"] == {"http/1.1": 1, "h2": 1, "h3": 0}
    else:  # ALPN offers only http/1.1: the h2 request is served over HTTP/1.1
        assert st["by_protocol"] == {"http/1.1": 2, "h2": 0, "h3": 0}


def test_alt_svc_off_serves_h3_without_advertising_it():
    with Server(tls=True, h3=True, alt_svc=False) as s:
        heads: list[bytes] = []
        c = pycurl.Curl()
        c.setopt(pycurl.CAINFO, s.ca_file)
        c.setopt(pycurl.URL, s.url + "/bytes/10")
        c.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
        c.setopt(pycurl.HEADERFUNCTION, heads.append)
        c.setopt(pycurl.WRITEDATA, io.BytesIO())
        c.perform()
        c.close()
        assert heads and not [h for h in heads if h.lower().startswith(b"alt-svc:")], heads
        h3 = _curl(s, "/bytes/10")
        assert _get(h3) == (200, expected_bytes(10))
        assert s.stats()["by_protocol"] == {"http/1.1": 1, "h2": 0, "h3": 1}


def test_many_requests_on_one_connection(srv):
    c = _curl(srv, "/bytes/1000")
    for _ in range(200):
        assert _get(c) == (200, expected_bytes(1000))
    st = srv.stats()
    assert st["by_protocol"]["h3"] == st["h3"]["streams"] == 200
    assert st["connections_by_protocol"]["h3"] == st["h3"]["handshakes"] == 1
    assert st["by_route"]["bytes"] == st["by_status"][200] == 200
    assert st["h3"]["errors"] == st["h3"]["dropped"] == st["h3"]["handshake_errors"] == 0
    assert st["connections_accepted"] == 0  # the TCP counters stay TCP's
    _invariants(st)
    c.close()  # libcurl says CONNECTION_CLOSE: the server drains, then frees
    st = _wait(srv, lambda s: s["h3"]["connections_closed"] == 1)
    assert st["h3"]["connections_closed"] == 1 and st["h3"]["idle_timeouts"] == 0


def test_a_request_ack_rides_in_its_response(srv):
    # sequential GETs: one datagram out per request whatever the timing, the request's ACK
    # inside the response (delayed by RTT/8, it went alone whenever the server was slower)
    c = _curl(srv)
    for _ in range(20):  # the handshake and its stragglers
        assert _get(c) == (200, expected_bytes(150))
    before = srv.stats()["h3"]
    for _ in range(200):
        assert _get(c) == (200, expected_bytes(150))
    after = srv.stats()["h3"]
    assert after["streams"] - before["streams"] == 200
    assert 200 <= after["packets_out"] - before["packets_out"] <= 210
    c.close()


def test_many_connections_over_two_workers():
    """Twelve connections on a two-worker server: SO_REUSEPORT spreads the clients'
    datagrams over the workers' UDP sockets by address, each worker's endpoint
    keeps its own connections; every request answered, every count exact."""
    with Server(tls=True, h3=True, threads=2) as srv:
        handles = [_curl(srv, f"/bytes/{100 + i}") for i in range(12)]
        for i, c in enumerate(handles):
            for _ in range(2):
                assert _get(c) == (200, expected_bytes(100 + i))
        st = srv.stats()
        assert st["connections_by_protocol"]["h3"] == st["h3"]["handshakes"] == 12
        assert st["by_protocol"]["h3"] == 24 and st["h3"]["dropped"] == 0
        _invariants(st)
        for c in handles:
            c.close()
        st = _wait(srv, lambda s: s["h3"]["connections_closed"] == 12)
        assert st["h3"]["connections_closed"] == 12


def test_concurrent_streams_on_one_connection(srv):
    """Eight transfers multiplexed on one QUIC connection (libcurl waits to multiplex),
    each a /delay so they are open at once; all byte-exact, one connection."""
    m = pycurl.CurlMulti()
    m.setopt(pycurl.M_PIPELINING, pycurl.PIPE_MULTIPLEX)
    bufs, handles = [], []
    for i in range(8):
        c = _curl(srv, f"/delay/300?bytes={1000 + i}", PIPEWAIT=1)
        b = io.BytesIO()
        c.setopt(pycurl.WRITEDATA, b)
        m.add_handle(c)
        handles.append(c)
        bufs.append(b)
    end = time.monotonic() + 20
    peak = 0
    while time.monotonic() < end:
        _, active = m.perform()
        st = srv.stats()
        # streams counted but not answered yet: open at the same time on the server
        peak = max(peak, st["h3"]["streams"] - st["by_status"].get(200, 0))
        if active == 0:
            break
        m.select(0.05)
    for i, c in enumerate(handles):
        assert c.getinfo(pycurl.RESPONSE_CODE) == 200
        assert bufs[i].getvalue() == expected_bytes(1000 + i)
        m.remove_handle(c)
        c.close()
    st = srv.stats()
    assert st["connections_by_protocol"]["h3"] == 1
    assert st["by_route"]["delay"] == st["by_protocol"]["h3"] == 8
    assert peak > 1  # they overlapped on the one connection
    _invariants(st)


def test_head_and_streamed_routes_byte_exact(srv):
    c = _curl(srv)
    heads: list[bytes] = []
    c.setopt(pycurl.HEADERFUNCTION, heads.append)
    c.setopt(pycurl.NOBODY, 1)
    assert _get(c, url=srv.h3_url + "/bytes/100") == (200, b"")
    assert b"content-length: 100\r\n" in heads
    c.setopt(pycurl.NOBODY, 0)
    c.setopt(pycurl.HTTPGET, 1)
    assert _get(c, url=srv.h3_url + "/chunked/70000?chunk=1000") == (200, expected_bytes(70000))
    assert _get(c, url=srv.h3_url + "/drip/10?interval_ms=5&chunk=3") == (200, expected_bytes(10))
    assert _get(c, url=srv.h3_url + "/fault/stall/50?bytes=3000") == (200, expected_bytes(3000))
    assert _get(c, url=srv.h3_url + "/bytes/7000000")[1] == expected_bytes(7_000_000)
    c.setopt(pycurl.POSTFIELDS, b"x" * 5000)
    assert _get(c, url=srv.h3_url + "/fault/early-response?status=413") == \
        (413, b"early response\n")
    code, doc = _get(c, url=srv.h3_url + "/sink")
    want = {"bytes": 5000, "crc32": f"{zlib.crc32(b'x' * 5000):08x}"}
    assert (code, json.loads(doc)) == (200, want)
    st = srv.stats()
    assert st["by_protocol"]["h3"] == 7 and st["connections_by_protocol"]["h3"] == 1
    # the early response asked the client to stop sending its body (STOP_SENDING):
    # whatever of it had arrived is counted, the sink's all of it
    assert 5000 <= st["body_bytes_in"] <= 10000
    _invariants(st)


def test_fault_routes_reset_the_stream(srv):
    c = _curl(srv, "/fault/reset")
    with pytest.raises(pycurl.error):
        _get(c)
    st = srv.stats()
    assert st["by_status"][0] == 1 and st["by_route"]["reset"] == 1
    assert st["h3"]["streams_reset_sent"] == 1
    c2 = _curl(srv, "/fault/close-mid-body?bytes=4000")
    with pytest.raises(pycurl.error):
        _get(c2)
    st = _wait(srv, lambda s: s["h3"]["streams_reset_sent"] == 2)
    assert st["h3"]["streams_reset_sent"] == 2
    assert st["by_status"][200] == 1  # its head went out before the reset
    assert _get(c2, url=srv.h3_url + "/bytes/5") == (200, b"01234")  # the connection lives on
    _invariants(srv.stats())


def test_a_client_that_vanishes_is_freed_by_the_idle_timeout():
    """A client killed without a CONNECTION_CLOSE: its connection goes once the idle
    timeout (keepalive_timeout) passes, counted as such."""
    with Server(tls=True, h3=True, keepalive_timeout=0.5) as s:
        code = (
            "import io, os, pycurl\n"
            "c = pycurl.Curl()\n"
            "c.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_3ONLY)\n"
            f"c.setopt(pycurl.CAINFO, {s.ca_file!r})\n"
            f"c.setopt(pycurl.URL, {s.h3_url + '/bytes/10'!r})\n"
            "c.setopt(pycurl.WRITEDATA, io.BytesIO())\n"
            "c.perform()\n"
            "os._exit(0)\n"  # no cleanup: the connection is never closed
        )
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
        st = s.stats()
        assert st["connections_by_protocol"]["h3"] == 1 and st["by_protocol"]["h3"] == 1
        st = _wait(s, lambda x: x["h3"]["connections_closed"] == 1)
        assert st["h3"]["idle_timeouts"] == st["h3"]["connections_closed"] == 1
        assert st["h3"]["errors"] == 0


def test_datagrams_that_are_not_quic_are_counted_and_dropped(srv):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(5)
    to = ("127.0.0.1", srv.port)
    junk = [b"", b"\x00", b"GET / HTTP/1.1\r\n\r\n", bytes([0x41]) + os.urandom(1199),
            bytes([0xC0, 0, 0, 0, 1, 3, 1, 2, 3, 0]) + bytes(1190)]  # Initial, DCID too short
    for d in junk:
        u.sendto(d, to)
    st = _wait(srv, lambda s: s["h3"]["packets_in"] == len(junk))
    assert st["h3"]["packets_in"] == st["h3"]["dropped"] == len(junk)
    assert st["connections_by_protocol"]["h3"] == 0 and st["requests"] == 0
    # an unknown QUIC version: a Version Negotiation packet back, offering v1
    u.sendto(bytes([0xC0, 0x1A, 0x2A, 0x3A, 0x4A, 8]) + b"ABCDEFGH" + bytes([2]) + b"xy"
             + bytes(1183), to)
    vn, _ = u.recvfrom(2048)
    assert vn[0] & 0x80 and vn[1:5] == bytes(4)
    assert vn[5:] == bytes([2]) + b"xy" + bytes([8]) + b"ABCDEFGH" + bytes([0, 0, 0, 1])
    u.close()
    assert srv.stats()["h3"]["version_negotiations"] == 1
    c = _curl(srv)  # and the endpoint serves as before
    assert _get(c) == (200, expected_bytes(150))
    st = srv.stats()
    assert st["h3"]["dropped"] == len(junk) and st["by_protocol"]["h3"] == 1
    c.close()


def test_stop_with_connections_and_streams_open():
    s = Server(tls=True, h3=True).start()
    idle = [_curl(s) for _ in range(3)]
    for c in idle:
        assert _get(c) == (200, expected_bytes(150))
    m = pycurl.CurlMulti()
    slow = _curl(s, "/delay/30000")
    slow.setopt(pycurl.WRITEDATA, io.BytesIO())
    m.add_handle(slow)
    end = time.monotonic() + 10
    while s.stats()["by_route"]["delay"] == 0 and time.monotonic() < end:
        m.perform()
        m.select(0.02)
    assert s.stats()["by_route"]["delay"] == 1
    s.stop()  # CONNECTION_CLOSE to all four, then everything is freed
    st = s.stats()
    assert st["connections_by_protocol"]["h3"] == st["h3"]["connections_closed"] == 4
    assert st["by_status"][0] == 1 and st["client_gone"] == 0  # the server ended it
    assert st["by_protocol"]["h3"] == 4
    _invariants(st)
    end = time.monotonic() + 10
    while time.monotonic() < end:  # the in-flight transfer ends with an error, not a hang
        _, active = m.perform()
        if active == 0:
            break
        m.select(0.05)
    assert slow.getinfo(pycurl.RESPONSE_CODE) != 200
    m.remove_handle(slow)
    for c in [*idle, slow]:
        c.close()


def test_features_say_http3():
    assert httpbench.features()["http3-server"] is True


@pytest.mark.parametrize("resumption", [True, False])
def test_session_resumption(resumption):
    """libcurl's second and third connections resume the first one's TLS session from the
    ticket the server sent (a full handshake each without session_resumption)."""
    with Server(tls=True, h3=True, session_resumption=resumption) as s:
        c = _curl(s, "/bytes/5", FRESH_CONNECT=1)
        for _ in range(3):
            assert _get(c) == (200, b"01234")
        c.close()
        st = s.stats()
        assert st["connections_by_protocol"]["h3"] == st["h3"]["handshakes"] == 3
        assert st["h3"]["resumed"] == (2 if resumption else 0)


def test_a_request_whose_body_never_comes_gets_408():
    """An upload that stalls after its head: after request_timeout the stream is answered
    408 (the client is asked to stop sending); the connection stays usable."""
    with Server(tls=True, h3=True, request_timeout=0.3) as s:
        c = _curl(s, "/sink", POST=1, POSTFIELDSIZE=1000)
        c.setopt(pycurl.READFUNCTION, lambda n: pycurl.READFUNC_PAUSE)
        body = io.BytesIO()
        c.setopt(pycurl.WRITEDATA, body)
        m = pycurl.CurlMulti()
        m.add_handle(c)
        end = time.monotonic() + 10
        while time.monotonic() < end and s.stats()["by_status"].get(408, 0) == 0:
            m.perform()
            m.select(0.05)
        st = s.stats()
        assert st["by_route"]["sink"] == 1 and st["by_status"] == {408: 1}
        assert st["by_protocol"]["h3"] == 1
        m.remove_handle(c)
        c.close()


def test_parallel_downloads_on_two_connections(srv):
    """Two 3 MB downloads at once, each on its own connection (one worker writes both,
    taking turns): both byte-exact."""
    m = pycurl.CurlMulti()
    m.setopt(pycurl.M_PIPELINING, 0)
    hs, bufs = [], []
    for i in range(2):
        c = _curl(srv, f"/bytes/{3_000_000 + i}", FRESH_CONNECT=1, FORBID_REUSE=1)
        b = io.BytesIO()
        c.setopt(pycurl.WRITEDATA, b)
        m.add_handle(c)
        hs.append(c)
        bufs.append(b)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        _, active = m.perform()
        if active == 0:
            break
        m.select(0.05)
    for i, c in enumerate(hs):
        assert c.getinfo(pycurl.RESPONSE_CODE) == 200
        assert bufs[i].getvalue() == expected_bytes(3_000_000 + i)
        m.remove_handle(c)
        c.close()
    st = srv.stats()
    assert st["connections_by_protocol"]["h3"] == 2 and st["by_protocol"]["h3"] == 2


def test_an_ephemeral_port_taken_on_udp_is_retried(monkeypatch):
    """port=0: the kernel picks the TCP port; if that number is taken on UDP the start
    is retried on another one (a given port fails at once)."""
    from httpbench import _server

    real, calls = _server._core.server_start, []

    def flaky(**kw):
        calls.append(kw["port"])
        if len(calls) == 1:
            raise OSError(98, "bind UDP 127.0.0.1:1234 (for HTTP/3): Address already in use")
        return real(**kw)

    monkeypatch.setattr(_server._core, "server_start", flaky)
    with Server(tls=True, h3=True) as s:
        assert calls == [0, 0] and s.h3_port == s.port
    calls.clear()
    with pytest.raises(OSError, match="Address already in use"):
        Server(tls=True, h3=True, port=1234).start()
    assert calls == [1234]


def test_a_udp_port_shared_by_reuseport_is_refused():
    """Another socket with SO_REUSEPORT on the port's UDP number would silently take half
    the datagrams: the start fails with EADDRINUSE instead (explicit port and port 0)."""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    port = tcp.getsockname()[1]
    tcp.close()  # a free TCP port number; its UDP twin is held below
    holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    holder.bind(("127.0.0.1", port))
    try:
        for threads in (1, 2):
            with pytest.raises(OSError, match="bind UDP .* Address already in use") as ei:
                Server(tls=True, h3=True, port=port, threads=threads).start()
            assert ei.value.errno == 98
        holder.settimeout(0.2)  # and nothing the server did reached the holder
        with pytest.raises(TimeoutError):
            holder.recv(2048)
        with Server(tls=True, port=port) as s:  # TCP alone is unaffected
            assert s.port == port
    finally:
        holder.close()


def _varint(b: bytes, i: int) -> tuple[int, int]:
    n = 1 << (b[i] >> 6)
    v = b[i] & 0x3F
    for k in range(1, n):
        v = (v << 8) | b[i + k]
    return v, i + n


@pytest.mark.skipif(__import__("importlib").util.find_spec("aioquic") is None,
                    reason="aioquic (the raw QUIC client) is not installed")
def test_stop_sends_goaway_before_connection_close():
    """On stop the server's control stream says GOAWAY with the first request stream it
    did not process (after requests on streams 0 and 4: 8), then the connection closes
    with H3_NO_ERROR."""
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived
    from aioquic.quic import events
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.connection import QuicConnection

    s = Server(tls=True, h3=True).start()
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    cfg.load_verify_locations(s.ca_file)
    q = QuicConnection(configuration=cfg)
    addr = ("127.0.0.1", s.h3_port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(0.02)
    h3 = H3Connection(q)
    uni: dict[int, bytes] = {}  # the server's unidirectional streams, raw
    done: dict[int, bool] = {}
    closed: list = []
    shaken: list = []
    q.connect(addr, now=time.monotonic())

    def pump(until, timeout: float = 10.0) -> None:
        end = time.monotonic() + timeout
        while not until() and time.monotonic() < end:
            for data, to in q.datagrams_to_send(now=time.monotonic()):
                sock.sendto(data, to)
            try:
                q.receive_datagram(sock.recv(65536), addr, now=time.monotonic())
            except TimeoutError:
                t = q.get_timer()
                if t is not None and t <= time.monotonic():
                    q.handle_timer(now=time.monotonic())
            while (ev := q.next_event()) is not None:
                if isinstance(ev, events.StreamDataReceived) and ev.stream_id % 4 == 3:
                    uni[ev.stream_id] = uni.get(ev.stream_id, b"") + ev.data
                if isinstance(ev, events.HandshakeCompleted):
                    shaken.append(ev)
                if isinstance(ev, events.ConnectionTerminated):
                    closed.append(ev.error_code)
                for h in h3.handle_event(ev):
                    if isinstance(h, DataReceived) and h.stream_ended:
                        done[h.stream_id] = True

    try:
        pump(lambda: bool(shaken))
        for sid in (q.get_next_available_stream_id(), q.get_next_available_stream_id() + 4):
            h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                  (b":authority", b"localhost"), (b":path", b"/bytes/10")],
                            end_stream=True)
            pump(lambda sid=sid: done.get(sid))
            assert done.get(sid)
    finally:
        s.stop()
    pump(lambda: bool(closed))
    sock.close()
    assert closed == [0x100]  # H3_NO_ERROR
    ctrl = next(v for v in uni.values() if v[:1] == b"\x00")
    i, goaways = 1, []
    while i < len(ctrl):
        ftype, i = _varint(ctrl, i)
        flen, i = _varint(ctrl, i)
        if ftype == 0x07:
            goaways.append(_varint(ctrl, i)[0])
        i += flen
    assert goaways == [8]
    st = s.stats()
    assert st["by_protocol"]["h3"] == 2 and st["h3"]["connections_closed"] == 1
