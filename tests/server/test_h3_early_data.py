"""HTTP/3 0-RTT on the embedded server, against aioquic's client: a resumed
connection's GET in early data is answered from it and counted in
``h3.early_data``; a POST in early data gets 425 Too Early (``h3.early_rejected``);
with ``h3_early_data=False`` the tickets allow no early data and every request is
answered after the handshake."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from httpbench import expected_bytes
from httpbench._features import h3_missing

needs_h3 = pytest.mark.skipif(h3_missing() is not None, reason=str(h3_missing()))
needs_aioquic = pytest.mark.skipif(
    __import__("importlib").util.find_spec("aioquic") is None,
    reason="aioquic (the third-party client) is not installed: pip install 'httpbench[h3]'")


async def _one(port: int, ca: str, ticket: Any, method: str, path: str,
               body: bytes | None) -> tuple[int, bytes, Any, bool]:
    """One request on a new connection, sent before the handshake completes (0-RTT when
    the ticket allows it): (status, body, the connection's last ticket, early data accepted)."""
    from aioquic.asyncio import connect
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration

    class Proto(QuicConnectionProtocol):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            self.h3 = H3Connection(self._quic)
            self.status = 0
            self.data = b""
            self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def quic_event_received(self, event: Any) -> None:
            for e in self.h3.handle_event(event):
                if isinstance(e, HeadersReceived):
                    self.status = int(dict(e.headers)[b":status"])
                elif isinstance(e, DataReceived):
                    self.data += e.data
                if getattr(e, "stream_ended", False) and not self.done.done():
                    self.done.set_result(None)

    tickets: list[Any] = []
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost",
                            session_ticket=ticket)
    cfg.load_verify_locations(ca)
    async with connect("127.0.0.1", port, configuration=cfg, create_protocol=Proto,
                       session_ticket_handler=tickets.append, wait_connected=False) as p:
        sid = p._quic.get_next_available_stream_id()
        p.h3.send_headers(sid, [(b":method", method.encode()), (b":scheme", b"https"),
                                (b":authority", b"127.0.0.1"), (b":path", path.encode())],
                          end_stream=body is None)
        if body is not None:
            p.h3.send_data(sid, body, end_stream=True)
        p.transmit()
        await asyncio.wait_for(p.done, 10)
        for _ in range(100):  # the ticket follows the handshake
            if tickets:
                break
            await asyncio.sleep(0.01)
        early = bool(p._quic.tls.early_data_accepted)
    return p.status, p.data, tickets[-1] if tickets else None, early


def _run(srv: Any, steps: list[tuple[str, str, bytes | None]]) -> list[tuple[int, bytes, bool]]:
    async def go() -> list[tuple[int, bytes, bool]]:
        st, body, ticket, early = await _one(srv.h3_port, srv.ca_file, None, "GET", "/bytes/150",
                                             None)
        assert ticket is not None
        out = [(st, body, early)]
        for method, path, data in steps:
            st, body, t, early = await _one(srv.h3_port, srv.ca_file, ticket, method, path, data)
            ticket = t or ticket
            out.append((st, body, early))
        return out

    return asyncio.run(go())


STEPS = [("GET", "/bytes/150", None), ("POST", "/sink", b"x" * 10), ("GET", "/bytes/12000", None)]


@needs_h3
@needs_aioquic
def test_get_in_0rtt_answered_post_refused_425():
    from httpbench._server import start_process

    with start_process(tls=True, h3=True) as srv:
        got = _run(srv, STEPS)
        s = srv.stats()
    assert got == [(200, expected_bytes(150), False), (200, expected_bytes(150), True),
                   (425, b"too early\n", True), (200, expected_bytes(12000), True)]
    h3 = s["h3"]
    assert (h3["handshakes"], h3["resumed"], h3["early_data"], h3["early_rejected"]) == (4, 3, 2, 1)
    assert s["by_status"] == {200: 3, 425: 1}
    assert s["by_route"]["sink"] == 1


@needs_h3
@needs_aioquic
def test_early_data_off_resumes_without_0rtt():
    from httpbench._server import start_process

    with start_process(tls=True, h3=True, h3_early_data=False) as srv:
        got = _run(srv, STEPS)
        s = srv.stats()
    assert got == [(200, expected_bytes(150), False), (200, expected_bytes(150), False),
                   (200, b'{"bytes": 10, "crc32": "8edf4777"}', False),
                   (200, expected_bytes(12000), False)]
    h3 = s["h3"]
    assert (h3["handshakes"], h3["resumed"], h3["early_data"], h3["early_rejected"]) == (4, 3, 0, 0)
    assert s["by_status"] == {200: 4}
