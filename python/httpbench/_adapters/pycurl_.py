"""pycurl: one reused ``Curl`` handle (libcurl keeps the connection alive)."""

from __future__ import annotations

import io

from . import Adapter

__all__ = ["PycurlAdapter"]


class PycurlAdapter(Adapter):
    """One handle configured once; per request only the output (and input file) change."""

    name = "pycurl"
    dist = "pycurl"
    pip_name = "pycurl"
    modules = ("pycurl",)

    @classmethod
    def version(cls) -> str | None:
        try:
            import pycurl
        except ImportError:
            return None
        return pycurl.version  # includes the libcurl and TLS library versions

    def _setup(self) -> None:
        import pycurl

        self.pc = pycurl
        c = self.c = pycurl.Curl()
        c.setopt(pycurl.URL, self.url)
        c.setopt(pycurl.TIMEOUT_MS, int(self.timeout * 1000))
        c.setopt(pycurl.NOSIGNAL, 1)
        if self.tls and self.ca_file:
            c.setopt(pycurl.CAINFO, self.ca_file)
        if self.headers:
            c.setopt(pycurl.HTTPHEADER, [f"{k}: {v}" for k, v in self.headers.items()])
        if self.body is not None:
            c.setopt(pycurl.POSTFIELDSIZE, len(self.body))
            c.setopt(pycurl.POSTFIELDS, self.body)
        elif self.body_file is not None:
            c.setopt(pycurl.POST, 1)
            c.setopt(pycurl.POSTFIELDSIZE, self.body_size)
        if self.method not in ("GET", "POST"):
            c.setopt(pycurl.CUSTOMREQUEST, self.method)

    def request(self) -> None:
        c, pc = self.c, self.pc
        if self.download_path is not None:
            with open(self.download_path, "wb") as f:
                c.setopt(pc.WRITEDATA, f)
                c.perform()
        else:
            buf = io.BytesIO()
            c.setopt(pc.WRITEDATA, buf)
            if self.body_file is not None:
                with open(self.body_file, "rb") as f:
                    c.setopt(pc.READDATA, f)
                    c.perform()
            else:
                c.perform()
            self.last_body = buf.getvalue()
        self.last_status = c.getinfo(pc.RESPONSE_CODE)

    def close(self) -> None:
        self.c.close()
