"""The C HTTP/3 server's own HTTP/3 layer (framing and QPACK of csrc/core/h3codec) against a
peer that breaks the rules (aioquic's QUIC driven by hand): each violation of RFC 9114 /
RFC 9204 closes the connection (or resets the stream) with the error code the RFCs name,
and what is allowed (unknown stream and frame types) is ignored while requests go on."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from httpbench import Server, expected_bytes
from httpbench._features import h3_missing

pytest.importorskip("aioquic", reason="aioquic (writes the peers) is not installed")
pytestmark = pytest.mark.skipif(h3_missing() is not None, reason=str(h3_missing()))

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from _h3peer import Peer  # noqa: E402
from aioquic.quic.events import StreamDataReceived  # noqa: E402

H3_STREAM_CREATION_ERROR = 0x103
H3_FRAME_UNEXPECTED = 0x105
H3_MESSAGE_ERROR = 0x10E
H3_CLOSED_CRITICAL_STREAM = 0x104
H3_MISSING_SETTINGS = 0x10A
QPACK_DECODER_STREAM_ERROR = 0x202


@pytest.fixture(scope="module")
def srv():
    with Server(tls=True, h3=True) as s:
        yield s


def _peer(srv) -> Peer:
    p = Peer(srv.h3_port, srv.ca_file)
    assert p.handshake()
    sid = p.request("/bytes/10")  # our control stream (aioquic's SETTINGS) is in
    p.pump(5, until=lambda: sid in p.ended)
    assert p.status.get(sid) == 200
    return p


def _closed_with(p: Peer, code: int) -> None:
    p.pump(5, until=lambda: p.closed_code is not None)
    assert p.closed_code == code, hex(p.closed_code or 0)


def test_a_second_control_stream_is_a_creation_error(srv):
    p = _peer(srv)
    try:
        p.uni_stream(b"\x00\x04\x00")  # type control, an empty SETTINGS
        _closed_with(p, H3_STREAM_CREATION_ERROR)
    finally:
        p.close()


def test_data_before_headers_is_unexpected(srv):
    p = _peer(srv)
    try:
        p.raw_stream(b"\x00\x03abc")  # a DATA frame first on a request stream
        _closed_with(p, H3_FRAME_UNEXPECTED)
    finally:
        p.close()


def test_a_decoder_instruction_we_cannot_have_caused(srv):
    p = _peer(srv)
    try:
        # a second decoder stream is a creation error; on aioquic's own one, a Section
        # Acknowledgment (of stream 1) is an instruction our sections never ask for
        assert p.h3 is not None
        dec = p.h3._local_decoder_stream_id
        p.q.send_stream_data(dec, b"\x81", end_stream=False)
        _closed_with(p, QPACK_DECODER_STREAM_ERROR)
    finally:
        p.close()


def test_a_push_stream_from_a_client_is_a_creation_error(srv):
    p = _peer(srv)
    try:
        p.uni_stream(b"\x01\x00")
        _closed_with(p, H3_STREAM_CREATION_ERROR)
    finally:
        p.close()


def test_unknown_stream_and_frame_types_are_ignored(srv):
    before = srv.stats()["h3"]["errors"]
    p = _peer(srv)
    try:
        uni = p.uni_stream(b"\x21hello")  # a reserved stream type (0x1f * 0 + 0x21)
        # a reserved frame type (0x21) before HEADERS on a request stream, then GET
        sid = p.q.get_next_available_stream_id()
        p.q.send_stream_data(sid, b"\x21\x02xy", end_stream=False)
        assert p.h3 is not None
        p.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                (b":authority", b"localhost"), (b":path", b"/bytes/150")],
                          end_stream=True)
        p.pump(5, until=lambda: sid in p.ended and uni in p.stop_codes)
        assert (p.status.get(sid), p.body.get(sid)) == (200, expected_bytes(150))
        assert p.stop_codes.get(uni) == H3_STREAM_CREATION_ERROR  # asked to stop, not closed
        assert p.closed_code is None
    finally:
        p.close()
    assert srv.stats()["h3"]["errors"] == before


class _NoH3:
    """In place of the peer's HTTP/3 layer: the test writes its control stream itself;
    what arrives on each stream is kept as it came."""

    def __init__(self) -> None:
        self.data: dict[int, bytes] = {}
        self.ended: set[int] = set()

    def handle_event(self, event: object) -> list:
        if isinstance(event, StreamDataReceived):
            self.data[event.stream_id] = self.data.get(event.stream_id, b"") + event.data
            if event.end_stream:
                self.ended.add(event.stream_id)
        return []


def _bare_peer(srv) -> tuple[Peer, _NoH3]:
    p = Peer(srv.h3_port, srv.ca_file)
    raw = _NoH3()
    p.h3 = raw  # type: ignore[assignment]
    p.pump(5, until=lambda: p.q._handshake_complete)
    assert p.q._handshake_complete
    return p, raw


SETTINGS = b"\x04\x04\x01\x00\x07\x00"  # capacity 0, blocked streams 0


def test_a_reserved_frame_before_settings_is_missing_settings(srv):
    # RFC 9114 6.2.1: the control stream's first frame is SETTINGS, whatever came first
    before = srv.stats()["h3"]["errors"]
    p, _ = _bare_peer(srv)
    try:
        p.uni_stream(b"\x00" + b"\x21\x02xy" + SETTINGS)  # type control, frame 0x21, SETTINGS
        _closed_with(p, H3_MISSING_SETTINGS)
    finally:
        p.close()
    assert srv.stats()["h3"]["errors"] == before + 1


def test_reserved_frames_after_settings_are_ignored(srv):
    before = srv.stats()["h3"]["errors"]
    p, raw = _bare_peer(srv)
    try:
        p.uni_stream(b"\x00" + SETTINGS + b"\x21\x02xy" + b"\x21\x00")
        sid = p.q.get_next_available_stream_id()
        # GET /bytes/150: :method GET, :scheme https (static), :authority and :path literal
        section = b"\x00\x00\xd1\xd7\x50\x09localhost\x51\x0a/bytes/150"
        p.q.send_stream_data(sid, bytes([1, len(section)]) + section, end_stream=True)
        p.pump(5, until=lambda: sid in raw.ended)
        got = raw.data.get(sid, b"")
        assert got[:1] == b"\x01" and got.endswith(b"\x00\x40\x96" + expected_bytes(150)), got
        assert p.closed_code is None
    finally:
        p.close()
    assert srv.stats()["h3"]["errors"] == before


def test_a_malformed_head_resets_only_its_stream(srv):
    p = _peer(srv)
    try:
        assert p.h3 is not None
        sid = p.q.get_next_available_stream_id()
        p.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                (b":authority", b"localhost"), (b":path", b"/bytes/1"),
                                (b"X-Upper", b"1")], end_stream=True)
        p.pump(5, until=lambda: sid in p.reset)
        assert p.reset_codes.get(sid) == H3_MESSAGE_ERROR
        ok = p.request("/bytes/20")
        p.pump(5, until=lambda: ok in p.ended)
        assert (p.status.get(ok), p.body.get(ok)) == (200, expected_bytes(20))
        assert p.closed_code is None
    finally:
        p.close()


@pytest.mark.parametrize("name", [b"A", b"x-Upper", b"x-upperX", b"abcdefghI", b"Abcdefghi",
                                  b"abcdefghijklmnoP", b"abcdefghijklmnopQrs", b"@[`{-Z"])
def test_an_uppercase_letter_anywhere_in_a_name_is_malformed(srv, name):
    p = _peer(srv)
    try:
        assert p.h3 is not None
        sid = p.q.get_next_available_stream_id()
        p.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                (b":authority", b"localhost"), (b":path", b"/bytes/1"),
                                (name, b"1")], end_stream=True)
        p.pump(5, until=lambda: sid in p.reset)
        assert p.reset_codes.get(sid) == H3_MESSAGE_ERROR
    finally:
        p.close()


def test_lowercase_names_around_the_letters_are_accepted(srv):
    p = _peer(srv)
    try:
        assert p.h3 is not None
        sid = p.q.get_next_available_stream_id()
        p.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                (b":authority", b"localhost"), (b":path", b"/bytes/3"),
                                (b"x-@[`{", b"1"), (b"abcdefghijklmnopqrstuvwxyz", b"2"),
                                (b"x-\xc1\xda\xdb", b"3"), (b"0123456789", b"4")],
                          end_stream=True)
        p.pump(5, until=lambda: sid in p.ended)
        assert (p.status.get(sid), p.body.get(sid)) == (200, expected_bytes(3))
    finally:
        p.close()


def test_the_extension_needs_no_nghttp3():
    import httpbench._core as core

    try:
        out = subprocess.run(["readelf", "-d", core.__file__], capture_output=True, text=True,
                             timeout=60)
    except FileNotFoundError:
        pytest.skip("readelf is not installed")
    needed = [ln for ln in out.stdout.splitlines() if "(NEEDED)" in ln]
    assert any("libngtcp2" in ln for ln in needed), needed
    assert not any("nghttp3" in ln for ln in needed), needed
