"""urllib3: a ``PoolManager`` (the library's documented entry point)."""

from __future__ import annotations

from . import CHUNK, Adapter, sse_

__all__ = ["Urllib3Adapter"]


class Urllib3Adapter(Adapter):
    """``PoolManager().request(...)``; downloads stream with ``preload_content=False``."""

    name = "urllib3"
    dist = "urllib3"
    pip_name = "urllib3"
    modules = ("urllib3",)
    h2_reason = ("the urllib3 adapter measures urllib3's HTTP/1.1 pool (its HTTP/2 is "
                 "experimental, TLS only)")
    sse = True

    def _setup(self) -> None:
        import urllib3

        kw = {"ca_certs": self.ca_file} if self.tls and self.ca_file else {}
        self.pm = urllib3.PoolManager(timeout=self.timeout, **kw)
        if self.body_file is not None:
            self.headers["Content-Length"] = str(self.body_size)
        self.hdrs = self.headers or None

    def request(self) -> None:
        if self.events:
            return sse_.read_urllib3(self)
        if self.body_file is not None:
            with open(self.body_file, "rb") as f:
                r = self.pm.request(self.method, self.url, body=f, headers=self.hdrs)
            self.last_body = r.data
        elif self.download_path is not None:
            r = self.pm.request(self.method, self.url, headers=self.hdrs, preload_content=False)
            with open(self.download_path, "wb") as f:
                for chunk in r.stream(CHUNK):
                    f.write(chunk)
            r.release_conn()
        else:
            r = self.pm.request(self.method, self.url, body=self.body, headers=self.hdrs)
            self.last_body = r.data
        self.last_status = r.status

    def close(self) -> None:
        self.pm.clear()
