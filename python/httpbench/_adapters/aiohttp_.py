"""aiohttp: one ``ClientSession`` (default ``TCPConnector``) on the worker's loop."""

from __future__ import annotations

from . import CHUNK, Adapter, sse_

__all__ = ["AiohttpAdapter"]


class AiohttpAdapter(Adapter):
    """``session.request(...)`` then ``read()``; downloads via ``iter_chunked``."""

    name = "aiohttp"
    kind = "async"
    dist = "aiohttp"
    pip_name = "aiohttp"
    modules = ("aiohttp",)
    h2_reason = "aiohttp's client speaks HTTP/1.1 only"
    sse = True

    async def _asetup(self) -> None:
        import aiohttp

        conn = aiohttp.TCPConnector(ssl=self.ssl_context() if self.tls else None)
        self.session = aiohttp.ClientSession(
            connector=conn, timeout=aiohttp.ClientTimeout(total=self.timeout)
        )
        self.hdrs = self.headers or None

    async def request(self) -> None:  # type: ignore[override]
        if self.events:
            return await sse_.aread_aiohttp(self)
        s = self.session
        if self.body_file is not None:
            with open(self.body_file, "rb") as f:
                async with s.request(self.method, self.url, data=f, headers=self.hdrs) as r:
                    self.last_body = await r.read()
        elif self.download_path is not None:
            async with s.request(self.method, self.url, headers=self.hdrs) as r:
                with open(self.download_path, "wb") as f:
                    async for chunk in r.content.iter_chunked(CHUNK):
                        f.write(chunk)
        else:
            async with s.request(self.method, self.url, data=self.body, headers=self.hdrs) as r:
                self.last_body = await r.read()
        self.last_status = r.status

    async def aclose(self) -> None:
        await self.session.close()
