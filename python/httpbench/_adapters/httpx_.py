"""httpx: ``Client`` (sync) and ``AsyncClient`` (async), one each.

Over HTTP/2 (``http2=True``, the ``h2`` package): ``AsyncClient`` keeps the
scenario's requests in flight as coroutines gathered on one client;
``Client`` speaks HTTP/2 one request at a time (shared by threads over h2 it
is not thread-safe).
Plain ``http://`` uses prior knowledge (``http1=False``).
"""

from __future__ import annotations

from . import CHUNK, Adapter, AdapterUnavailable, sse_

__all__ = ["HttpxAdapter", "HttpxAsyncAdapter"]


class HttpxAdapter(Adapter):
    """``httpx.Client``; file bodies are passed as the file object (httpx reads 64 KiB blocks)."""

    name = "httpx"
    dist = "httpx"
    pip_name = "httpx"
    modules = ("httpx",)
    _lib = "httpx"  # forks with httpx's API (httpx2, httpxyz) change only this
    # Shared by threads over HTTP/2, httpx's sync Client loses streams (read timeouts)
    # and interleaves frames (GOAWAY PROTOCOL_ERROR from nginx): multiplexing is
    # measured with httpx-async instead.
    h2_mode = "single"
    sse = True  # with httpx-sse when installed (httpx only), else iter_lines
    h2_reason = ("httpx's sync Client is not thread-safe over HTTP/2 (shared by threads it "
                 "loses streams); httpx-async measures httpx's multiplexing")

    def _client_kwargs(self) -> dict:
        import importlib
        import importlib.util

        self.lib = importlib.import_module(self._lib)
        if self.lib.__name__ != self._lib:
            # httpxyz registers itself as `httpx` when imported first (its pytest plugin does)
            raise AdapterUnavailable(self.name, f"'{self._lib}' in this process is "
                                     f"{self.lib.__name__} {self.lib.__version__}, not "
                                     f"{self._lib}")
        kw: dict = {"timeout": self.lib.Timeout(self.timeout)}
        if self.tls:
            kw["verify"] = self.ssl_context()
        if self.http2:
            import importlib.util

            if importlib.util.find_spec("h2") is None:
                raise AdapterUnavailable(self.name, f"{self._lib} needs the 'h2' package for "
                                         "HTTP/2", f"{self.pip_name}[http2]")
            kw["http2"] = True
            if not self.tls:
                kw["http1"] = False  # h2c: prior knowledge (httpx has no Upgrade)
        self.sse_lib = None
        if self.events and self._lib == "httpx" and importlib.util.find_spec("httpx_sse"):
            self.sse_lib = importlib.import_module("httpx_sse")
        return kw

    def _setup(self) -> None:
        kw = self._client_kwargs()
        self.client = self.lib.Client(**kw)
        self.hdrs = self.headers or None

    def request(self) -> None:
        if self.events:
            return sse_.read_httpx(self)
        c = self.client
        if self.body_file is not None:
            with open(self.body_file, "rb") as f:
                r = c.request(self.method, self.url, content=f, headers=self.hdrs)
            self.last_body = r.content
        elif self.download_path is not None:
            with c.stream(self.method, self.url, headers=self.hdrs) as r:
                with open(self.download_path, "wb") as f:
                    for chunk in r.iter_bytes():
                        f.write(chunk)
        else:
            r = c.request(self.method, self.url, content=self.body, headers=self.hdrs)
            self.last_body = r.content
        self.last_status = r.status_code

    def close(self) -> None:
        self.client.close()


class HttpxAsyncAdapter(HttpxAdapter):
    """``httpx.AsyncClient`` on the worker's one event loop (pool shared by in-flight requests)."""

    name = "httpx-async"
    kind = "async"
    h2_mode = "async"

    async def _asetup(self) -> None:
        kw = self._client_kwargs()
        self.client = self.lib.AsyncClient(**kw)
        self.hdrs = dict(self.headers)
        if self.body_file is not None:
            # An async client needs an async body; a sync file would be refused.
            self.hdrs["Content-Length"] = str(self.body_size)

    async def _file_chunks(self):  # noqa: ANN202
        with open(self.body_file, "rb") as f:  # type: ignore[arg-type]
            while chunk := f.read(CHUNK):
                yield chunk

    async def request(self) -> None:  # type: ignore[override]
        if self.events:
            return await sse_.aread_httpx(self)
        c = self.client
        if self.body_file is not None:
            r = await c.request(self.method, self.url, content=self._file_chunks(),
                                headers=self.hdrs)
            self.last_body = r.content
        elif self.download_path is not None:
            async with c.stream(self.method, self.url, headers=self.hdrs) as r:
                with open(self.download_path, "wb") as f:
                    async for chunk in r.aiter_bytes():
                        f.write(chunk)
        else:
            r = await c.request(self.method, self.url, content=self.body, headers=self.hdrs)
            self.last_body = r.content
        self.last_status = r.status_code

    async def aclose(self) -> None:
        await self.client.aclose()
