"""aiosonic: one ``HTTPClient`` (its ``TCPConnector`` pool) on the worker's loop.

TLS is verified with an SSL context trusting the server's CA. Its HTTP/2
(``http2=True``) is negotiated by ALPN only: h2c scenarios skip it. File
uploads are an async generator of 64 KiB blocks, sent chunked (aiosonic
sends every iterator body chunked).
"""

from __future__ import annotations

from . import CHUNK, Adapter, AdapterUnavailable

__all__ = ["AiosonicAdapter"]


class AiosonicAdapter(Adapter):
    """``client.request(...)`` then ``content()``; downloads via ``client.stream(...)`` and
    ``read_chunks()``."""

    name = "aiosonic"
    kind = "async"
    dist = "aiosonic"
    pip_name = "aiosonic"
    modules = ("aiosonic",)
    h2_mode = "async"

    async def _asetup(self) -> None:
        import aiosonic

        if self.http2 and not self.tls:
            raise AdapterUnavailable(self.name, "no h2c: aiosonic's HTTP/2 is negotiated by "
                                     "TLS ALPN only (no prior knowledge)")
        from aiosonic.pools import PoolConfig

        # The default recycles a connection after 1000 requests, and past that reconnects
        # for every request (the connection's count is never reset): no request limit.
        conn = aiosonic.TCPConnector(pool_configs={":default": PoolConfig(max_conn_requests=None)},
                                     http2=self.http2)
        self.client = aiosonic.HTTPClient(connector=conn, http2=self.http2)
        self.kw: dict = {"timeouts": aiosonic.Timeouts(request_timeout=self.timeout)}
        if self.tls:
            self.kw["ssl"] = self.ssl_context()
        if self.headers:
            self.kw["headers"] = self.headers
        if self.body is not None:
            self.kw["data"] = self.body

    async def _file_chunks(self):  # noqa: ANN202
        with open(self.body_file, "rb") as f:  # type: ignore[arg-type]
            while chunk := f.read(CHUNK):
                yield chunk

    async def request(self) -> None:  # type: ignore[override]
        kw = self.kw
        if self.body_file is not None:
            kw = dict(kw, data=self._file_chunks())
        if self.download_path is not None:
            async with self.client.stream(self.method, self.url, **kw) as r:
                with open(self.download_path, "wb") as f:
                    async for chunk in r.read_chunks():
                        f.write(chunk)
        else:
            r = await self.client.request(self.url, self.method, **kw)
            self.last_body = await r.content()
        self.last_status = r.status_code

    async def aclose(self) -> None:
        await self.client.aclose()
