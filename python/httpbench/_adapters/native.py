"""httpbench's own native client (``httpbench.Client``): one pooled keep-alive connection."""

from __future__ import annotations

from . import Adapter

__all__ = ["NativeAdapter"]


class NativeAdapter(Adapter):
    """``Client.request(...)`` / ``Client.download(url, path)``; file bodies passed as a path."""

    name = "native"
    dist = "httpbench"

    @classmethod
    def check(cls) -> None:
        from . import AdapterUnavailable

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
        self.client = Client(**kw)
        self.hdrs = self.headers or None

    def request(self) -> None:
        c = self.client
        if self.download_path is not None:
            r = c.download(self.url, self.download_path)
        elif self.body_file is not None:
            r = c.request(self.method, self.url, body=self.body_file, headers=self.hdrs)
            self.last_body = r.body
        else:
            r = c.request(self.method, self.url, body=self.body, headers=self.hdrs)
            self.last_body = r.body
        self.last_status = r.status

    def close(self) -> None:
        self.client.close()
