"""niquests (a requests-compatible client): one ``Session``.

Over HTTP/2 a ``Session(multiplexed=True)``: a batch is the scenario's
requests issued at once (each returns a lazy response) and then
``Session.gather()``, all on one connection. Plain ``http://`` uses prior
knowledge (HTTP/1.1 disabled); ``https://`` negotiates h2 through ALPN with
HTTP/3 disabled (the h2 scenarios are TCP). Over HTTP/3: TCP protocols
disabled and the server's UDP port put in the QUIC cache, so the first
request goes over QUIC (forced, not discovered through Alt-Svc).
"""

from __future__ import annotations

from .requests_ import RequestsAdapter

__all__ = ["NiquestsAdapter"]


class NiquestsAdapter(RequestsAdapter):
    """Same calls as requests (niquests is API-compatible)."""

    name = "niquests"
    dist = "niquests"
    pip_name = "niquests"
    modules = ("niquests",)
    _lib = "niquests"
    h2_mode = "batch"
    h3 = True

    def _setup(self) -> None:
        if self.http3:
            import niquests

            self.session = niquests.Session(disable_http1=True, disable_http2=True)
            self.session.quic_cache_layer.add_domain(self.host, self.port)
            self.verify = self.ca_file if self.ca_file else True
            self.hdrs = self.headers or None
            return
        if not self.http2:
            super()._setup()
            return
        import niquests

        kw: dict = {"disable_http3": True,
                    "multiplexed": self.concurrency > 1 and self.download_path is None}
        if not self.tls:
            kw["disable_http1"] = True  # h2c with prior knowledge
        self.session = niquests.Session(**kw)
        self.verify = self.ca_file if self.tls and self.ca_file else True
        self.hdrs = self.headers or None

    def request_batch(self, k: int) -> int:
        s = self.session
        files = [open(self.body_file, "rb") for _ in range(k)] if self.body_file else []  # noqa: SIM115
        try:
            rs = [s.request(self.method, self.url, data=files[i] if files else self.body,
                            headers=self.hdrs, timeout=self.timeout, verify=self.verify)
                  for i in range(k)]
            s.gather()
        finally:
            for f in files:
                f.close()
        bad, status, body = 0, 200, None
        for r in rs:
            code = r.status_code
            if code != 200:
                bad += 1
                status = code or 0
            body = r.content
        self.last_status, self.last_body = status, body
        return bad
