"""pycurl: one reused ``Curl`` handle (libcurl keeps the connection alive).

HTTP/1.1 scenarios declare ``CURL_HTTP_VERSION_1_1`` (libcurl would take h2
by ALPN over TLS). Over HTTP/2: ``CURL_HTTP_VERSION_2TLS`` with TLS (ALPN),
prior knowledge without; ``concurrency`` requests in flight are that many easy handles on
one ``CurlMulti`` (multiplexing on, one connection per host, ``PIPEWAIT`` so
they wait for the connection instead of opening more). Over HTTP/3:
``CURL_HTTP_VERSION_3ONLY`` when this libcurl has HTTP/3 (ngtcp2 and nghttp3;
pycurl's Linux wheels do), skipped with that reason otherwise.
"""

from __future__ import annotations

import io

from . import Adapter, AdapterUnavailable, sse_

__all__ = ["PycurlAdapter"]


class PycurlAdapter(Adapter):
    """One handle configured once; per request only the output (and input file) change."""

    name = "pycurl"
    dist = "pycurl"
    pip_name = "pycurl"
    modules = ("pycurl",)
    h2_mode = "batch"
    h3 = True
    sse = True

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
        if self.http2 and not pycurl.version_info()[4] & pycurl.VERSION_HTTP2:
            raise AdapterUnavailable(self.name, "this libcurl is built without HTTP/2 (nghttp2)")
        if self.http3 and not pycurl.version_info()[4] & pycurl.VERSION_HTTP3:
            raise AdapterUnavailable(self.name, "this libcurl is built without HTTP/3 "
                                     "(ngtcp2/nghttp3)")
        self.c = self._handle()
        self.multi = None
        if self.http2 and self.concurrency > 1:
            m = self.multi = pycurl.CurlMulti()
            m.setopt(pycurl.M_PIPELINING, pycurl.PIPE_MULTIPLEX)
            m.setopt(pycurl.M_MAX_HOST_CONNECTIONS, 1)
            self.easies = [self._handle() for _ in range(self.concurrency)]
            for e in self.easies:
                e.setopt(pycurl.PIPEWAIT, 1)

    def _handle(self):  # noqa: ANN202
        pycurl = self.pc
        c = pycurl.Curl()
        if self.http3:
            c.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_3ONLY)
        elif self.http2:
            c.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_2TLS if self.tls
                     else pycurl.CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE)
        else:  # libcurl would take h2 by ALPN over TLS: not the scenario's protocol
            c.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
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
        return c

    def request(self) -> None:
        if self.events:
            return sse_.read_pycurl(self)
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

    def request_batch(self, k: int) -> int:
        pc, m = self.pc, self.multi
        if m is None or k > len(self.easies):
            raise ValueError(f"pycurl: a batch of {k} needs http2 and concurrency >= {k}")
        easies = self.easies[:k]
        bufs = [io.BytesIO() for _ in easies]
        files = []
        try:
            for e, b in zip(easies, bufs, strict=True):
                e.setopt(pc.WRITEDATA, b)
                if self.body_file is not None:
                    f = open(self.body_file, "rb")  # noqa: SIM115
                    files.append(f)
                    e.setopt(pc.READDATA, f)
                m.add_handle(e)
            failed: list[str] = []
            left = k
            while left:
                while m.perform()[0] == pc.E_CALL_MULTI_PERFORM:
                    pass
                while True:
                    queued, ok, bad = m.info_read()
                    left -= len(ok) + len(bad)
                    failed += [f"curl error {code}: {msg}" for _, code, msg in bad]
                    if not queued:
                        break
                if left:
                    # wait for a socket, at most until libcurl's next timeout
                    t = m.timeout()
                    m.select(min(t, 1000) / 1000 if t >= 0 else 1.0)
        finally:
            for e in easies:
                m.remove_handle(e)
            for f in files:
                f.close()
        if len(failed) == k:
            raise RuntimeError(f"pycurl: all {k} transfers failed ({failed[0]})")
        # a transfer that failed has response code 0
        codes = [e.getinfo(pc.RESPONSE_CODE) for e in easies]
        bad = [c for c in codes if c != 200]
        self.last_status = bad[0] if bad else 200
        self.last_body = bufs[-1].getvalue()
        return len(bad)

    def close(self) -> None:
        self.c.close()
        if self.multi is not None:
            for e in self.easies:
                e.close()
            self.multi.close()
