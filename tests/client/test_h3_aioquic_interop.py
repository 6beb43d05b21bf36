"""Our HTTP/3 client and load generator (our own framing and QPACK over ngtcp2) against
another implementation: aioquic's HTTP/3 server (benchmarks/h3_aioquic_server.py, which
uses pylsqpack for QPACK), with exact counts from that server's own stats and
byte-exact bodies."""

from __future__ import annotations

import json
import os
import shutil
import sys
import zlib

import httpbench
import pytest
from httpbench import Client, expected_bytes
from httpbench._features import h3_missing

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

pytest.importorskip("aioquic", reason="aioquic not installed (pip install 'httpbench[h3]')")
needs_h3 = pytest.mark.skipif(not httpbench.features()["http3-client"] or h3_missing() is not None,
                              reason=f"built without HTTP/3: {h3_missing()}")


@pytest.fixture(scope="module")
def aioquic_server():
    import h3_aioquic_server as aq

    d, chain, key, ca = aq.temp_certificate()
    srv = aq.H3Server(chain, key, "127.0.0.1", 0).start()
    try:
        yield srv, ca
    finally:
        srv.stop()
        shutil.rmtree(d, ignore_errors=True)


@needs_h3
def test_client_against_aioquic(aioquic_server) -> None:
    srv, ca = aioquic_server
    base = f"https://127.0.0.1:{srv.port}"
    before = srv.snapshot()["requests"]
    with Client(http3=True, ca_file=ca, timeout=10) as c:
        for n in (0, 150, 5000, 100_000):
            r = c.get(f"{base}/bytes/{n}")
            assert r.status == 200
            assert r.body == expected_bytes(n)
            assert r.headers["content-length"] == str(n)
        body = bytes(range(256)) * 300
        r = c.request("POST", f"{base}/sink", body=body)
        assert json.loads(r.body) == {"bytes": len(body), "crc32": f"{zlib.crc32(body):08x}"}
        r = c.get(f"{base}/status/404")
        assert r.status == 404 and r.body == b""
    assert srv.snapshot()["requests"] - before == 6


@needs_h3
@pytest.mark.parametrize("conc,streams", [(1, 1), (2, 10)])
def test_generator_against_aioquic(aioquic_server, conc: int, streams: int) -> None:
    srv, _ca = aioquic_server
    before = srv.snapshot()
    r = httpbench.bench(f"https://127.0.0.1:{srv.port}/bytes/150", n=300, concurrency=conc,
                        streams=streams, verify=False, timeout=30, http3=True)
    after = srv.snapshot()
    assert r.successes == 300 and r.errors == 0, r.metadata.get("first_error")
    assert after["requests"] - before["requests"] == 300
    assert after["by_route"].get("bytes", 0) - before["by_route"].get("bytes", 0) == 300


# -- key shares: our ClientHello carries X25519's alone ------------------------------------

def _without_x25519(monkeypatch, side: str) -> None:
    """aioquic's TLS on ``side`` ("server" or "client") without X25519 (the other side
    keeps it)."""
    from aioquic import tls

    init = tls.Context.__init__

    def patched(self, is_client, *a, **k):  # type: ignore[no-untyped-def]
        init(self, is_client, *a, **k)
        if is_client == (side == "client"):
            self._supported_groups = [g for g in self._supported_groups
                                      if g != tls.Group.X25519]

    monkeypatch.setattr(tls.Context, "__init__", patched)


@needs_h3
def test_server_without_x25519_nor_hello_retry_gets_a_second_hello(aioquic_server,
                                                                    monkeypatch) -> None:
    # aioquic's server cannot send a HelloRetryRequest: without X25519 it refuses our
    # one-share ClientHello (handshake_failure); the client then connects again at once
    # offering P-256's share too, and keeps doing so
    srv, ca = aioquic_server
    _without_x25519(monkeypatch, "server")
    base = f"https://127.0.0.1:{srv.port}"
    before = srv.snapshot()["requests"]
    with Client(http3=True, ca_file=ca, timeout=10) as c:
        for n in (150, 5000):
            r = c.get(f"{base}/bytes/{n}")
            assert r.status == 200 and r.body == expected_bytes(n)
    r = httpbench.bench(f"{base}/bytes/150", n=20, concurrency=2, keepalive=False,
                        http3=True, ca_file=ca, timeout=10)
    assert (r.successes, r.errors, r.connections) == (20, 0, 20), r.metadata["first_error"]
    # one refused hello per generator connection, counted as a failed attempt (not a
    # failed request): attempts = opened + failed
    assert r.connect_failures == 2 and r.connect_attempts == 22
    assert srv.snapshot()["requests"] - before == 22


@needs_h3
def test_gnutls_server_without_x25519_answers_with_a_hello_retry(aioquic_server, monkeypatch,
                                                                 tmp_path) -> None:
    # our own server (GnuTLS) with X25519 disabled by its system priority file; this
    # process read its own GnuTLS configuration at start-up and keeps X25519
    from httpbench._server import start_process

    conf = tmp_path / "gnutls.conf"
    conf.write_text("[overrides]\ndisabled-curve = x25519\n")
    monkeypatch.setenv("GNUTLS_SYSTEM_PRIORITY_FILE", str(conf))
    monkeypatch.setenv("GNUTLS_SYSTEM_PRIORITY_FAIL_ON_INVALID", "1")
    with start_process(tls=True, h3=True) as srv:
        monkeypatch.delenv("GNUTLS_SYSTEM_PRIORITY_FILE")
        # the server really lacks X25519: a client with no other group (aioquic, which
        # cannot follow a HelloRetryRequest either) gets no handshake
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
        from _h3peer import Peer

        _without_x25519(monkeypatch, "server")  # (no effect on clients)
        ok = Peer(srv.h3_port, srv.ca_file)
        ok.pump(5, until=lambda: ok.q._handshake_complete)
        assert ok.q._handshake_complete
        from aioquic import tls

        init = tls.Context.__init__

        def x25519_only(self, is_client, *a, **k):  # type: ignore[no-untyped-def]
            init(self, is_client, *a, **k)
            self._supported_groups = [tls.Group.X25519]

        monkeypatch.setattr(tls.Context, "__init__", x25519_only)
        bad = Peer(srv.h3_port, srv.ca_file)
        bad.pump(5, until=lambda: bad.closed_code is not None or bad.q._handshake_complete)
        assert not bad.q._handshake_complete
        monkeypatch.undo()
        # this process kept X25519: an aioquic server with X25519 alone still answers
        # (so below, X25519 was offered and refused, and the server asked for P-256)
        aq, ca = aioquic_server
        monkeypatch.setattr(tls.Context, "__init__", x25519_only)
        with Client(http3=True, ca_file=ca, timeout=10) as c:
            assert c.get(f"https://127.0.0.1:{aq.port}/bytes/5").status == 200
        monkeypatch.undo()
        # ours: X25519 alone in the hello, P-256 listed: the server asks for it
        with Client(http3=True, ca_file=srv.ca_file, timeout=10) as c:
            r = c.get(f"{srv.h3_url}/bytes/150")
            assert r.status == 200 and r.body == expected_bytes(150)
        g = httpbench.bench(f"{srv.h3_url}/bytes/150", n=10, keepalive=False, http3=True,
                            ca_file=srv.ca_file, session_resumption=False)
        assert (g.successes, g.errors, g.connections) == (10, 0, 10)
        assert g.connect_failures == 0  # a HelloRetryRequest, not a second connection
        st = srv.stats()
        # every handshake completed but the X25519-only peer's
        assert (st["h3"]["handshakes"], st["h3"]["handshake_errors"]) == (12, 1)


# -- the server's control stream must begin with SETTINGS --------------------------------

@needs_h3
def test_a_server_control_stream_without_settings_first_is_refused(aioquic_server,
                                                                    monkeypatch) -> None:
    """RFC 9114 6.2.1: a reserved (grease) frame ahead of SETTINGS is H3_MISSING_SETTINGS,
    whatever its type; the same server without it is answered normally."""
    from aioquic.buffer import encode_uint_var
    from aioquic.h3 import connection as h3c

    srv, ca = aioquic_server
    base = f"https://127.0.0.1:{srv.port}"
    with Client(http3=True, ca_file=ca, timeout=10) as c:
        assert c.get(f"{base}/bytes/10").body == expected_bytes(10)
    create = h3c.H3Connection._create_uni_stream

    def grease_first(self, stream_type, push_id=None):  # type: ignore[no-untyped-def]
        sid = create(self, stream_type, push_id)
        if stream_type == h3c.StreamType.CONTROL:  # a reserved type 0x21, empty
            self._quic.send_stream_data(sid, encode_uint_var(0x21) + encode_uint_var(0))
        return sid

    monkeypatch.setattr(h3c.H3Connection, "_create_uni_stream", grease_first)
    with Client(http3=True, ca_file=ca, timeout=10) as c:
        with pytest.raises(httpbench.ProtocolError, match="without SETTINGS"):
            c.get(f"{base}/bytes/10")
