"""Hostile HTTP/2 input with hand-built frames: each case gets the RFC 9113
answer (RST_STREAM or GOAWAY with the right error code), is counted in the
server's h2 stats, and the server keeps serving other connections."""

from __future__ import annotations

import socket
import ssl

import httpbench
import pytest
from _h2raw import (
    ACK,
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    ENHANCE_YOUR_CALM,
    FLOW_CONTROL_ERROR,
    FRAME_SIZE_ERROR,
    GOAWAY,
    HEADERS,
    PREFACE,
    PROTOCOL_ERROR,
    REFUSED_STREAM,
    RST_STREAM,
    SETTINGS,
    STREAM_CLOSED,
    H2Conn,
    data,
    frame,
    headers,
    hpack_indexed,
    hpack_literal,
    request_block,
    settings,
    window_update,
)
from httpbench import expected_bytes

pytestmark = pytest.mark.own_server


@pytest.fixture(scope="module")
def srv():
    with httpbench.Server(h2_max_concurrent_streams=2, h2_initial_window_size=100) as s:
        yield s


def _h2(s: httpbench.Server) -> dict:
    return {k: v for k, v in s.stats()["h2"].items() if k != "settings"}


def _diff(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def _ready(s: httpbench.Server) -> H2Conn:
    """A connection whose SETTINGS exchange is done (the limits are in force)."""
    c = H2Conn(s.port)
    c.read_until(lambda f: f.type == SETTINGS and f.flags & ACK)
    return c


def _still_serving(s: httpbench.Server) -> None:
    with _ready(s) as c:
        c.send(headers(1, request_block("/bytes/50")))
        frames, body = c.stream_body(1)
        assert body == expected_bytes(50)


def _goaway(frames) -> int:
    g = [f for f in frames if f.type == GOAWAY]
    assert len(g) == 1, frames
    return g[0].error_code


CONNECTION_ERRORS = [
    ("settings_bad_length", frame(SETTINGS, 0, 0, b"12345"), FRAME_SIZE_ERROR),
    ("data_on_stream_0", frame(DATA, 0, 0, b"x"), PROTOCOL_ERROR),
    ("even_stream_id", headers(2, request_block("/")), PROTOCOL_ERROR),
    ("stream_id_reuse", headers(1, request_block("/")) + headers(1, request_block("/")),
     STREAM_CLOSED),
    ("connection_window_overflow", window_update(0, 2**31 - 1), FLOW_CONTROL_ERROR),
    ("bad_hpack", headers(1, b"\xff\xff\xff\xff\xff"), 9),  # COMPRESSION_ERROR
    ("continuation_without_headers", frame(CONTINUATION, END_HEADERS, 1, request_block("/")),
     PROTOCOL_ERROR),
    ("streams_beyond_settings",
     b"".join(headers(i, request_block("/delay/2000")) for i in (1, 3, 5)), PROTOCOL_ERROR),
    ("hpack_bomb", headers(1, request_block("/") + hpack_literal(b"x-big", b"a" * 4000, True)
                           + hpack_indexed(62) * 80), ENHANCE_YOUR_CALM),
]


@pytest.mark.h2_server
@pytest.mark.parametrize("payload, code", [c[1:] for c in CONNECTION_ERRORS],
                         ids=[c[0] for c in CONNECTION_ERRORS])
def test_connection_errors_goaway(srv, payload, code):
    before = _h2(srv)
    with _ready(srv) as c:
        c.send(payload)
        frames = c.read_all()  # the server closes after its GOAWAY
    assert _goaway(frames) == code
    d = _diff(before, _h2(srv))
    assert d.get("goaway_sent") == 1 and d.get("protocol_errors") == 1, d
    _still_serving(srv)


@pytest.mark.h2_server
def test_stream_window_overflow_resets_the_stream(srv):
    before = _h2(srv)
    with _ready(srv) as c:
        c.send(headers(1, request_block("/delay/2000")) + window_update(1, 2**31 - 1))
        frames = c.read_until(lambda f: f.type in (RST_STREAM, GOAWAY))
        assert frames[-1].type == RST_STREAM and frames[-1].stream == 1
        assert frames[-1].error_code == FLOW_CONTROL_ERROR
        # the connection lives on
        c.send(headers(3, request_block("/bytes/7")))
        assert c.stream_body(3)[1] == expected_bytes(7)
    d = _diff(before, _h2(srv))
    assert d == {"streams": 2, "streams_reset_sent": 1, "protocol_errors": 1}, d


@pytest.mark.h2_server
def test_data_beyond_the_stream_window(srv):
    before = _h2(srv)
    with _ready(srv) as c:  # the server's initial window is 100 bytes
        c.send(headers(1, request_block("/sink", "POST"), end_stream=False)
               + data(1, b"x" * 200, True))
        frames = c.read_until(lambda f: f.type in (RST_STREAM, GOAWAY))
        assert (frames[-1].type, frames[-1].error_code) == (RST_STREAM, FLOW_CONTROL_ERROR)
    d = _diff(before, _h2(srv))
    assert d["streams_reset_sent"] == 1 and d["protocol_errors"] == 1, d


@pytest.mark.h2_server
def test_header_list_over_the_limit_gets_431(srv):
    before, sbefore = _h2(srv), srv.stats()
    with _ready(srv) as c:  # 4 x 4 KiB decoded > max_head (16 KiB): a small HPACK bomb
        c.send(headers(1, request_block("/") + hpack_literal(b"x-big", b"a" * 4000, True)
                       + hpack_indexed(62) * 4))
        frames, body = c.stream_body(1)
        assert body == b"request head too large\n"
        c.send(headers(3, request_block("/bytes/9")))
        assert c.stream_body(3)[1] == expected_bytes(9)
    after = srv.stats()
    assert after["by_status"].get(431, 0) - sbefore["by_status"].get(431, 0) == 1
    assert after["by_route"]["bad_request"] - sbefore["by_route"]["bad_request"] == 1
    assert _diff(before, _h2(srv)) == {"streams": 2}


@pytest.mark.h2_server
def test_missing_pseudo_header_resets_the_stream(srv):
    before = _h2(srv)
    with _ready(srv) as c:
        c.send(headers(1, hpack_literal(b":method", b"GET") + hpack_literal(b":scheme", b"http")))
        frames = c.read_until(lambda f: f.type in (RST_STREAM, GOAWAY))
        assert (frames[-1].type, frames[-1].error_code) == (RST_STREAM, PROTOCOL_ERROR)
    assert _diff(before, _h2(srv)) == {"streams": 1, "streams_reset_sent": 1,
                                       "protocol_errors": 1}


@pytest.mark.h2_server
def test_streams_before_settings_ack_are_refused(srv):
    before = _h2(srv)
    with H2Conn(srv.port, preface=False) as c:
        # no wait for the server's SETTINGS: the third stream is refused, not a connection error
        c.send(PREFACE + settings() + b"".join(headers(i, request_block("/bytes/3"))
                                               for i in (1, 3, 5)))
        frames = c.read_until(lambda f: f.type in (RST_STREAM, GOAWAY))
        assert (frames[-1].type, frames[-1].stream, frames[-1].error_code) == (
            RST_STREAM, 5, REFUSED_STREAM)
    d = _diff(before, _h2(srv))
    assert d["refused_streams"] == 1 and d["streams_reset_sent"] == 1, d


@pytest.mark.h2_server
def test_client_reset_counts_client_gone(srv):
    before, sbefore = _h2(srv), srv.stats()
    with _ready(srv) as c:
        c.send(headers(1, request_block("/delay/3000")))
        c.send(frame(RST_STREAM, 0, 1, (8).to_bytes(4, "big")))  # CANCEL
        c.send(headers(3, request_block("/bytes/4")))
        assert c.stream_body(3)[1] == expected_bytes(4)
    after = srv.stats()
    assert after["client_gone"] - sbefore["client_gone"] == 1
    assert after["by_status"].get(0, 0) - sbefore["by_status"].get(0, 0) == 1
    assert _diff(before, _h2(srv)) == {"streams": 2, "streams_reset_received": 1}


@pytest.mark.h2_server
def test_wrong_preface_over_tls_alpn_h2():
    with httpbench.Server(tls=True) as s:
        raw = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        ctx = ssl.create_default_context(cafile=s.ca_file)
        ctx.set_alpn_protocols(["h2"])
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as t:
            assert t.selected_alpn_protocol() == "h2"
            t.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while True:
                try:
                    chunk = t.recv(65536)
                except (ConnectionResetError, ssl.SSLError):
                    break
                if not chunk:
                    break
                got += chunk
        st = s.stats()
        assert st["h2"]["protocol_errors"] == 1
        assert st["connections_by_protocol"] == {"http/1.1": 0, "h2": 1}
        assert st["requests"] == 0
        assert b"HTTP/1.1" not in got


@pytest.mark.h2_server
def test_partial_preface_waits_then_h2(srv):
    with H2Conn(srv.port, preface=False) as c:
        c.send(PREFACE[:10])
        c.sock.settimeout(0.2)
        with pytest.raises(socket.timeout):
            c.sock.recv(1)  # undecided: nothing is answered yet
        c.send(PREFACE[10:] + settings() + headers(1, request_block("/bytes/5")))
        assert c.stream_body(1)[1] == expected_bytes(5)


def test_preface_lookalike_is_http11(srv):
    before = srv.stats()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sk:
        sk.sendall(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n")
        assert sk.recv(200).startswith(b"HTTP/1.1 400 ")
    after = srv.stats()
    assert after["connections_by_protocol"]["http/1.1"] - \
        before["connections_by_protocol"]["http/1.1"] == 1
    assert after["by_protocol"]["http/1.1"] - before["by_protocol"]["http/1.1"] == 1


@pytest.mark.h2_server
def test_server_frames_are_well_formed(srv):
    # the HEADERS + DATA of one response, END_STREAM on the last DATA
    with _ready(srv) as c:
        c.send(headers(1, request_block("/bytes/60")))
        frames, body = c.stream_body(1)
    mine = [f for f in frames if f.stream == 1]
    assert mine[0].type == HEADERS and mine[0].flags & END_HEADERS
    assert mine[-1].type == DATA and mine[-1].flags & END_STREAM
    assert body == expected_bytes(60)


@pytest.mark.h2_server
def test_stalled_request_times_out():
    # a request whose body never comes: after request_timeout the connection is closed
    # and the stream, counted under its route, ends with status 0
    with httpbench.Server(request_timeout=0.3) as s:
        with H2Conn(s.port) as c:
            c.read_until(lambda f: f.type == SETTINGS and f.flags & ACK)
            c.send(headers(1, request_block("/sink", "POST"), end_stream=False))
            frames = c.read_all()
            assert c.closed
            assert not [f for f in frames if f.stream == 1]
        st = s.stats()
        assert st["by_route"]["sink"] == 1 and st["by_status"] == {0: 1}
