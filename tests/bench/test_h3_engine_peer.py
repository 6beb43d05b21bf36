"""The HTTP/3 load generator against a small aioquic server of the test's own (not the
embedded listener): TLS session resumption with the server's session tickets, and
the typed errors of a server that resets every request stream (``rst_stream``) or
closes the QUIC connection on the first request (``closed``), each counted exactly."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import subprocess
import tempfile
import threading
from typing import Any

import httpbench
import pytest

pytestmark = [
    pytest.mark.skipif(not httpbench.features()["http3-client"],
                       reason="built without the HTTP/3 client"),
    pytest.mark.skipif(importlib.util.find_spec("aioquic") is None,
                       reason="the peer is aioquic's server (pip install aioquic)"),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl CLI not found"),
]


def _self_signed(d: str) -> tuple[str, str]:
    """A P-256 certificate for 127.0.0.1/localhost, its own CA: (cert, key)."""
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", key,
                    "-out", cert], check=True, capture_output=True, timeout=60)
    return cert, key

BODY = b"0123456789"


class Peer:
    """aioquic HTTP/3 server on 127.0.0.1 in its own thread. mode "ok": 200 with BODY;
    "reset": RESET_STREAM (H3_REQUEST_REJECTED) on each request stream; "close":
    CONNECTION_CLOSE (H3_INTERNAL_ERROR) on the first request; "goaway": 200s, and
    after the third request of a connection a GOAWAY letting no later stream in, then
    CONNECTION_CLOSE (H3_NO_ERROR) 50 ms later; "nostreams": 200s, but its transport
    parameters allow no request stream (initial_max_streams_bidi 0). Issues session tickets
    (one use each) when tickets=True; ``requests`` counts the requests it saw."""

    def __init__(self, mode: str, tickets: bool = True) -> None:
        self.dir = tempfile.mkdtemp(prefix="httpbench-h3peer-")
        self.chain, self.key = _self_signed(self.dir)
        self.ca = self.chain
        self.mode, self.tickets = mode, tickets
        self.requests = 0
        self.port = 0
        self._store: dict[bytes, Any] = {}
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Peer:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def _run(self) -> None:
        from aioquic.asyncio import QuicConnectionProtocol, serve
        from aioquic.h3.connection import H3_ALPN, H3Connection
        from aioquic.h3.events import HeadersReceived
        from aioquic.quic.configuration import QuicConfiguration

        peer = self

        class Proto(QuicConnectionProtocol):
            def __init__(self, *a: Any, **k: Any) -> None:
                super().__init__(*a, **k)
                self.h3 = H3Connection(self._quic)
                self.served = 0
                if peer.mode == "nostreams":
                    self._quic._local_max_streams_bidi.value = 0

            def goaway(self, last: int) -> None:
                from aioquic.buffer import encode_uint_var
                from aioquic.h3.connection import FrameType, encode_frame

                self._quic.send_stream_data(self.h3._local_control_stream_id,
                                            encode_frame(FrameType.GOAWAY, encode_uint_var(last)))
                self.transmit()
                asyncio.get_event_loop().call_later(0.05, self.close_now)

            def close_now(self) -> None:
                self._quic.close(error_code=0x100)  # H3_NO_ERROR
                self.transmit()

            def quic_event_received(self, event: Any) -> None:
                for ev in self.h3.handle_event(event):
                    if not isinstance(ev, HeadersReceived):
                        continue
                    peer.requests += 1
                    if peer.mode == "reset":
                        self._quic.reset_stream(ev.stream_id, 0x10B)  # H3_REQUEST_REJECTED
                    elif peer.mode == "close":
                        self._quic.close(error_code=0x102)  # H3_INTERNAL_ERROR
                    else:
                        self.h3.send_headers(ev.stream_id, [(b":status", b"200"),
                                                            (b"server", b"peer")])
                        self.h3.send_data(ev.stream_id, BODY, end_stream=True)
                        self.served += 1
                        if peer.mode == "goaway" and self.served == 3:
                            self.goaway(ev.stream_id + 4)
                self.transmit()

        asyncio.set_event_loop(self._loop)
        cfg = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
        cfg.load_cert_chain(self.chain, self.key)
        kw = {}
        if self.tickets:
            kw = dict(session_ticket_handler=lambda t: self._store.__setitem__(t.ticket, t),
                      session_ticket_fetcher=lambda label: self._store.pop(label, None))
        srv = self._loop.run_until_complete(
            serve("127.0.0.1", 0, configuration=cfg, create_protocol=Proto, **kw))
        self.port = srv._transport.get_extra_info("socket").getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            srv.close()
            self._loop.close()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/"


def test_reconnects_resume_the_tls_session():
    with Peer("ok") as p:
        r = httpbench.bench(p.url, n=8, keepalive=False, http3=True, ca_file=p.ca, timeout=5)
        assert (r.successes, r.errors) == (8, 0), r.metadata["first_error"]
        assert p.requests == 8 and r.connections == 8
        # the first connection has no ticket yet; each later one offers its predecessor's
        assert r.metadata["tls_resumed"] == 7
        assert r.tls.count == 8 and r.metadata["body_bytes_in"] == 8 * len(BODY)
        off = httpbench.bench(p.url, n=4, keepalive=False, http3=True, ca_file=p.ca,
                              session_resumption=False)
        assert (off.successes, off.metadata["tls_resumed"]) == (4, 0)


def test_without_tickets_every_handshake_is_full():
    with Peer("ok", tickets=False) as p:
        r = httpbench.bench(p.url, n=4, keepalive=False, http3=True, ca_file=p.ca)
        assert (r.successes, r.metadata["tls_resumed"], r.connections) == (4, 0, 4)


def test_reset_streams_are_rst_stream_errors():
    with Peer("reset") as p:
        r = httpbench.bench(p.url, n=12, concurrency=2, streams=3, http3=True, ca_file=p.ca,
                            timeout=5)
        assert r.responses == 0 and r.errors == 12 == r.error_counts["rst_stream"]
        assert p.requests == 12
        assert "reset the stream" in r.metadata["first_error"]
        assert r.connections == 2  # a reset stream leaves its connection open


def test_goaway_drains_the_connection_and_the_next_one_takes_over():
    with Peer("goaway") as p:
        r = httpbench.bench(p.url, n=20, http3=True, ca_file=p.ca, timeout=5)
        assert (r.successes, r.errors) == (20, 0), r.metadata["first_error"]
        assert p.requests == 20
        assert r.connections == 7  # 3 requests per connection, then a new one
        assert r.reconnects == 6


def test_goaway_stream_id_honoured_with_streams_in_flight():
    """-m6: when the GOAWAY comes, the streams from its ID on were not processed: they
    end as goaway errors at once, none is counted as closed by the close that follows."""
    with Peer("goaway") as p:
        r = httpbench.bench(p.url, n=60, streams=6, http3=True, ca_file=p.ca, timeout=5)
    assert r.error_counts.get("closed", 0) == 0, (r.error_counts, r.metadata["first_error"])
    assert r.error_counts.get("goaway", 0) > 0, r.error_counts
    assert r.successes + r.error_counts["goaway"] == r.successes + r.errors
    assert "GOAWAY" in r.metadata["first_error"]


def test_a_server_allowing_no_streams_is_a_typed_error():
    with Peer("nostreams") as p:
        r = httpbench.bench(p.url, duration=0.5, http3=True, ca_file=p.ca, timeout=2)
    assert r.responses == 0 and r.errors > 0 and r.error_counts.get("protocol", 0) > 0, \
        r.error_counts
    assert "allows no request streams" in r.metadata["first_error"]


def test_server_closing_the_connection_fails_its_requests_as_closed():
    with Peer("close") as p:
        r = httpbench.bench(p.url, n=3, http3=True, ca_file=p.ca, timeout=5)
        assert r.responses == 0 and r.errors == 3 == r.error_counts["closed"]
        assert p.requests == 3 and r.connections == 3
        assert "closed the QUIC connection (application error 0x102)" in \
            r.metadata["first_error"]


def test_a_handshake_that_never_completes_is_a_typed_connect_failure():
    """A UDP port that swallows every datagram: the run stops after its first second
    without a connection, with the handshake in progress counted as a connect failure
    and named in first_error (it was a run with every error count 0)."""
    import socket

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    try:
        r = httpbench.bench(f"https://127.0.0.1:{s.getsockname()[1]}/", duration=3, http3=True,
                            verify=False)
    finally:
        s.close()
    assert r.responses == 0 and r.connect_failures >= 1
    assert r.metadata["first_error"].startswith("connect: no QUIC handshake before the run "
                                                "ended"), r.metadata["first_error"]


def test_client_sends_again_what_a_goaway_left_unprocessed():
    """Client(http3=True).get_many of 8 against a server that GOAWAYs after its third
    request: the requests from the GOAWAY's stream ID on go again on new connections
    and every one gets its answer."""
    with Peer("goaway") as p, httpbench.Client(http3=True, ca_file=p.ca, timeout=5) as c:
        rs = c.get_many([p.url] * 8)
        assert [r.status for r in rs] == [200] * 8 and all(r.body == BODY for r in rs)
