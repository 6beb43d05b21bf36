"""WebSocket clients: one connection each, set up once; a request is one message.

``ws-echo-*`` scenarios: ``request()`` sends the scenario's message and waits for
its echo; ``ws-push-*``: it receives the next message the server pushes. Each
client in its own idiom: websockets (sync and asyncio), aiohttp's
``ws_connect``, picows (a listener callback resolving a future per message),
wsproto (the sans-I/O state machine over a plain socket), curl_cffi's
``Session.ws_connect`` (libcurl's WebSocket API: ``send`` then ``recv`` of whole
messages). Compression off everywhere (the figures compare framing, not zlib).
"""

from __future__ import annotations

import asyncio
import collections
import socket
from typing import Any
from urllib.parse import urlsplit

from . import Adapter, AdapterUnavailable

__all__ = ["WebsocketsAdapter", "WebsocketsAsyncAdapter", "AiohttpWsAdapter", "PicowsAdapter",
           "WsprotoAdapter", "CurlCffiWsAdapter"]


class _WsAdapter(Adapter):
    ws_only = True

    def _ws_url(self) -> str:
        return ("wss" if self.tls else "ws") + self.url[len(self.scheme):]

    def _message(self) -> bytes:
        return b"x" * self.ws_size

    def _done(self, got: Any) -> None:
        self.last_body = got if isinstance(got, bytes) else str(got).encode()
        self.last_status = 200


class WebsocketsAdapter(_WsAdapter):
    """``websockets.sync.client.connect``: ``send`` then ``recv``."""

    name = "websockets"
    dist = "websockets"
    pip_name = "websockets"
    modules = ("websockets",)

    def _setup(self) -> None:
        from websockets.sync.client import connect

        self.msg = self._message()
        self.conn = connect(self._ws_url(), compression=None, max_size=None,
                            ssl=self.ssl_context() if self.tls else None,
                            open_timeout=self.timeout)

    def request(self) -> None:
        if self.ws_mode == "echo":
            self.conn.send(self.msg)
        self._done(self.conn.recv(self.timeout))

    def close(self) -> None:
        self.conn.close()


class WebsocketsAsyncAdapter(_WsAdapter):
    """``websockets.asyncio.client.connect`` on the worker's loop."""

    name = "websockets-async"
    kind = "async"
    dist = "websockets"
    pip_name = "websockets"
    modules = ("websockets",)

    async def _asetup(self) -> None:
        from websockets.asyncio.client import connect

        self.msg = self._message()
        self.conn = await connect(self._ws_url(), compression=None, max_size=None,
                                  ssl=self.ssl_context() if self.tls else None,
                                  open_timeout=self.timeout)

    async def request(self) -> None:  # type: ignore[override]
        if self.ws_mode == "echo":
            await self.conn.send(self.msg)
        self._done(await self.conn.recv())

    async def aclose(self) -> None:
        await self.conn.close()


class AiohttpWsAdapter(_WsAdapter):
    """``ClientSession.ws_connect``: ``send_bytes`` then ``receive``."""

    name = "aiohttp-ws"
    kind = "async"
    dist = "aiohttp"
    pip_name = "aiohttp"
    modules = ("aiohttp",)

    async def _asetup(self) -> None:
        import aiohttp

        self.msg = self._message()
        self.session = aiohttp.ClientSession()
        self.conn = await self.session.ws_connect(
            self._ws_url(), ssl=self.ssl_context() if self.tls else None, compress=0,
            max_msg_size=0, autoping=True)

    async def request(self) -> None:  # type: ignore[override]
        if self.ws_mode == "echo":
            await self.conn.send_bytes(self.msg)
        m = await self.conn.receive(self.timeout)
        self._done(m.data)

    async def aclose(self) -> None:
        await self.conn.close()
        await self.session.close()


class PicowsAdapter(_WsAdapter):
    """``picows.ws_connect`` with a listener that hands each message to a future."""

    name = "picows"
    kind = "async"
    dist = "picows"
    pip_name = "picows"
    modules = ("picows",)

    async def _asetup(self) -> None:
        from picows import WSListener, WSMsgType, ws_connect

        self.msg = self._message()
        self.binary = WSMsgType.BINARY
        owner = self
        owner.waiter = None
        owner.queued = collections.deque()

        class Listener(WSListener):  # type: ignore[misc]
            def on_ws_frame(self, transport: Any, frame: Any) -> None:
                if frame.msg_type not in (WSMsgType.BINARY, WSMsgType.TEXT):
                    return
                data = frame.get_payload_as_bytes()
                w = owner.waiter
                if w is not None and not w.done():
                    w.set_result(data)
                else:  # pushed before anyone waited
                    owner.queued.append(data)

        self.transport, _ = await ws_connect(
            Listener, self._ws_url(), ssl_context=self.ssl_context() if self.tls else None,
            websocket_handshake_timeout=self.timeout)

    async def request(self) -> None:  # type: ignore[override]
        if self.queued:
            self._done(self.queued.popleft())
            return
        self.waiter = asyncio.get_running_loop().create_future()
        if self.ws_mode == "echo":
            self.transport.send(self.binary, self.msg)
        self._done(await asyncio.wait_for(self.waiter, self.timeout))

    async def aclose(self) -> None:
        self.transport.disconnect()
        await self.transport.wait_disconnected()


class WsprotoAdapter(_WsAdapter):
    """wsproto's ``WSConnection`` over a blocking socket (TLS by ``ssl``)."""

    name = "wsproto"
    dist = "wsproto"
    pip_name = "wsproto"
    modules = ("wsproto",)

    def _setup(self) -> None:
        from wsproto import ConnectionType, WSConnection
        from wsproto.events import AcceptConnection, Request

        self.msg = self._message()
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls:
            sock = self.ssl_context().wrap_socket(sock, server_hostname=self.host)
        self.sock = sock
        self.conn = WSConnection(ConnectionType.CLIENT)
        target = urlsplit(self.url)
        path = target.path + (f"?{target.query}" if target.query else "")
        sock.sendall(self.conn.send(Request(host=f"{self.host}:{self.port}", target=path)))
        for ev in self._events():
            if isinstance(ev, AcceptConnection):
                return
            raise AdapterUnavailable(self.name, f"upgrade refused: {ev!r}")

    def _events(self):  # noqa: ANN202
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("server closed the connection")
            self.conn.receive_data(data)
            yield from self.conn.events()

    def request(self) -> None:
        from wsproto.events import BytesMessage, Message, Ping, TextMessage

        if self.ws_mode == "echo":
            self.sock.sendall(self.conn.send(Message(data=self.msg)))
        parts: list[bytes] = []
        for ev in self._pending_or_events():
            if isinstance(ev, (BytesMessage, TextMessage)):
                parts.append(ev.data if isinstance(ev.data, bytes) else ev.data.encode())
                if ev.message_finished:
                    self._done(b"".join(parts))
                    return
            elif isinstance(ev, Ping):
                self.sock.sendall(self.conn.send(ev.response()))

    def _pending_or_events(self):  # noqa: ANN202
        # events already parsed (a read may carry several pushed messages) come first
        yield from self.conn.events()
        yield from self._events()

    def close(self) -> None:
        from wsproto.events import CloseConnection

        try:
            self.sock.sendall(self.conn.send(CloseConnection(code=1000)))
        except Exception:  # closing a broken connection: nothing to say goodbye on
            pass
        self.sock.close()


class CurlCffiWsAdapter(_WsAdapter):
    """curl_cffi's ``Session.ws_connect`` (libcurl's WebSocket API): ``send`` then
    ``recv``, which hands over whole messages (libcurl reassembles fragments)."""

    name = "curl_cffi-ws"
    dist = "curl_cffi"
    pip_name = "curl_cffi"
    modules = ("curl_cffi",)

    def _setup(self) -> None:
        from curl_cffi.requests import Session

        self.msg = self._message()
        self.session = Session()
        verify: Any = (self.ca_file or True) if self.tls else True
        self.conn = self.session.ws_connect(self._ws_url(), verify=verify, timeout=self.timeout)

    def request(self) -> None:
        if self.ws_mode == "echo":
            self.conn.send(self.msg)
        data, _flags = self.conn.recv(timeout=self.timeout)
        self._done(data)

    def close(self) -> None:
        try:
            self.conn.close()
        finally:
            self.session.close()
