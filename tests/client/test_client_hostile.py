"""httpbench.Client against peers that are not (or not quite) speaking HTTP:
banners and junk fail at once, huge Content-Lengths reserve nothing,
max_body, bare-LF responses strict and lenient, Transfer-Encoding framing."""

from __future__ import annotations

import os
import resource
import socket
import threading
import time
from collections.abc import Callable

import httpbench
import pytest
from httpbench import BodyTooLarge, Client, HttpbenchError, ProtocolError, RemoteClosed

HB_PE_BAD_VERSION = -5001
HB_PE_BAD_TRANSFER_ENCODING = -5014
HB_PE_BAD_LINE_ENDING = -5015


class Peer:
    """One-connection-at-a-time scripted server: handler(sock) per accepted
    connection; `sent` records perf_counter() just before the handler's
    first send (set by the handler through mark())."""

    def __init__(self, handler: Callable[[Peer, socket.socket], None]) -> None:
        self.handler = handler
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.done = threading.Event()
        self.sent = 0.0
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def mark(self) -> None:
        self.sent = time.perf_counter()

    def _accept(self) -> None:
        while not self.done.is_set():
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            self.conns.append(s)
            threading.Thread(target=self._run, args=(s,), daemon=True).start()

    def _run(self, s: socket.socket) -> None:
        try:
            self.handler(self, s)
        except OSError:
            pass
        finally:
            try:
                s.close()
            except OSError:
                pass

    def hold(self) -> None:
        """Keep the connection open (silent) until the test ends."""
        self.done.wait(30)

    def close(self) -> None:
        self.done.set()
        self.lsock.close()
        for s in self.conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_request(s: socket.socket) -> bool:
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return False
        buf += d
    return True


def answer(*payloads: bytes, close: bool = False) -> Callable[[Peer, socket.socket], None]:
    """Answer every request with the payloads (sent separately); close: then hang up."""

    def handler(peer: Peer, s: socket.socket) -> None:
        while read_request(s):
            for p in payloads:
                s.sendall(p)
            if close:
                return

    return handler


def run_bounded(fn: Callable[[], object], limit: float = 10.0) -> BaseException | object:
    """fn() in a thread with a join timeout, so a regression cannot hang the suite."""
    box: list[object] = []

    def target() -> None:
        try:
            box.append(fn())
        except BaseException as e:  # handed to the test
            box.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(limit)
    assert not t.is_alive(), f"request still waiting after {limit} s"
    return box[0]


def maxrss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# ------------------------------------------------------------------ not HTTP at all

BANNERS = {
    "ssh": b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n",
    "smtp": b"220 mail.example.com ESMTP Postfix\r\n",
    "binary": bytes(range(256)),
    "one-byte": b"\x16",
    "tls-alert": b"\x15\x03\x01\x00\x02\x02\x46",
}


@pytest.mark.parametrize("name", list(BANNERS))
def test_banner_on_connect_fails_at_once_without_timeout(name):
    payload = BANNERS[name]

    def handler(peer: Peer, s: socket.socket) -> None:
        peer.mark()
        s.sendall(payload)
        peer.hold()

    with Peer(handler) as peer, Client(timeout=None) as c:
        err = run_bounded(lambda: c.get(peer.url()))
        took = time.perf_counter() - peer.sent
    assert isinstance(err, ProtocolError), err
    assert err.code == HB_PE_BAD_VERSION
    assert "it starts" in str(err)
    # The design bound is 1 ms after the bytes arrive; a shared CI machine
    # gets slack, a client waiting for the deadline would take forever.
    assert took < 1.0


def test_banner_after_the_request_fails_at_once():
    """A server that reads the request, then answers with junk, byte by byte."""

    def handler(peer: Peer, s: socket.socket) -> None:
        read_request(s)
        peer.mark()
        s.sendall(b"S")
        time.sleep(0.3)
        s.sendall(b"SH-2.0-x\r\n")
        peer.hold()

    with Peer(handler) as peer, Client(timeout=None) as c:
        err = run_bounded(lambda: c.get(peer.url()))
        took = time.perf_counter() - peer.sent
    assert isinstance(err, ProtocolError), err
    assert took < 0.3  # failed on the first byte, not after the rest


def test_junk_after_a_valid_status_line_fails_at_the_line_end():
    def handler(peer: Peer, s: socket.socket) -> None:
        read_request(s)
        s.sendall(b"HTTP/1.1 200 OK\r\nX-A: 1\r\n\x00\x01\x02\r\n")
        peer.hold()

    with Peer(handler) as peer, Client(timeout=None) as c:
        err = run_bounded(lambda: c.get(peer.url()))
    assert isinstance(err, ProtocolError), err


def test_client_still_works_after_a_banner():
    with Peer(lambda p, s: (s.sendall(BANNERS["ssh"]), p.hold())) as bad:
        with Peer(answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) as good:
            with Client(timeout=5) as c:
                with pytest.raises(ProtocolError):
                    c.get(bad.url())
                assert c.get(good.url()).body == b"ok"


# ------------------------------------------------------------------ huge Content-Length


@pytest.mark.parametrize("length", [10**12, 15 * 10**9])
def test_huge_content_length_is_body_too_large(length):
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % length
    with Peer(answer(head, b"abc")) as peer, Client(timeout=5) as c:
        before = maxrss_kib()
        with pytest.raises(BodyTooLarge) as ei:
            c.get(peer.url())
        assert maxrss_kib() - before < 32 * 1024
    assert isinstance(ei.value, HttpbenchError)
    assert str(length) in str(ei.value)
    assert "max_body" in str(ei.value)


@pytest.mark.parametrize("length", [10**12, 15 * 10**9])
def test_huge_content_length_without_limit_grows_with_the_bytes(length):
    """No max_body: the body grows with what arrives (8 MiB, then the peer
    hangs up), never to the claimed size; the truncation is RemoteClosed."""
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % length
    data = os.urandom(1 << 20) * 8
    with Peer(answer(head, data, close=True)) as peer, Client(timeout=10, max_body=None) as c:
        before = maxrss_kib()
        with pytest.raises(RemoteClosed) as ei:
            c.get(peer.url())
        grew = maxrss_kib() - before
    assert f"8388608 of {length}" in str(ei.value)
    assert grew < 64 * 1024, f"RSS grew by {grew} KiB"


# ------------------------------------------------------------------ max_body


def length_body(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def chunked_body(body: bytes, size: int = 4000) -> bytes:
    out = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"]
    for i in range(0, len(body), size):
        out.append(b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]))
    out.append(b"0\r\n\r\n")
    return b"".join(out)


def close_body(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body


FRAMINGS = {"length": length_body, "chunked": chunked_body, "close": close_body}


@pytest.mark.parametrize("framing", list(FRAMINGS))
@pytest.mark.parametrize("size", [1000, 3 * 1024 * 1024 + 7])
def test_body_at_and_over_max_body(framing, size):
    body = os.urandom(size)
    resp = FRAMINGS[framing](body)
    with Peer(answer(resp, close=framing == "close")) as peer:
        with Client(timeout=10, max_body=size) as c:
            r = c.get(peer.url())  # exactly at the limit: accepted, byte-exact
            assert r.body == body and r.size == size
            with pytest.raises(BodyTooLarge):
                c.get(peer.url(), max_body=size - 1)
            assert c.get(peer.url(), max_body=size + 1).body == body
        with Client(timeout=10, max_body=size - 1) as c:
            with pytest.raises(BodyTooLarge):
                c.get(peer.url())
            assert c.get(peer.url(), max_body=None).body == body
            assert c.request("GET", peer.url(), max_body=size).body == body


def test_connection_after_body_too_large_is_not_reused():
    with Peer(answer(length_body(b"x" * 100))) as peer, Client(timeout=5, max_body=10) as c:
        with pytest.raises(BodyTooLarge):
            c.get(peer.url())
        r = c.get(peer.url(), max_body=100)
        assert r.body == b"x" * 100 and not r.reused
        assert c.pool_stats()["connects"] == 2


def test_download_has_no_limit_unless_given(tmp_path):
    body = os.urandom(5000)
    path = tmp_path / "out.bin"
    with Peer(answer(length_body(body))) as peer, Client(timeout=5, max_body=10) as c:
        r = c.download(peer.url(), path)
        assert r.size == 5000 and path.read_bytes() == body
        with pytest.raises(BodyTooLarge):
            c.download(peer.url(), path, max_body=4999)
        assert not path.exists()


def test_max_body_option():
    assert Client().max_body == 1 << 30
    assert Client(max_body=None).max_body is None
    assert Client(max_body=5).max_body == 5
    assert Client(max_body=1 << 70).max_body == (1 << 64) - 1
    for bad in (0, -1, -(1 << 70)):
        with pytest.raises(ValueError):
            Client(max_body=bad)
    for bad in ("1", 1.5, True):
        with pytest.raises(TypeError):
            Client(max_body=bad)
    with Client() as c, pytest.raises(ValueError):
        c.get("http://127.0.0.1:9/", max_body=0)


# ------------------------------------------------------------------ bare LF, lenient

BARE_LF = b"HTTP/1.1 200 OK\nX-A: 1\nTransfer-Encoding: chunked\n\n5\nhello\n0\n\n"


def test_bare_lf_response_rejected_by_default():
    with Peer(answer(BARE_LF)) as peer, Client(timeout=5) as c:
        assert c.lenient is False
        with pytest.raises(ProtocolError) as ei:
            c.get(peer.url())
    assert ei.value.code == HB_PE_BAD_LINE_ENDING


def test_bare_lf_response_lenient_counts_what_it_tolerated():
    with Peer(answer(BARE_LF)) as peer, Client(timeout=5, lenient=True) as c:
        assert c.lenient is True
        r = c.get(peer.url())
        assert r.status == 200 and r.body == b"hello"
        assert r.tolerated == 4 + 4  # head: 4 line ends; chunks: size, data, last, end
        # The stored head is re-parsed on access with the same leniency.
        assert r.headers["x-a"] == "1"
        assert r.headers.get_all("transfer-encoding") == ["chunked"]
        r2 = c.get(peer.url())
        assert r2.reused and r2.body == b"hello"


def test_lenient_client_on_a_clean_response_tolerates_nothing():
    with Peer(answer(chunked_body(b"abc"))) as peer, Client(timeout=5, lenient=True) as c:
        r = c.get(peer.url())
        assert r.body == b"abc" and r.tolerated == 0
    with Peer(answer(length_body(b"abc"))) as peer, Client(timeout=5) as c:
        assert c.get(peer.url()).tolerated == 0


def test_lenient_still_rejects_a_bare_cr():
    resp = b"HTTP/1.1 200 OK\rX-A: 1\r\n\r\n"
    with Peer(answer(resp)) as peer, Client(timeout=5, lenient=True) as c:
        with pytest.raises(ProtocolError):
            c.get(peer.url())


# ------------------------------------------------------------------ Transfer-Encoding


@pytest.mark.parametrize("te", [b"gzip", b"chunked, gzip", b"x-custom;a=b"])
def test_transfer_coding_not_ending_in_chunked_reads_until_close(te):
    """RFC 9112 6.3 (4): legal for a response, the body runs to the close."""
    resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: %s\r\n\r\nraw bytes" % te
    with Peer(answer(resp, close=True)) as peer, Client(timeout=5) as c:
        r = c.get(peer.url())
    assert r.body == b"raw bytes"


def test_chunked_last_coding_is_decoded():
    resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    with Peer(answer(resp)) as peer, Client(timeout=5) as c:
        assert c.get(peer.url()).body == b"abc"


@pytest.mark.parametrize("te", [b"chunked x", b"chunked;q=1", b"chunked, chunked", b"gzip;"])
def test_malformed_transfer_encoding_is_protocol_error(te):
    resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: %s\r\n\r\n3\r\nabc\r\n0\r\n\r\n" % te
    with Peer(answer(resp, close=True)) as peer, Client(timeout=5) as c:
        with pytest.raises(ProtocolError) as ei:
            c.get(peer.url())
    assert ei.value.code == HB_PE_BAD_TRANSFER_ENCODING


def test_every_failure_is_an_httpbench_error():
    assert issubclass(BodyTooLarge, HttpbenchError)
    assert not issubclass(BodyTooLarge, ProtocolError)
    assert httpbench.BodyTooLarge is BodyTooLarge


# ------------------------------------------------------------------ the load generator


def test_bench_lenient_option():
    """bench() reads the same bare-LF responses: protocol errors when strict,
    complete responses when lenient."""
    with Peer(answer(BARE_LF)) as peer:
        strict = httpbench.bench(peer.url(), n=5, timeout=5)
        lenient = httpbench.bench(peer.url(), n=5, timeout=5, lenient=True)
    assert strict.error_counts["protocol"] == 5 and strict.responses == 0
    assert lenient.error_counts["protocol"] == 0
    assert lenient.status_counts == {200: 5}


def test_101_without_upgrade_is_a_protocol_error():
    """RFC 9110 15.2.2: a 101 names the protocol it switches to; one that does not
    (and was never asked for) is not taken as the final response."""
    from _raw import RawServer, responder
    with RawServer(responder(b"HTTP/1.1 101 Switching Protocols\r\n\r\n")) as srv, \
            httpbench.Client(timeout=5) as c:
        with pytest.raises(httpbench.ProtocolError, match="101 Switching Protocols without Upgrade"):
            c.get(srv.url("/x"))


def test_endless_1xx_responses_are_a_protocol_error():
    from _raw import RawServer, responder
    flood = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" * 1000
    with RawServer(responder(flood + b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")) as srv, \
            httpbench.Client(timeout=5) as c:
        with pytest.raises(httpbench.ProtocolError, match="more than 16 1xx responses"):
            c.get(srv.url("/x"))
