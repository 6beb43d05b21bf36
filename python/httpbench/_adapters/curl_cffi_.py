"""curl_cffi: one ``requests.Session`` (sync) or ``AsyncSession`` (async), no impersonation.

HTTP/1.1 is declared for HTTP/1.1 scenarios: libcurl would negotiate h2 over
TLS by ALPN, and the scenario would measure another protocol. Over HTTP/2:
``v2tls`` (ALPN) with TLS, prior knowledge without. The sync ``Session``
keeps a curl handle per thread (one connection each), so concurrent HTTP/2
streams are measured with ``curl_cffi-async`` (one ``CurlMulti``). Over
HTTP/3: ``v3only`` (its libcurl is built with ngtcp2/nghttp3). Uploads
from a file are streamed by libcurl's read callback (``content=`` the file).
"""

from __future__ import annotations

from . import Adapter, sse_

__all__ = ["CurlCffiAdapter", "CurlCffiAsyncAdapter"]


class CurlCffiAdapter(Adapter):
    """``Session.request(...)``; downloads via ``content_callback`` (libcurl's write
    callback): ``stream=True`` duplicates the curl handle per response, a new
    connection for every download."""

    name = "curl_cffi"
    dist = "curl_cffi"
    pip_name = "curl_cffi"
    modules = ("curl_cffi",)
    h2_mode = "single"
    h2_reason = ("curl_cffi's sync Session keeps one curl handle (connection) per thread; "
                 "curl_cffi-async measures its multiplexing")
    h3 = True
    sse = True  # stream=True + iter_lines (a duplicated curl handle: a new connection per stream)

    def _session_kwargs(self) -> dict:
        if self.http3:
            version = "v3only"
        elif self.http2:
            version = "v2tls" if self.tls else "v2_prior_knowledge"
        else:
            version = "v1"
        return {"verify": self.ca_file if self.tls and self.ca_file else True,
                "timeout": self.timeout, "http_version": version}

    def _setup(self) -> None:
        from curl_cffi import requests

        # One handle for the session whatever thread calls it (one adapter is used by one
        # thread at a time); the default, a handle per thread, reconnects in every new thread.
        self.session = requests.Session(**self._session_kwargs(), use_thread_local_curl=False)
        self.hdrs = self.headers or None

    def request(self) -> None:
        s = self.session
        if self.events:
            return sse_.read_curl_cffi(self)
        if self.body_file is not None:
            with open(self.body_file, "rb") as f:
                r = s.request(self.method, self.url, content=f, headers=self.hdrs)
            self.last_body = r.content
        elif self.download_path is not None:
            with open(self.download_path, "wb") as f:
                r = s.request(self.method, self.url, headers=self.hdrs, content_callback=f.write)
        else:
            r = s.request(self.method, self.url, data=self.body, headers=self.hdrs)
            self.last_body = r.content
        self.last_status = r.status_code

    def close(self) -> None:
        self.session.close()


class CurlCffiAsyncAdapter(CurlCffiAdapter):
    """``AsyncSession`` on the worker's one event loop (requests in flight share one
    ``CurlMulti``)."""

    name = "curl_cffi-async"
    kind = "async"
    h2_mode = "async"
    sse = False
    sse_reason = "the event stream reader is wired for curl_cffi's sync Session (curl_cffi)"

    async def _asetup(self) -> None:
        from curl_cffi import requests

        self.session = requests.AsyncSession(**self._session_kwargs(),
                                             max_clients=max(self.concurrency, 10))
        self.hdrs = self.headers or None

    async def request(self) -> None:  # type: ignore[override]
        s = self.session
        if self.body_file is not None:
            with open(self.body_file, "rb") as f:
                r = await s.request(self.method, self.url, content=f, headers=self.hdrs)
            self.last_body = r.content
        elif self.download_path is not None:
            r = await s.request(self.method, self.url, headers=self.hdrs, stream=True)
            try:
                with open(self.download_path, "wb") as f:
                    async for chunk in r.aiter_content():
                        f.write(chunk)
            finally:
                await r.aclose()
        else:
            r = await s.request(self.method, self.url, data=self.body, headers=self.hdrs)
            self.last_body = r.content
        self.last_status = r.status_code

    async def aclose(self) -> None:
        await self.session.close()
