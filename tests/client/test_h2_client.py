"""The native Client over HTTP/2: byte-exact bodies, exact counts against the server's
per-protocol stats, one connection per origin, TLS verified by default, and a typed
error (never a silent HTTP/1.1) when the server does not speak h2."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
import zlib

import httpbench
import pytest
from _raw import RawServer, ok, responder
from httpbench import Client, HTTP2NotSupported, ProtocolError, TLSError

pytestmark = pytest.mark.own_server

SIZES = [1, 150, 16_384, 16_385, 70_000, 1_000_000]


def _h2(stats: dict) -> tuple[int, int, int]:
    """(h2 requests, HTTP/1.1 requests, h2 connections) from the server's stats."""
    return (stats["by_protocol"]["h2"], stats["by_protocol"]["http/1.1"],
            stats["connections_by_protocol"]["h2"])


def _delta(before: tuple[int, ...], after: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(a - b for a, b in zip(after, before, strict=True))


@pytest.mark.h2_server
@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2"])
def test_get_many_byte_exact_counted_one_connection(server, tls_server, tls):
    srv = tls_server if tls else server
    urls = [f"{srv.url}/bytes/{n}" for n in SIZES]
    with Client(http2=True, ca_file=srv.ca_file if tls else None) as c:
        assert c.http2
        s0 = _h2(srv.stats())
        rs = c.get_many(urls)
        s1 = _h2(srv.stats())
        again = c.get_many(urls[:3])
        s2 = _h2(srv.stats())
    assert [r.status for r in rs] == [200] * len(SIZES)
    for r, n, u in zip(rs, SIZES, urls, strict=True):
        assert r.body == httpbench.expected_bytes(n) and r.size == n and r.url == u
        assert r.http_version == "HTTP/2" and r.reason == ""
        assert r.headers["content-length"] == str(n)
    assert _delta(s0, s1) == (len(SIZES), 0, 1)  # all multiplexed on one new connection
    assert _delta(s1, s2) == (3, 0, 0)  # the next batch reuses it
    assert all(r.reused for r in again) and not any(r.reused for r in rs)


@pytest.mark.h2_server
def test_bodies_without_content_length_and_batches_of_changing_size(server):
    """Bodies of unknown length are built from their first DATA frame and grown; batches
    of different sizes in a row reuse the client's buffers without mixing responses."""
    unknown = [0, 1, 1023, 1024, 1025, 70_000, 200_000]
    with Client(http2=True) as c:
        rs = c.get_many([f"{server.url}/chunked/{n}" for n in unknown])
        for r, n in zip(rs, unknown, strict=True):
            assert r.status == 200 and "content-length" not in r.headers
            assert r.body == httpbench.expected_bytes(n) and r.size == n
        for sizes in ([5, 70_000, 3], list(range(1, 41)), [900, 0], [17] * 20, [2, 1]):
            rs = c.get_many([f"{server.url}/bytes/{n}" for n in sizes])
            assert [r.headers["content-length"] for r in rs] == [str(n) for n in sizes]
            assert [r.body for r in rs] == [httpbench.expected_bytes(n) for n in sizes]


@pytest.mark.h2_server
def test_single_requests_post_status_and_download(server, tmp_path):
    with Client(http2=True) as c:
        s0 = _h2(server.stats())
        body = bytes(range(256)) * 1000
        r = c.request("POST", server.url + "/sink", body=body)
        assert r.status == 200 and r.http_version == "HTTP/2"
        assert r.body == (b'{"bytes": %d, "crc32": "%08x"}' % (len(body), zlib.crc32(body)))
        assert c.get(server.url + "/status/418").status == 418
        assert c.head(server.url + "/bytes/5000").body == b""
        path = tmp_path / "dl.bin"
        d = c.download(server.url + "/bytes/3000000", path)
        assert d.size == 3_000_000 and d.body == b""
        assert path.read_bytes() == httpbench.expected_bytes(3_000_000)
        assert c.get_many([]) == []
        s1 = _h2(server.stats())
    assert _delta(s0, s1) == (4, 0, 1)


@pytest.mark.h2_server
def test_threads_share_the_origin_session(server):
    """Several threads, one Client: every batch is right and one connection serves all."""
    url = server.url + "/bytes/150"
    want = httpbench.expected_bytes(150)
    bad: list[object] = []
    with Client(http2=True) as c:
        c.get(url)  # the session exists before the threads start
        s0 = _h2(server.stats())

        def work() -> None:
            for _ in range(5):
                rs = c.get_many([url] * 8)
                if [r.body for r in rs] != [want] * 8:
                    bad.append(rs)

        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        s1 = _h2(server.stats())
    assert not bad
    assert _delta(s0, s1) == (4 * 5 * 8, 0, 0)


def test_tls_verified_by_default(tls_server):
    with Client(http2=True) as c, pytest.raises(TLSError):
        c.get(tls_server.url + "/bytes/10")


def test_server_without_h2_is_a_typed_error_h2c():
    with RawServer(responder(ok(b"x"))) as srv, Client(http2=True) as c:
        with pytest.raises(HTTP2NotSupported) as ei:
            c.get(srv.url("/x"))
    assert isinstance(ei.value, ProtocolError) and "prior knowledge" in str(ei.value)
    # the h2c preface was all it got: no request was retried over HTTP/1.1 (the
    # preface's second line may be lost to the client's close: it is not read)
    heads = [h for h, _ in srv.requests]
    assert heads[0] == b"PRI * HTTP/2.0\r\n\r\n" and heads[1:] in ([], [b"SM\r\n\r\n"])


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl CLI needed")
def test_server_without_h2_is_a_typed_error_alpn(tmp_path):
    cert, key = str(tmp_path / "c.pem"), str(tmp_path / "k.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key,
                    "-out", cert], check=True, capture_output=True, timeout=30)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])
    with RawServer(responder(ok(b"x")), ssl_context=ctx) as srv, \
            Client(http2=True, ca_file=cert) as c:
        with pytest.raises(HTTP2NotSupported, match="ALPN selected 'http/1.1'"):
            c.get(srv.url("/x"))
        assert srv.requests == []  # nothing was sent over HTTP/1.1


@pytest.mark.h2_server
def test_bad_input(server):
    with pytest.raises(ValueError, match="lenient"):
        Client(http2=True, lenient=True)
    c = Client(http2=True)
    with pytest.raises(httpbench.BodyTooLarge):
        c.get(server.url + "/bytes/1000", max_body=10)
    # the stream failed alone: the session goes on
    assert c.get(server.url + "/bytes/1000").body == httpbench.expected_bytes(1000)
    with pytest.raises(ValueError, match="same origin"):
        c.get_many([server.url + "/bytes/1", "http://127.0.0.2:1/bytes/1"])
    with pytest.raises(TypeError, match="bytes-like"):
        c.request("POST", server.url + "/sink", body=open(__file__, "rb"))  # noqa: SIM115
    with pytest.raises(TypeError):
        c.get_many(server.url)  # type: ignore[arg-type]  # a str is not a list of URLs
    with pytest.raises(ValueError):
        c.get_many(["ftp://x/"])
    c.close()
    with pytest.raises(ValueError, match="closed"):
        c.get_many([server.url + "/bytes/1"])


def test_http1_client_get_many_in_order(server):
    """Without http2 get_many runs the GETs one after the other on the pool."""
    with Client() as c:
        rs = c.get_many([f"{server.url}/bytes/{n}" for n in (3, 1, 2)])
    assert [r.body for r in rs] == [httpbench.expected_bytes(n) for n in (3, 1, 2)]
    assert {r.http_version for r in rs} == {"HTTP/1.1"}


@pytest.mark.h2_server
def test_headers_outlive_a_batch_beyond_the_stream_limit(server):
    """Streams past the server's limit (100) are submitted later in the run: their
    header fields must still be valid then."""
    urls = [f"{server.url}/bytes/{i % 7}" for i in range(150)]
    hdrs = {"X-Run": "h2-" + "v" * 200, "Accept": "*/*"}
    with Client(http2=True) as c:
        s0 = _h2(server.stats())
        rs = c.get_many(urls, {k: str(v) for k, v in hdrs.items()})
        s1 = _h2(server.stats())
    assert [r.body for r in rs] == [httpbench.expected_bytes(i % 7) for i in range(150)]
    assert _delta(s0, s1) == (150, 0, 1)


# 200 fields (more than an HTTP/1.1 head may carry here), duplicates, a Latin-1
# byte, an empty value and a colon inside a value: each comes back as sent, in order.
H2_FIELDS = [(b"x-dup", b"a"), (b"x-dup", b"b"), (b"x-latin", b"caf\xe9"), (b"x-empty", b""),
             (b"x-colon", b"a: b"), *((b"x-f%03d" % i, b"v%d" % i) for i in range(195))]


def _answer_with_fields(c) -> None:
    from _h2raw import HEADERS, SETTINGS, frame, hpack_literal, settings

    c.sock.settimeout(5)
    c.send(settings())
    # frames after the 24-byte preface until the request's HEADERS on stream 1
    pos, seen = 24, False
    while not seen:
        while len(c.buf) < pos + 9:
            if not c._fill():
                return
        n, ftype = int.from_bytes(c.buf[pos:pos + 3], "big"), c.buf[pos + 3]
        seen = ftype == HEADERS
        pos += 9 + n
    block = b"\x88" + b"".join(hpack_literal(k, v) for k, v in
                               [*H2_FIELDS, (b"content-length", b"2")])
    c.send(frame(SETTINGS, 0x1, 0) + frame(HEADERS, 0x4, 1, block) +
           frame(0, 0x1, 1, b"ok"))
    while c._fill():  # until the client leaves
        pass


def test_response_headers_are_the_decoded_fields():
    with RawServer(_answer_with_fields) as srv, Client(http2=True, timeout=10) as c:
        r = c.get(srv.url("/x"))
    assert (r.status, r.reason, r.http_version, r.body) == (200, "", "HTTP/2", b"ok")
    want = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in H2_FIELDS]
    assert list(r.headers.items()) == [*want, ("content-length", "2")]
    assert r.headers.get_all("X-Dup") == ["a", "b"] and r.headers["x-latin"] == "café"


@pytest.mark.h2_server
def test_h2_and_http11_responses_read_alike(server):
    # The same route over both protocols: the same status, body and fields
    # (HTTP/2 names lowercase; the connection-specific and Date fields apart).
    url = server.url + "/bytes/150"
    skip = {"connection", "keep-alive", "date"}
    with Client() as c1, Client(http2=True) as c2:
        r1, r2 = c1.get(url), c2.get(url)
    assert (r1.status, r1.body) == (r2.status, r2.body)
    h1 = [(k.lower(), v) for k, v in r1.headers.items() if k.lower() not in skip]
    h2 = [(k, v) for k, v in r2.headers.items() if k not in skip]
    assert h1 == h2 and ("content-length", "150") in h2
