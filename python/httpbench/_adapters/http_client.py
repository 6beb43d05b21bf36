"""``http.client`` (standard library): one HTTP(S)Connection, reused."""

from __future__ import annotations

import http.client
import platform
import shutil

from . import CHUNK, Adapter, sse_

__all__ = ["HttpClientAdapter"]


class HttpClientAdapter(Adapter):
    """One ``HTTPConnection``; it reconnects by itself after a server close."""

    name = "http.client"
    h2_reason = "http.client speaks HTTP/1.1 only"
    sse = True

    @classmethod
    def version(cls) -> str | None:
        return "stdlib " + platform.python_version()

    def _setup(self) -> None:
        if self.tls:
            self.conn = http.client.HTTPSConnection(
                self.host, self.port, timeout=self.timeout, context=self.ssl_context()
            )
        else:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        if self.body_file is not None:
            self.headers["Content-Length"] = str(self.body_size)

    def request(self) -> None:
        if self.events:
            return sse_.read_http_client(self)
        conn = self.conn
        if self.body_file is not None:
            with open(self.body_file, "rb") as f:
                conn.request(self.method, self.path, body=f, headers=self.headers)
        else:
            conn.request(self.method, self.path, body=self.body, headers=self.headers)
        r = conn.getresponse()
        if self.download_path is not None:
            with open(self.download_path, "wb") as f:
                shutil.copyfileobj(r, f, CHUNK)
            r.close()
        else:
            self.last_body = r.read()
        self.last_status = r.status

    def close(self) -> None:
        self.conn.close()
