"""httpbench.Client over HTTPS: verification on by default, CA files, wrong CA
and host mismatch are TLSError, framing and pooling over TLS. The server is
the raw-socket test server wrapped in Python's ssl with openssl-made certs."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import time

import pytest
from _raw import RawServer, chunked, idle_closer, ok, responder
from httpbench import Client, HttpbenchError, RequestTimeout, TLSError

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl CLI needed")


def make_cert(d, name: str, san: str) -> tuple[str, str]:
    cert, key = os.path.join(d, f"{name}.pem"), os.path.join(d, f"{name}.key")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "2", "-subj", f"/CN={name}", "-addext", f"subjectAltName={san}",
         "-keyout", key, "-out", cert],
        check=True, capture_output=True, timeout=30,
    )
    return cert, key


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    good = make_cert(d, "localhost", "DNS:localhost,IP:127.0.0.1")
    other = make_cert(d, "other", "DNS:other.test")
    return {"good": good, "other": other}


def server_ctx(cert: tuple[str, str]) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*cert)
    return ctx


def tls_server(certs, *responses, cert="good", **kw) -> RawServer:
    return RawServer(responder(*responses, **kw), ssl_context=server_ctx(certs[cert]))


def test_https_verified_get_and_reuse(certs):
    with tls_server(certs, ok(b"secure")) as srv, Client(ca_file=certs["good"][0]) as c:
        r1 = c.get(srv.url())
        r2 = c.get(srv.url("/again", host="localhost"))
        r3 = c.get(srv.url("/again", host="localhost"))
        assert (r1.status, r1.body, r2.body) == (200, b"secure", b"secure")
        assert not r1.reused and r1.tls_time > 0 and r1.connect_time > 0
        assert r3.reused and r3.tls_time == 0.0
        assert srv.connections == 2  # 127.0.0.1 and localhost are separate pool keys


def test_wrong_ca_is_tls_error(certs):
    with tls_server(certs, ok(b"x")) as srv, Client(ca_file=certs["other"][0]) as c:
        with pytest.raises(TLSError) as ei:
            c.get(srv.url())
    assert isinstance(ei.value, HttpbenchError) and isinstance(ei.value, OSError)
    assert "verif" in str(ei.value).lower()


def test_self_signed_without_ca_is_tls_error(certs):
    with tls_server(certs, ok(b"x")) as srv, Client() as c:
        with pytest.raises(TLSError, match="(?i)verif|self.signed"):
            c.get(srv.url())


def test_host_mismatch_is_tls_error(certs):
    # A cert valid for other.test only, trusted as a CA, but served for 127.0.0.1.
    with tls_server(certs, ok(b"x"), cert="other") as srv, Client(ca_file=certs["other"][0]) as c:
        with pytest.raises(TLSError):
            c.get(srv.url())


def test_verify_false_accepts_any_cert(certs):
    with tls_server(certs, ok(b"insecure"), cert="other") as srv, Client(verify=False) as c:
        assert c.get(srv.url()).body == b"insecure"


def test_missing_ca_file_is_tls_error(tmp_path):
    with Client(ca_file=str(tmp_path / "nope.pem")) as c:
        with pytest.raises(TLSError):
            c.get("https://127.0.0.1:1/")


def test_plain_server_on_https_url_is_tls_error(certs):
    def handler(conn) -> None:
        conn.sock.recv(4096)
        conn.send(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        time.sleep(0.5)

    with RawServer(handler) as srv, Client(ca_file=certs["good"][0], timeout=3) as c:
        with pytest.raises(TLSError):
            c.get(f"https://127.0.0.1:{srv.port}/")


def test_tls_handshake_stall_times_out(certs):
    def handler(conn) -> None:
        time.sleep(2)  # accept, never answer the ClientHello

    with RawServer(handler) as srv, Client(ca_file=certs["good"][0], timeout=0.3) as c:
        t0 = time.monotonic()
        with pytest.raises(RequestTimeout):
            c.get(f"https://127.0.0.1:{srv.port}/")
        assert 0.3 <= time.monotonic() - t0 < 2.0


def test_chunked_and_large_bodies_over_tls(certs, tmp_path):
    data = os.urandom(4 * 1024 * 1024)
    with tls_server(certs, chunked(data, 50_000), ok(data)) as srv, \
            Client(ca_file=certs["good"][0]) as c:
        assert c.get(srv.url()).body == data
        r = c.get(srv.url())
        assert r.body == data and r.reused
        p = tmp_path / "tls.bin"
        r = c.download(srv.url(), p)
        assert r.size == len(data) and p.read_bytes() == data
        assert srv.connections == 1


def test_tls_post_body(certs, tmp_path):
    import hashlib

    from _raw import echo_handler

    data = os.urandom(500_000)
    p = tmp_path / "up.bin"
    p.write_bytes(data)
    want = hashlib.sha256(data).hexdigest().encode() + b" 500000"
    with RawServer(echo_handler, ssl_context=server_ctx(certs["good"])) as srv, \
            Client(ca_file=certs["good"][0]) as c:
        assert c.request("POST", srv.url(), body=data).body == want
        assert c.request("PUT", srv.url(), body=p).body == want  # no sendfile over TLS


def test_tls_idle_close_detected_by_stale_check(certs):
    with RawServer(idle_closer(), ssl_context=server_ctx(certs["good"])) as srv, \
            Client(ca_file=certs["good"][0]) as c:
        c.get(srv.url())
        time.sleep(0.3)
        r = c.get(srv.url())
        assert r.body == b"ok" and not r.reused
        assert c.pool_stats()["stale_dropped"] == 1


def test_tls_idle_close_retried_without_stale_check(certs):
    with RawServer(idle_closer(), ssl_context=server_ctx(certs["good"])) as srv, \
            Client(ca_file=certs["good"][0], stale_check=False) as c:
        c.get(srv.url())
        time.sleep(0.3)
        assert c.get(srv.url()).body == b"ok"
        assert srv.connections == 2
