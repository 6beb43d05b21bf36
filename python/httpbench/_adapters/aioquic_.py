"""aioquic's HTTP/3 client: one QUIC connection, one request stream per request.

aioquic ships the protocol, not a client API: this is the request loop of its
own example client (``H3Connection`` on a ``QuicConnectionProtocol``), the
least a user of the library writes. HTTP/3 only, so it runs the h3 scenarios.
"""

from __future__ import annotations

import asyncio
from typing import Any

from . import Adapter

__all__ = ["AioquicAdapter"]


class AioquicAdapter(Adapter):
    """One connection opened in setup; each request waits for its stream to end."""

    name = "aioquic"
    kind = "async"
    dist = "aioquic"
    pip_name = "aioquic"
    modules = ("aioquic",)
    h3 = True
    h3_only = True

    async def _asetup(self) -> None:
        if not self.http3 or not self.tls:
            from . import AdapterUnavailable

            raise AdapterUnavailable(self.name, "aioquic's client speaks HTTP/3 only")
        from aioquic.asyncio import QuicConnectionProtocol, connect
        from aioquic.h3.connection import H3_ALPN, H3Connection
        from aioquic.h3.events import DataReceived, HeadersReceived
        from aioquic.quic.configuration import QuicConfiguration

        class Client(QuicConnectionProtocol):
            def __init__(self, *a: Any, **kw: Any) -> None:
                super().__init__(*a, **kw)
                self.h3 = H3Connection(self._quic)
                self.waiting: dict[int, tuple[asyncio.Future[Any], list[Any]]] = {}

            def quic_event_received(self, event: Any) -> None:
                for ev in self.h3.handle_event(event):
                    w = self.waiting.get(getattr(ev, "stream_id", -1))
                    if w is None:
                        continue
                    if isinstance(ev, HeadersReceived):
                        w[1][0] = ev.headers
                    elif isinstance(ev, DataReceived):
                        w[1][1].append(ev.data)
                    if getattr(ev, "stream_ended", False):
                        del self.waiting[ev.stream_id]
                        if not w[0].done():
                            w[0].set_result(w[1])

        cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
        if self.ca_file:
            cfg.load_verify_locations(self.ca_file)
        self._connect = lambda: connect(self.host, self.port, configuration=cfg,
                                        create_protocol=Client)
        await self._open()
        self.authority = f"{self.host}:{self.port}".encode()
        self.req_headers = [(b":method", self.method.encode()), (b":scheme", b"https"),
                            (b":authority", self.authority), (b":path", self.path.encode()),
                            (b"user-agent", b"aioquic")]
        if self.body is not None or self.body_file is not None:
            self.req_headers.append((b"content-length", str(self.body_size).encode()))

    async def _open(self) -> None:
        self._cm = self._connect()
        self.client = await self._cm.__aenter__()

    async def request(self) -> None:
        c = self.client
        if c._closed.is_set():  # idle timeout while other clients ran: reconnect, as users do
            await self.aclose()
            await self._open()
            c = self.client
        sid = c._quic.get_next_available_stream_id()
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        got: list[Any] = [None, []]
        c.waiting[sid] = (fut, got)
        body = self.body
        if self.body_file is not None:
            with open(self.body_file, "rb") as f:
                body = f.read()
        c.h3.send_headers(sid, self.req_headers, end_stream=not body)
        if body:
            c.h3.send_data(sid, body, end_stream=True)
        c.transmit()
        # the timeout bounds a silence, as a read timeout does: a slow transfer that
        # keeps receiving data is not cut off
        while True:
            seen = len(got[1])
            try:
                headers, chunks = await asyncio.wait_for(asyncio.shield(fut), self.timeout)
                break
            except asyncio.TimeoutError:
                if len(got[1]) == seen:
                    c.waiting.pop(sid, None)
                    raise
        status = 0
        for k, v in headers or ():
            if k == b":status":
                status = int(v)
        self.last_status = status
        if self.download_path is not None:
            with open(self.download_path, "wb") as f:
                for ch in chunks:
                    f.write(ch)
        else:
            self.last_body = b"".join(chunks)

    async def aclose(self) -> None:
        cm = getattr(self, "_cm", None)
        if cm is not None:
            self._cm = None
            await cm.__aexit__(None, None, None)
