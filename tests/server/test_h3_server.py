"""The embedded server's HTTP/3 side (C: ngtcp2 + GnuTLS, our HTTP/3 framing and QPACK): every route
byte-exact over QUIC against third-party clients (libcurl's ngtcp2/nghttp3 through
pycurl, and aioquic's own client), counted exactly in ``by_protocol["h3"]``, next to
the TCP listener with the same CA and port number; without the build, a clear error."""

from __future__ import annotations

import asyncio
import http.client
import io
import json
import ssl
import zlib

import httpbench
import pytest
from httpbench import expected_bytes
from httpbench._features import H3Unavailable, h3_missing

needs_h3 = pytest.mark.skipif(h3_missing() is not None, reason=str(h3_missing()))
needs_aioquic = pytest.mark.skipif(
    __import__("importlib").util.find_spec("aioquic") is None,
    reason="aioquic (the third-party client) is not installed: pip install 'httpbench[h3]'")


def _pycurl_h3():
    try:
        import pycurl
    except ImportError:
        return None
    return pycurl if pycurl.version_info()[4] & pycurl.VERSION_HTTP3 else None


@pytest.fixture(scope="module")
def h3srv():
    from httpbench._server import start_process

    with start_process(tls=True, h3=True, request_timeout=5.0) as srv:
        yield srv


BODY = expected_bytes(300_000, 7)  # any bytes; the server checks none
# (method, path, body, status, expected response body, route)
CASES = [
    ("GET", "/", None, 200, b"httpbench test server\n", "root"),
    ("GET", "/bytes/0", None, 200, b"", "bytes"),
    ("GET", "/bytes/150", None, 200, expected_bytes(150), "bytes"),
    ("GET", "/bytes/12000", None, 200, expected_bytes(12000), "bytes"),
    ("GET", "/bytes/1000000", None, 200, expected_bytes(1_000_000), "bytes"),
    ("POST", "/sink", BODY, 200,
     json.dumps({"bytes": len(BODY), "crc32": f"{zlib.crc32(BODY):08x}"}).encode(), "sink"),
    ("POST", "/echo", b"hello over quic", 200, b"hello over quic", "echo"),
    ("GET", "/delay/20", None, 200, b"", "delay"),
    ("GET", "/status/503", None, 503, b"", "status"),
    ("GET", "/bytes/abc", None, 400, b"bad parameter\n", "bytes"),
    ("GET", "/nope", None, 404, b"not found\n", "not_found"),
]


def _check_counts(before, after, n, routes):
    assert after["by_protocol"]["h3"] - before["by_protocol"]["h3"] == n
    assert after["requests"] - before["requests"] == n
    for p in ("http/1.1", "h2"):
        assert after["by_protocol"][p] == before["by_protocol"][p]
    for r, k in routes.items():
        assert after["by_route"][r] - before["by_route"].get(r, 0) == k, r
    assert after["requests"] == sum(after["by_route"].values()) == sum(after["by_protocol"].values())
    assert after["cpu_ns"] > before["cpu_ns"]


@needs_h3
def test_every_route_byte_exact_with_libcurl(h3srv):
    pycurl = _pycurl_h3()
    if pycurl is None:
        pytest.skip("pycurl's libcurl has no HTTP/3 here")
    c = pycurl.Curl()
    c.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_3ONLY)
    c.setopt(pycurl.CAINFO, h3srv.ca_file)
    c.setopt(pycurl.TIMEOUT_MS, 10000)
    before = h3srv.stats()
    routes: dict[str, int] = {}
    for _method, path, body, status, want, route in CASES:
        buf = io.BytesIO()
        c.setopt(pycurl.URL, h3srv.h3_url + path)
        if body is not None:
            c.setopt(pycurl.POSTFIELDS, body)
        else:
            c.setopt(pycurl.HTTPGET, 1)
        c.setopt(pycurl.WRITEDATA, buf)
        c.perform()
        assert c.getinfo(pycurl.INFO_HTTP_VERSION) == pycurl.CURL_HTTP_VERSION_3, path
        assert c.getinfo(pycurl.RESPONSE_CODE) == status, path
        assert buf.getvalue() == want, path
        routes[route] = routes.get(route, 0) + 1
    c.close()
    after = h3srv.stats()
    _check_counts(before, after, len(CASES), routes)
    assert after["connections_by_protocol"]["h3"] - before["connections_by_protocol"]["h3"] == 1
    assert after["by_status"][400] - before["by_status"].get(400, 0) == 1
    assert after["body_bytes_in"] - before["body_bytes_in"] == len(BODY) + 15
    assert after["h3"]["streams"] - before["h3"]["streams"] == len(CASES)
    assert after["h3"]["handshakes"] - before["h3"]["handshakes"] == 1


@needs_h3
@needs_aioquic
def test_routes_byte_exact_with_aioquic_client(h3srv):
    from httpbench._adapters.aioquic_ import AioquicAdapter

    async def run() -> list[tuple[int, bytes]]:
        out = []
        for method, path, body, _, _, _ in CASES:
            a = AioquicAdapter()
            await a.asetup(h3srv.h3_url, h3srv.ca_file, method=method, path=path, body=body,
                           http3=True, timeout=10.0)
            try:
                await a.request()
                out.append((a.last_status, a.last_body))
            finally:
                await a.aclose()
        return out

    before = h3srv.stats()
    got = asyncio.run(run())
    assert got == [(st, want) for _, _, _, st, want, _ in CASES]
    after = h3srv.stats()
    _check_counts(before, after, len(CASES), {})
    assert after["connections_by_protocol"]["h3"] - before["connections_by_protocol"]["h3"] \
        == len(CASES)


@needs_h3
def test_tcp_listener_shares_the_ca_and_counts_apart(h3srv):
    """The TLS listener verifies with the same CA file; its request is HTTP/1.1, not h3,
    and its response says where HTTP/3 is (Alt-Svc)."""
    before = h3srv.stats()
    ctx = ssl.create_default_context(cafile=h3srv.ca_file)
    conn = http.client.HTTPSConnection("127.0.0.1", h3srv.port, context=ctx, timeout=10)
    conn.request("GET", "/bytes/150")
    r = conn.getresponse()
    assert (r.status, r.read()) == (200, expected_bytes(150))
    assert r.getheader("Alt-Svc") == f'h3=":{h3srv.port}"'
    conn.close()
    after = h3srv.stats()
    assert after["by_protocol"]["http/1.1"] - before["by_protocol"]["http/1.1"] == 1
    assert after["by_protocol"]["h3"] == before["by_protocol"]["h3"]
    assert h3srv.h3_url == f"https://127.0.0.1:{h3srv.h3_port}" == h3srv.url


def test_h3_needs_tls_and_the_build(monkeypatch):
    from httpbench import _core, _features
    from httpbench._server import Server, start_process

    with pytest.raises(ValueError, match="h3=True needs tls=True"):
        start_process(tls=False, h3=True)
    with pytest.raises(ValueError, match="h3=True needs tls=True"):
        Server(h3=True)
    if h3_missing() is None:  # the C layer says the same to a direct caller
        with pytest.raises(ValueError, match="http3 needs tls"):
            _core.server_start(http3=True)
    monkeypatch.setattr(_features._core, "HAVE_H3", 0)
    with pytest.raises(H3Unavailable, match="this build has no HTTP/3 server: install libngtcp2"):
        start_process(tls=True, h3=True)
    with pytest.raises(httpbench.FeatureUnavailable):
        Server(tls=True, h3=True)
    assert httpbench.features()["http3-server"] is False
    assert "built without http3-server: this build has no HTTP/3 server" in _features.describe()


@needs_h3
@needs_aioquic
def test_cli_serve_h3():
    """`httpbench serve --tls --h3`: both listeners on one port number, one CA; the
    request over HTTP/3 is counted in the closing line; the CA is removed on stop."""
    import os
    import subprocess
    import sys

    from httpbench._adapters.aioquic_ import AioquicAdapter

    exe = [sys.executable, "-m", "httpbench", "serve", "--port", "0"]
    bad = subprocess.run(exe + ["--h3"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--h3 needs --tls" in bad.stderr
    p = subprocess.Popen(exe + ["--tls", "--h3"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        tcp_url = p.stdout.readline().split()[4]
        h3_line = p.stdout.readline()
        ca = p.stdout.readline().split(": ", 1)[1].strip()
        h3_url = h3_line.split()[-1]
        assert h3_line.startswith("HTTP/3 on UDP port ") and h3_url == tcp_url

        async def get() -> tuple[int, bytes | None]:
            a = AioquicAdapter()
            await a.asetup(h3_url, ca, path="/bytes/150", http3=True, timeout=10.0)
            try:
                await a.request()
            finally:
                await a.aclose()
            return a.last_status, a.last_body

        assert asyncio.run(get()) == (200, expected_bytes(150))
        ctx = ssl.create_default_context(cafile=ca)
        conn = http.client.HTTPSConnection("127.0.0.1", int(tcp_url.rsplit(":", 1)[1]),
                                           context=ctx, timeout=10)
        conn.request("GET", "/bytes/3")
        assert conn.getresponse().read() == b"012"
        conn.close()
        p.terminate()
        out, _ = p.communicate(timeout=20)
        assert p.returncode == 0 and "stopped: 2 requests, 2 connections" in out, out
        assert not os.path.exists(ca)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@needs_h3
@needs_aioquic
def test_aioquic_client_timeout_bounds_a_silence(h3srv):
    """The adapter's timeout fires when nothing arrives (a /delay longer than it)."""
    from httpbench._adapters.aioquic_ import AioquicAdapter

    async def run() -> None:
        a = AioquicAdapter()
        await a.asetup(h3srv.h3_url, h3srv.ca_file, path="/delay/3000", http3=True,
                       timeout=0.3)
        try:
            with pytest.raises(asyncio.TimeoutError):
                await a.request()
        finally:
            await a.aclose()

    asyncio.run(run())
