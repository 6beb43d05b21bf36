"""requests: one ``Session`` (keeps the connection alive)."""

from __future__ import annotations

from . import CHUNK, Adapter, sse_

__all__ = ["RequestsAdapter"]


class RequestsAdapter(Adapter):
    """``Session.request(...)``; downloads via ``stream=True`` + ``iter_content``."""

    name = "requests"
    dist = "requests"
    pip_name = "requests"
    modules = ("requests",)
    _lib = "requests"
    h2_reason = "requests speaks HTTP/1.1 only (http.client through urllib3)"
    sse = True

    def _setup(self) -> None:
        import importlib

        lib = importlib.import_module(self._lib)
        self.session = lib.Session()
        # verify per request: REQUESTS_CA_BUNDLE in the environment would override
        # a Session.verify path (requests merges the environment first)
        self.verify = self.ca_file if self.tls and self.ca_file else True
        self.hdrs = self.headers or None

    def request(self) -> None:
        if self.events:
            return sse_.read_requests(self)
        s = self.session
        if self.body_file is not None:
            with open(self.body_file, "rb") as f:
                r = s.request(self.method, self.url, data=f, headers=self.hdrs, timeout=self.timeout,
                              verify=self.verify)
            self.last_body = r.content
        elif self.download_path is not None:
            with s.request(self.method, self.url, headers=self.hdrs, stream=True,
                           timeout=self.timeout, verify=self.verify) as r:
                with open(self.download_path, "wb") as f:
                    for chunk in r.iter_content(CHUNK):
                        f.write(chunk)
        else:
            r = s.request(self.method, self.url, data=self.body, headers=self.hdrs,
                          timeout=self.timeout, verify=self.verify)
            self.last_body = r.content
        self.last_status = r.status_code

    def close(self) -> None:
        self.session.close()
