"""primp (Rust reqwest/rustls): one ``Client`` (sync) or ``AsyncClient`` (async), no
impersonation.

The server's CA is ``ca_cert_file``. Over HTTP/2: ``http2_only`` (prior
knowledge on ``http://``, ALPN h2 on ``https://``); the sync client is
thread-safe and multiplexes the threads' requests on one connection. primp
has no HTTP/1.1-only switch, so over TLS it negotiates h2 by ALPN whatever
the scenario: HTTP/1.1 scenarios over TLS skip it. Request bodies are bytes
only (``files=`` is multipart): a file upload reads the file into memory per
request.
"""

from __future__ import annotations

from . import CHUNK, Adapter, AdapterUnavailable

__all__ = ["PrimpAdapter", "PrimpAsyncAdapter"]


class PrimpAdapter(Adapter):
    """``client.request(...)``; downloads via ``stream=True`` + ``iter_bytes``."""

    name = "primp"
    dist = "primp"
    pip_name = "primp"
    modules = ("primp",)
    h2_mode = "shared"

    def _client_kwargs(self) -> dict:
        if self.tls and not self.http2:
            raise AdapterUnavailable(self.name, "no HTTP/1.1 over TLS: primp has no switch to "
                                     "keep ALPN from choosing h2")
        kw: dict = {"timeout": self.timeout, "http2_only": self.http2}
        if self.tls and self.ca_file:
            kw["ca_cert_file"] = self.ca_file
        self.hdrs = self.headers or None
        return kw

    def _setup(self) -> None:
        import primp

        self.client = primp.Client(**self._client_kwargs())

    def _content(self) -> bytes | None:
        if self.body_file is not None:
            with open(self.body_file, "rb") as f:
                return f.read()
        return self.body

    def request(self) -> None:
        c = self.client
        if self.download_path is not None:
            with c.request(self.method, self.url, headers=self.hdrs, stream=True) as r:
                with open(self.download_path, "wb") as f:
                    for chunk in r.iter_bytes(CHUNK):
                        f.write(chunk)
        else:
            r = c.request(self.method, self.url, headers=self.hdrs, content=self._content())
            self.last_body = r.content
        self.last_status = r.status_code

    def close(self) -> None:
        pass  # primp's Client has no close(); its pool goes with the object


class PrimpAsyncAdapter(PrimpAdapter):
    """``AsyncClient`` on the worker's one event loop."""

    name = "primp-async"
    kind = "async"
    h2_mode = "async"

    async def _asetup(self) -> None:
        import primp

        self.client = primp.AsyncClient(**self._client_kwargs())

    async def request(self) -> None:  # type: ignore[override]
        c = self.client
        if self.download_path is not None:
            async with await c.request(self.method, self.url, headers=self.hdrs,
                                       stream=True) as r:
                with open(self.download_path, "wb") as f:
                    async for chunk in r.aiter_bytes(CHUNK):
                        f.write(chunk)
        else:
            r = await c.request(self.method, self.url, headers=self.hdrs,
                                content=self._content())
            self.last_body = r.content
        self.last_status = r.status_code

    async def aclose(self) -> None:
        pass
