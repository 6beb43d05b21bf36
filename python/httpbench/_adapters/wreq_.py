"""wreq (formerly rnet; Rust, BoringSSL): ``wreq.blocking.Client`` (sync) or
``wreq.Client`` (async), no browser emulation.

The server's CA is the verification store (``tls_verify=Path``). The protocol
is declared: ``http1_only`` for HTTP/1.1 scenarios (it would negotiate h2
over TLS by ALPN), ``http2_only`` for HTTP/2 ones (prior knowledge on
``http://``). The blocking client is thread-safe and multiplexes the threads'
requests on one connection. File uploads are a generator of 64 KiB blocks
with the length announced.
"""

from __future__ import annotations

from . import CHUNK, Adapter, sse_

__all__ = ["WreqAdapter", "WreqAsyncAdapter"]


class WreqAdapter(Adapter):
    """``client.request(Method, url, ...)``; downloads iterate ``response.stream()``."""

    name = "wreq"
    dist = "wreq"
    pip_name = "wreq"
    modules = ("wreq",)
    h2_mode = "shared"
    sse = True  # a streamed response's chunks split into lines

    def _client_kwargs(self) -> dict:
        from datetime import timedelta
        from pathlib import Path

        import wreq

        kw: dict = {"timeout": timedelta(seconds=self.timeout)}
        if self.tls and self.ca_file:
            kw["tls_verify"] = Path(self.ca_file)
        kw["http2_only" if self.http2 else "http1_only"] = True
        self.meth = getattr(wreq.Method, self.method)
        if self.body_file is not None:
            self.headers["Content-Length"] = str(self.body_size)
        self.kw: dict = {"headers": self.headers} if self.headers else {}
        if self.body is not None:
            self.kw["body"] = self.body
        return kw

    def _setup(self) -> None:
        import wreq.blocking

        self.client = wreq.blocking.Client(**self._client_kwargs())

    def _file_chunks(self):  # noqa: ANN202
        with open(self.body_file, "rb") as f:  # type: ignore[arg-type]
            while chunk := f.read(CHUNK):
                yield chunk

    def request(self) -> None:
        if self.events:
            return sse_.read_wreq(self)
        kw = self.kw
        if self.body_file is not None:
            kw = dict(kw, body=self._file_chunks())
        with self.client.request(self.meth, self.url, **kw) as r:
            if self.download_path is not None:
                with open(self.download_path, "wb") as f:
                    for chunk in r.stream():
                        f.write(chunk)
            else:
                self.last_body = bytes(r.bytes())
            self.last_status = r.status.as_int()

    def close(self) -> None:
        self.client.close()


class WreqAsyncAdapter(WreqAdapter):
    """``wreq.Client`` on the worker's one event loop."""

    name = "wreq-async"
    sse = False
    sse_reason = "the event stream reader is wired for wreq's sync client (wreq)"
    kind = "async"
    h2_mode = "async"

    async def _asetup(self) -> None:
        import wreq

        self.client = wreq.Client(**self._client_kwargs())

    async def _afile_chunks(self):  # noqa: ANN202
        with open(self.body_file, "rb") as f:  # type: ignore[arg-type]
            while chunk := f.read(CHUNK):
                yield chunk

    async def request(self) -> None:  # type: ignore[override]
        kw = self.kw
        if self.body_file is not None:
            kw = dict(kw, body=self._afile_chunks())
        async with await self.client.request(self.meth, self.url, **kw) as r:
            if self.download_path is not None:
                with open(self.download_path, "wb") as f:
                    async for chunk in r.stream():
                        f.write(chunk)
            else:
                self.last_body = bytes(await r.bytes())
            self.last_status = r.status.as_int()

    async def aclose(self) -> None:
        self.client.close()
