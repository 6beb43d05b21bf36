"""The HTTP/1.1 parser through its private test surface in httpbench._core:
every accept/reject rule, byte-at-a-time feeding, big inputs, binary bodies."""

from __future__ import annotations

import random

import httpbench
import pytest
from httpbench import _core

RESP = (b"HTTP/1.1 200 OK\r\nServer: httpbench\r\nDate: Wed, 02 Dec 2026 15:00:00 GMT\r\n"
        b"Content-Type: text/plain\r\nContent-Length: 13\r\n\r\n")


def perr(fn, data: bytes, **kw) -> httpbench.ProtocolError:
    with pytest.raises(httpbench.ProtocolError) as ei:
        fn(data, **kw)
    return ei.value


def assert_code(fn, data: bytes, code_name: str, **kw) -> None:
    e = perr(fn, data, **kw)
    code = getattr(_core, code_name)
    assert e.code == code, (data, e.code, code_name)
    assert str(e) == _core.parse_strerror(code)


# --- response heads ---------------------------------------------------------

def test_response_fields():
    r = _core.parse_response_head(RESP + b"Hello, World!")
    assert r == {
        "consumed": len(RESP),
        "version": "HTTP/1.1",
        "status": 200,
        "reason": "OK",
        "headers": [(b"Server", b"httpbench"), (b"Date", b"Wed, 02 Dec 2026 15:00:00 GMT"),
                    (b"Content-Type", b"text/plain"), (b"Content-Length", b"13")],
        "content_length": 13,
        "chunked": False,
        "connection_close": False,
        "transfer_encoding": False,
        "expect_continue": False,
        "body_kind": "length",
        "interim": False,
    }


def test_response_byte_at_a_time():
    for k in range(len(RESP)):
        assert _core.parse_response_head(RESP[:k]) is None, k
    assert _core.parse_response_head(RESP)["consumed"] == len(RESP)


def test_response_split_feeding_bytearray_and_memoryview():
    buf = bytearray()
    results = []
    for b in RESP + b"body":
        buf.append(b)
        r = _core.parse_response_head(memoryview(buf))
        if r is not None:
            results.append(r)
            break
    assert len(results) == 1 and results[0]["consumed"] == len(RESP) == len(buf)


@pytest.mark.parametrize("data,field,expected", [
    (b"HTTP/1.1 200 OK\r\ncOnTeNt-LeNgTh: 7\r\n\r\n", "content_length", 7),
    (b"HTTP/1.1 200 OK\r\nContent-Length:\t 7 \t\r\n\r\n", "content_length", 7),
    (b"HTTP/1.1 200 \r\n\r\n", "reason", ""),
    (b"HTTP/1.1 200\r\n\r\n", "reason", ""),
    (b"HTTP/1.1 200 Fine \xe9\r\n\r\n", "reason", "Fine \xe9"),
    (b"HTTP/1.0 404 Not Found\r\n\r\n", "status", 404),
    (b"HTTP/1.0 404 Not Found\r\n\r\n", "version", "HTTP/1.0"),
    (b"\r\nHTTP/1.1 200 OK\r\n\r\n", "consumed", 21),
    (b"HTTP/1.1 200 OK\r\nX:   a  b  \r\n\r\n", "headers", [(b"X", b"a  b")]),
    (b"HTTP/1.1 200 OK\r\nX:\r\nY: \r\n\r\n", "headers", [(b"X", b""), (b"Y", b"")]),
    (b"HTTP/1.1 200 OK\r\nX: \x80\xff\t\r\n\r\n", "headers", [(b"X", b"\x80\xff")]),
])
def test_response_tolerated(data, field, expected):
    assert _core.parse_response_head(data)[field] == expected


@pytest.mark.parametrize("data,code", [
    (b"HTTP/2.0 200 OK\r\n\r\n", "PE_BAD_VERSION"),
    (b"HTTP/1.x 200 OK\r\n\r\n", "PE_BAD_VERSION"),
    (b"http/1.1 200 OK\r\n\r\n", "PE_BAD_VERSION"),
    (b"HTTP/1.10 200 OK\r\n\r\n", "PE_BAD_VERSION"),
    (b"SSH-2.0-OpenSSH\r\n", "PE_BAD_VERSION"),
    (b"HTTP/1.1 20 OK\r\n\r\n", "PE_BAD_STATUS"),
    (b"HTTP/1.1 2000 OK\r\n\r\n", "PE_BAD_STATUS"),
    (b"HTTP/1.1 abc OK\r\n\r\n", "PE_BAD_STATUS"),
    (b"HTTP/1.1 099 OK\r\n\r\n", "PE_BAD_STATUS"),
    (b"HTTP/1.1 \r\n\r\n", "PE_BAD_STATUS"),
    (b"HTTP/1.1 200 O\x00K\r\n\r\n", "PE_BAD_HEADER_CHAR"),
    (b"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", "PE_NO_COLON"),
    (b"HTTP/1.1 200 OK\r\nno colon at all\r\n\r\n", "PE_NO_COLON"),
    (b"HTTP/1.1 200 OK\r\nName : v\r\n\r\n", "PE_SPACE_BEFORE_COLON"),
    (b"HTTP/1.1 200 OK\r\nName\t: v\r\n\r\n", "PE_SPACE_BEFORE_COLON"),
    (b"HTTP/1.1 200 OK\r\nNa me: v\r\n\r\n", "PE_SPACE_BEFORE_COLON"),
    (b"HTTP/1.1 200 OK\r\n: v\r\n\r\n", "PE_BAD_HEADER_CHAR"),
    (b"HTTP/1.1 200 OK\r\nX\x00Y: v\r\n\r\n", "PE_BAD_HEADER_CHAR"),
    (b"HTTP/1.1 200 OK\r\nX(y): v\r\n\r\n", "PE_BAD_HEADER_CHAR"),
    (b"HTTP/1.1 200 OK\r\nX: a\x00b\r\n\r\n", "PE_BAD_HEADER_CHAR"),
    (b"HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n", "PE_BAD_HEADER_CHAR"),
    (b"HTTP/1.1 200 OK\r\nX: a\x7f\r\n\r\n", "PE_BAD_HEADER_CHAR"),
    (b"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", "PE_BAD_LINE_ENDING"),
    (b"HTTP/1.1 200 OK\rX: a\r\n\r\n", "PE_BAD_LINE_ENDING"),
    (b"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n", "PE_OBS_FOLD"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "PE_BAD_CONTENT_LENGTH"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n", "PE_BAD_CONTENT_LENGTH"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n", "PE_BAD_CONTENT_LENGTH"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 1.5\r\n\r\n", "PE_BAD_CONTENT_LENGTH"),
    (b"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", "PE_BAD_CONTENT_LENGTH"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n", "PE_BAD_CONTENT_LENGTH"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 1" + b"0" * 30 + b"\r\n\r\n", "PE_BAD_CONTENT_LENGTH"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
     "PE_DUP_CONTENT_LENGTH"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n", "PE_DUP_CONTENT_LENGTH"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
     "PE_BAD_TRANSFER_ENCODING"),
    (b"HTTP/1.0 404 Not Found\n\n", "PE_BAD_LINE_ENDING"),
])
def test_response_rejected(data, code):
    assert_code(_core.parse_response_head, data, code)
    # every strict prefix is either still incomplete or already the same error
    for k in range(len(data)):
        try:
            assert _core.parse_response_head(data[:k]) is None
        except httpbench.ProtocolError as e:
            assert e.code == getattr(_core, code)


def test_error_codes_are_distinct_with_reasons():
    names = [n for n in dir(_core) if n.startswith("PE_")]
    codes = {getattr(_core, n) for n in names}
    assert len(codes) == len(names) >= 19
    reasons = {_core.parse_strerror(c) for c in codes}
    assert len(reasons) == len(codes) and "protocol error" not in reasons
    assert all(-5099 <= c <= -5000 for c in codes)


def test_protocol_error_is_httpbench_error_with_code():
    e = perr(_core.parse_response_head, b"HTTP/9.9 200 OK\r\n\r\n")
    assert isinstance(e, httpbench.HttpbenchError)
    assert e.code == _core.PE_BAD_VERSION
    assert "HTTP/1.x" in str(e)


def test_identical_duplicate_content_length_accepted():
    for data in (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n",
                 b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n",
                 b"HTTP/1.1 200 OK\r\nContent-Length: 5,5 , 5\r\n\r\n"):
        r = _core.parse_response_head(data)
        assert r["content_length"] == 5 and r["body_kind"] == "length"
    r = _core.parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n")
    assert r["content_length"] == 2**63 - 1


@pytest.mark.parametrize("head,head_request,kind", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", False, "length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", True, "none"),
    (b"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n", False, "none"),
    (b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", False, "none"),
    (b"HTTP/1.1 100 Continue\r\n\r\n", False, "none"),
    (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", False, "none"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", False, "chunked"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n", False, "chunked"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
     False, "chunked"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n", False,
     "chunked"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", False, "close"),
    (b"HTTP/1.1 200 OK\r\n\r\n", False, "close"),
    (b"HTTP/1.0 200 OK\r\n\r\n", False, "close"),
])
def test_response_body_framing(head, head_request, kind):
    assert _core.parse_response_head(head, head_request=head_request)["body_kind"] == kind


def test_te_overrides_content_length_and_closes():
    r = _core.parse_response_head(
        b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert r["content_length"] is None and r["chunked"] and r["connection_close"]


@pytest.mark.parametrize("status,interim", [(100, True), (102, True), (103, True),
                                            (101, False), (200, False), (199, True)])
def test_interim(status, interim):
    r = _core.parse_response_head(b"HTTP/1.1 %d X\r\n\r\n" % status)
    assert r["interim"] is interim


@pytest.mark.parametrize("head,close", [
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", True),
    (b"HTTP/1.1 200 OK\r\nConnection: keep-alive, CLOSE\r\n\r\n", True),
    (b"HTTP/1.1 200 OK\r\nConnection: closed\r\n\r\n", False),
    (b"HTTP/1.1 200 OK\r\n\r\n", False),
    (b"HTTP/1.0 200 OK\r\n\r\n", True),
    (b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\r\n", False),
])
def test_connection_close(head, close):
    assert _core.parse_response_head(head)["connection_close"] is close


# --- limits -----------------------------------------------------------------

def test_one_mib_header_line_is_too_large_at_once():
    data = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (1 << 20)
    assert_code(_core.parse_response_head, data, "PE_HEAD_TOO_LARGE")
    # still incomplete at exactly the limit, too large one byte later
    assert _core.parse_response_head(data[:65536]) is None
    assert_code(_core.parse_response_head, data[:65537], "PE_HEAD_TOO_LARGE")
    assert_code(_core.parse_request_head, b"GET /" + b"a" * (1 << 20), "PE_HEAD_TOO_LARGE")


def test_max_head_is_configurable_and_inclusive():
    head = b"HTTP/1.1 200 OK\r\nX: " + b"a" * 76 + b"\r\n\r\n"
    assert len(head) == 100
    assert _core.parse_response_head(head, max_head=100)["consumed"] == 100
    assert_code(_core.parse_response_head, head, "PE_HEAD_TOO_LARGE", max_head=99)


def _many(n: int) -> bytes:
    return b"HTTP/1.1 200 OK\r\n" + b"".join(b"H%d: v\r\n" % i for i in range(n)) + b"\r\n"


def test_header_count_limit():
    r = _core.parse_response_head(_many(128))
    assert len(r["headers"]) == 128 and r["headers"][127] == (b"H127", b"v")
    assert_code(_core.parse_response_head, _many(129), "PE_TOO_MANY_HEADERS")
    assert len(_core.parse_response_head(_many(129), max_headers=129)["headers"]) == 129
    assert len(_core.parse_response_head(_many(1000), max_headers=1000)["headers"]) == 1000
    assert_code(_core.parse_response_head, _many(4), "PE_TOO_MANY_HEADERS", max_headers=3)
    req = b"GET / HTTP/1.1\r\n" + b"".join(b"H%d: v\r\n" % i for i in range(129)) + b"\r\n"
    assert_code(_core.parse_request_head, req, "PE_TOO_MANY_HEADERS")


def test_bad_arguments():
    with pytest.raises(ValueError):
        _core.parse_response_head(RESP, max_head=0)
    with pytest.raises(TypeError):
        _core.parse_response_head(RESP, bogus=1)
    with pytest.raises(TypeError):
        _core.parse_request_head(b"GET / HTTP/1.1\r\n\r\n", head_request=True)
    with pytest.raises(TypeError):
        _core.parse_response_head("not bytes")
    with pytest.raises(TypeError):
        _core.parse_response_head()


# --- request heads ----------------------------------------------------------

REQ = b"POST /upload?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"


def test_request_fields_and_byte_at_a_time():
    r = _core.parse_request_head(REQ + b"abc")
    assert r["consumed"] == len(REQ)
    assert (r["method"], r["target"], r["version"]) == ("POST", "/upload?x=1", "HTTP/1.1")
    assert r["headers"] == [(b"Host", b"127.0.0.1"), (b"Content-Length", b"3"),
                            (b"Expect", b"100-continue")]
    assert r["content_length"] == 3 and r["expect_continue"] and r["body_kind"] == "length"
    for k in range(len(REQ)):
        assert _core.parse_request_head(REQ[:k]) is None, k


@pytest.mark.parametrize("data,kind,close", [
    (b"GET / HTTP/1.1\r\n\r\n", "none", False),
    (b"GET / HTTP/1.0\r\n\r\n", "none", True),
    (b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "none", False),
    (b"PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "chunked", False),
    (b"PUT / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "chunked", False),
    (b"\r\nGET / HTTP/1.1\r\nConnection: close\r\n\r\n", "none", True),
])
def test_request_framing(data, kind, close):
    r = _core.parse_request_head(data)
    assert (r["body_kind"], r["connection_close"]) == (kind, close)


@pytest.mark.parametrize("data,code", [
    (b"PUT / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "PE_BAD_TRANSFER_ENCODING"),
    (b"PUT / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", "PE_BAD_TRANSFER_ENCODING"),
    (b"PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
     "PE_BAD_TRANSFER_ENCODING"),
    (b"PUT / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", "PE_BAD_TRANSFER_ENCODING"),
    (b"PUT / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
     "PE_TE_AND_CONTENT_LENGTH"),
    (b"PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
     "PE_TE_AND_CONTENT_LENGTH"),
    (b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
     "PE_DUP_CONTENT_LENGTH"),
    (b"POST / HTTP/1.1\r\nContent-Length: -2\r\n\r\n", "PE_BAD_CONTENT_LENGTH"),
    (b"GET / HTTP/2.0\r\n\r\n", "PE_BAD_VERSION"),
    (b"GET /\r\n\r\n", "PE_BAD_VERSION"),
    (b"GET / HTTP/1.1 \r\n\r\n", "PE_BAD_VERSION"),
    (b" GET / HTTP/1.1\r\n\r\n", "PE_BAD_REQUEST_LINE"),
    (b"G(T / HTTP/1.1\r\n\r\n", "PE_BAD_REQUEST_LINE"),
    (b"GET /a\x01b HTTP/1.1\r\n\r\n", "PE_BAD_REQUEST_LINE"),
    (b"GET\r\n\r\n", "PE_BAD_REQUEST_LINE"),
    (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", "PE_SPACE_BEFORE_COLON"),
    (b"GET / HTTP/1.1\r\nHost\r\n\r\n", "PE_NO_COLON"),
    (b"GET / HTTP/1.1\r\nHost: a\x00\r\n\r\n", "PE_BAD_HEADER_CHAR"),
    (b"GET / HTTP/1.1\r\nHost: a\r\n b\r\n\r\n", "PE_OBS_FOLD"),
])
def test_request_rejected(data, code):
    assert_code(_core.parse_request_head, data, code)


# --- chunked bodies ---------------------------------------------------------

def chunk(body: bytes, sizes: list[int], ext: bytes = b"", trailers: bytes = b"") -> bytes:
    out, pos = [], 0
    for n in sizes:
        out.append(b"%x%s\r\n%s\r\n" % (n, ext, body[pos:pos + n]))
        pos += n
    assert pos == len(body)
    return b"".join(out) + b"0\r\n" + trailers + b"\r\n"


def feed_all(pieces) -> tuple[bytes, _core.ChunkedDecoder, bytes]:
    """Decode the pieces; return body, decoder and the bytes left after the body."""
    d = _core.ChunkedDecoder()
    body, rest = [], b""
    for p in pieces:
        if d.done:
            rest += p
            continue
        body.append(d.feed(p))
        if d.done and d.unconsumed:
            rest += p[len(p) - d.unconsumed:]
    return b"".join(body), d, rest


CHUNKED = [
    (b"hello world", chunk(b"hello world", [5, 6])),
    (b"0123456789", b"A;name=val;x=\"q\"\r\n0123456789\r\n0;last\r\n\r\n"),
    (b"0123456789", b"a \t;ext\r\n0123456789\r\n0\r\n\r\n"),
    (b"abc", b"000003\r\nabc\r\n0\r\nTrailer-One: v\r\nX-Sum:\r\n\r\n"),
    (b"", b"0\r\n\r\n"),
    (bytes(range(256)) * 3, chunk(bytes(range(256)) * 3, [1, 255, 256, 256])),
    (b"\r\n0\r\n\r\n", chunk(b"\r\n0\r\n\r\n", [7])),
]


@pytest.mark.parametrize("body,enc", CHUNKED)
def test_chunked_split_at_every_boundary(body, enc):
    tail = b"HTTP/1.1 200 OK\r\n"
    data = enc + tail
    # one piece
    got, d, rest = feed_all([data])
    assert (got, d.done, rest) == (body, True, tail)
    # byte at a time
    got, d, rest = feed_all([data[i:i + 1] for i in range(len(data))])
    assert (got, d.done, rest) == (body, True, tail)
    # every two-piece split
    for k in range(len(data) + 1):
        got, d, rest = feed_all([data[:k], data[k:]])
        assert (got, rest) == (body, tail), k


def test_chunked_random_splits_binary():
    rnd = random.Random(1234)
    body = rnd.randbytes(50_000)
    sizes, left = [], len(body)
    while left:
        n = min(left, rnd.randint(1, 5000))
        sizes.append(n)
        left -= n
    enc = chunk(body, sizes, ext=b";a=b", trailers=b"X-T: 1\r\n")
    for _ in range(20):
        cuts = sorted(rnd.sample(range(1, len(enc)), 30))
        pieces = [enc[a:b] for a, b in zip([0, *cuts], [*cuts, len(enc)], strict=True)]
        got, d, rest = feed_all(pieces)
        assert got == body and d.done and rest == b""


def test_chunked_done_consumes_nothing_more():
    d = _core.ChunkedDecoder()
    assert d.feed(b"5\r\nhello\r\n0\r\n\r\nXYZ") == b"hello"
    assert d.done and d.unconsumed == 3
    assert d.feed(b"more") == b"" and d.unconsumed == 4
    d2 = _core.ChunkedDecoder()
    assert d2.feed(b"5\r\nhel") == b"hel" and not d2.done and d2.unconsumed == 0


@pytest.mark.parametrize("data,code", [
    (b"x\r\n", "PE_BAD_CHUNK_SIZE"),
    (b"-1\r\n", "PE_BAD_CHUNK_SIZE"),
    (b"0x5\r\n", "PE_BAD_CHUNK_SIZE"),
    (b"5 5\r\n", "PE_BAD_CHUNK_SIZE"),
    (b";ext\r\n", "PE_BAD_CHUNK_SIZE"),
    (b"\r\n", "PE_BAD_CHUNK_SIZE"),
    (b"10000000000000000\r\n", "PE_CHUNK_SIZE_OVERFLOW"),
    (b"8000000000000000\r\n", "PE_CHUNK_SIZE_OVERFLOW"),
    (b"5\rX", "PE_BAD_LINE_ENDING"),
    (b"3\nabc\n0\n\n", "PE_BAD_LINE_ENDING"),
    (b"5\r\nhelloX", "PE_BAD_CHUNK"),
    (b"5\r\nhello\rX", "PE_BAD_CHUNK"),
    (b"1;a\x01\r\n", "PE_BAD_CHUNK"),
    (b"0\r\nNoColon\r\n\r\n", "PE_BAD_CHUNK"),
    (b"0\r\n folded\r\n\r\n", "PE_BAD_CHUNK"),
    (b"0\r\nX: a\x00\r\n\r\n", "PE_BAD_CHUNK"),
    (b"0\r\n\rX", "PE_BAD_LINE_ENDING"),
    (b"0" * 5000 + b"1\r\n", "PE_CHUNK_LINE_TOO_LONG"),
    (b"1;" + b"e" * 5000 + b"\r\n", "PE_CHUNK_LINE_TOO_LONG"),
    (b"0\r\nX: " + b"v" * 5000 + b"\r\n\r\n", "PE_CHUNK_LINE_TOO_LONG"),
    (b"0\r\n" + b"X-Trailer: 0123456789abcdef\r\n" * 3000 + b"\r\n", "PE_TRAILERS_TOO_LARGE"),
])
def test_chunked_rejected(data, code):
    d = _core.ChunkedDecoder()
    with pytest.raises(httpbench.ProtocolError) as ei:
        d.feed(data)
    assert ei.value.code == getattr(_core, code)
    # sticky: the decoder stays failed
    with pytest.raises(httpbench.ProtocolError):
        d.feed(b"0\r\n\r\n")
    # byte at a time gives the same error
    d = _core.ChunkedDecoder()
    with pytest.raises(httpbench.ProtocolError) as ei:
        for i in range(len(data)):
            d.feed(data[i:i + 1])
    assert ei.value.code == getattr(_core, code)


def test_chunked_largest_size_accepted():
    d = _core.ChunkedDecoder()
    assert d.feed(b"7fffffffffffffff\r\nab") == b"ab"
    assert not d.done


def test_chunked_decoder_rejects_arguments():
    with pytest.raises(TypeError):
        _core.ChunkedDecoder(1)
    with pytest.raises(TypeError):
        _core.ChunkedDecoder().feed("text")


def test_full_response_with_chunked_body_byte_at_a_time():
    body = bytes(range(256)) * 4
    wire = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(body, [100, 924])
            + b"HTTP/1.1 204 No Content\r\n\r\n")
    buf = b""
    head = None
    i = 0
    while head is None:
        buf += wire[i:i + 1]
        i += 1
        head = _core.parse_response_head(buf)
    assert head["body_kind"] == "chunked" and i == head["consumed"]
    d = _core.ChunkedDecoder()
    out = b""
    while not d.done:
        out += d.feed(wire[i:i + 1])
        i += 1
    assert out == body
    nxt = _core.parse_response_head(wire[i:])
    assert nxt["status"] == 204 and nxt["body_kind"] == "none"
