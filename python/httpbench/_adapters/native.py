"""httpbench's own native client (``httpbench.Client``): one pooled keep-alive connection.

Over HTTP/2 ``Client(http2=True)``: a batch is one ``get_many(urls)`` call,
the requests multiplexed on the origin's one connection. Over HTTP/3
``Client(http3=True)``: one QUIC connection, one request at a time.
"""

from __future__ import annotations

from . import Adapter, AdapterUnavailable, sse_

__all__ = ["NativeAdapter"]


class NativeAdapter(Adapter):
    """``Client.request(...)`` / ``Client.download(url, path)``; file bodies passed as a path.
    Streams (``/sse`` events, a ``/stream`` download) are read with ``Client.stream()``."""

    name = "native"
    dist = "httpbench"
    h2_mode = "batch"
    h3 = True
    sse = True  # Client.stream().iter_events()

    @classmethod
    def check(cls) -> None:
        try:
            from .. import _client
        except ImportError as exc:  # pragma: no cover - the package itself is broken
            raise AdapterUnavailable(cls.name, f"httpbench not importable: {exc}") from None
        if not hasattr(_client, "Client"):
            raise AdapterUnavailable(cls.name, "httpbench.Client not built in this version")

    def _setup(self) -> None:
        from .._client import Client

        kw: dict = {"timeout": self.timeout}
        if self.tls and self.ca_file:
            kw["ca_file"] = self.ca_file
        if self.http2:
            if not hasattr(Client, "get_many"):
                raise AdapterUnavailable(self.name, "Client(http2=True) is not built in this "
                                         "version")
            if self.concurrency > 1 and (self.method != "GET" or self.body is not None
                                         or self.body_file is not None):
                raise AdapterUnavailable(self.name, "native HTTP/2 batches are GETs "
                                         "(Client.get_many)")
            kw["http2"] = True
        if self.http3:
            from .._features import features

            if not features()["http3-client"]:
                raise AdapterUnavailable(self.name, "this httpbench build has no HTTP/3 client")
            kw["http3"] = True
        self.client = Client(**kw)
        self.hdrs = self.headers or None
        self.batch_urls = [self.url] * self.concurrency

    def request(self) -> None:
        c = self.client
        if self.events:
            return sse_.read_native(self)
        if self.download_path is not None and self.path.startswith("/stream/"):
            with open(self.download_path, "wb") as f, c.stream("GET", self.url,
                                                               headers=self.hdrs) as r:
                for piece in r.iter_bytes():
                    f.write(piece)
            self.last_status = r.status
            return
        if self.download_path is not None:
            r = c.download(self.url, self.download_path)
        elif self.body_file is not None:
            r = c.request(self.method, self.url, body=self.body_file, headers=self.hdrs)
            self.last_body = r.body
        else:
            r = c.request(self.method, self.url, body=self.body, headers=self.hdrs)
            self.last_body = r.body
        self.last_status = r.status

    def request_batch(self, k: int) -> int:
        urls = self.batch_urls if k == len(self.batch_urls) else [self.url] * k
        rs = self.client.get_many(urls, self.hdrs)
        bad = [r.status for r in rs if r.status != 200]
        self.last_status = bad[0] if bad else 200
        self.last_body = rs[-1].body
        return len(bad)

    def close(self) -> None:
        self.client.close()
