"""pyreqwest (Rust reqwest/hyper): one ``SyncClient`` (sync) or ``Client`` (async).

The server's CA is added as a root certificate (rustls). HTTP/1.1 only is the
library's default; over HTTP/2: ALPN with TLS (``http2(True)``), prior
knowledge without. The sync client is thread-safe and multiplexes the
threads' requests on one connection. File uploads are a body stream of
64 KiB blocks with the length announced.
"""

from __future__ import annotations

from . import CHUNK, Adapter, sse_

__all__ = ["PyreqwestAdapter", "PyreqwestAsyncAdapter"]


def _file_chunks(path: str):  # noqa: ANN202
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk


class PyreqwestAdapter(Adapter):
    """``client.request(m, url)...build().send()``; downloads read the body reader's chunks."""

    name = "pyreqwest"
    dist = "pyreqwest"
    pip_name = "pyreqwest"
    modules = ("pyreqwest",)
    h2_mode = "shared"
    sse = True  # a streamed response's chunks split into lines

    def _configure(self, b):  # noqa: ANN001, ANN202
        from datetime import timedelta

        b = b.timeout(timedelta(seconds=self.timeout))
        if self.tls and self.ca_file:
            with open(self.ca_file, "rb") as f:
                b = b.add_root_certificate_pem(f.read())
        if self.http2:
            b = b.http2(True) if self.tls else b.http2_prior_knowledge()
        if self.body_file is not None:
            self.headers["Content-Length"] = str(self.body_size)
        return b.build()

    def _setup(self) -> None:
        from pyreqwest.client import SyncClientBuilder

        self.client = self._configure(SyncClientBuilder())

    def _builder(self):  # noqa: ANN202
        rb = self.client.request(self.method, self.url)
        if self.headers:
            rb = rb.headers(self.headers)
        if self.body is not None:
            rb = rb.body_bytes(self.body)
        elif self.body_file is not None:
            rb = rb.body_stream(_file_chunks(self.body_file))
        return rb

    def request(self) -> None:
        if self.events:
            return sse_.read_pyreqwest(self)
        if self.download_path is not None:
            with self._builder().build_streamed() as r, open(self.download_path, "wb") as f:
                reader = r.body_reader
                while (chunk := reader.read_chunk()) is not None:
                    f.write(chunk)
        else:
            r = self._builder().build().send()
            self.last_body = bytes(r.bytes())
        self.last_status = r.status

    def close(self) -> None:
        self.client.close()


class PyreqwestAsyncAdapter(PyreqwestAdapter):
    """``Client`` on the worker's one event loop."""

    name = "pyreqwest-async"
    sse = False
    sse_reason = "the event stream reader is wired for pyreqwest's sync client (pyreqwest)"
    kind = "async"
    h2_mode = "async"

    async def _asetup(self) -> None:
        from pyreqwest.client import ClientBuilder

        self.client = self._configure(ClientBuilder())

    async def request(self) -> None:  # type: ignore[override]
        if self.download_path is not None:
            async with self._builder().build_streamed() as r:
                reader = r.body_reader
                with open(self.download_path, "wb") as f:
                    while (chunk := await reader.read_chunk()) is not None:
                        f.write(chunk)
        else:
            r = await self._builder().build().send()
            self.last_body = bytes(await r.bytes())
        self.last_status = r.status

    async def aclose(self) -> None:
        await self.client.close()
