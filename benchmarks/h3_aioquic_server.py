"""An HTTP/3 listener on aioquic (one asyncio thread): the "before" contender of
bench_h3server.py, the Python design the embedded C server's HTTP/3 side replaced.

It serves the C server's routes with the same bytes (``/``, ``/bytes/N``,
``/sink``, ``/echo``, ``/delay/MS``, ``/status/CODE``; anything else is 404)
and keeps the same counters under the same names, plus ``by_protocol["h3"]``,
so the stats of a server process with both listeners merge into one dict.
``cpu_ns`` is the CPU time of the listener's thread only.

aioquic is optional (``pip install 'httpbench[h3]'``): :func:`h3_missing`
says what is missing, and starting a listener without it raises
:class:`H3Unavailable`.
"""

from __future__ import annotations

import asyncio
import datetime
import importlib.util
import ipaddress
import json
import os
import tempfile
import threading
import time
from typing import Any

from httpbench import _core


def h3_missing() -> str | None:
    """What this listener lacks here (aioquic, cryptography), or None."""
    for mod in ("aioquic", "cryptography"):
        if importlib.util.find_spec(mod) is None:
            return f"HTTP/3 on aioquic needs {mod} (pip install 'httpbench[h3]')"
    return None

__all__ = ["H3Server", "H3Unavailable", "h3_missing", "make_certificate"]

# Routes the listener answers itself; every other path is "not_found".
H3_ROUTES: tuple[str, ...] = ("root", "bytes", "sink", "echo", "delay", "status", "not_found",
                              "bad_request")
# Largest /bytes/N and /delay/MS accepted (larger ones are a 400, as a bad number is).
MAX_BYTES = 1 << 30
MAX_DELAY_MS = 600_000


class H3Unavailable(RuntimeError):
    """HTTP/3 cannot be served here (aioquic is not installed)."""


def make_certificate(directory: str, host: str = "127.0.0.1") -> tuple[str, str, str]:
    """A test CA and an ECDSA P-256 certificate for ``host``/127.0.0.1/localhost signed
    by it, written to ``directory``: ``(chain_file, key_file, ca_file)``. Both listeners
    use it, so one CA file verifies TCP and QUIC alike."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(days=1), now + datetime.timedelta(days=30)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "httpbench test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                       False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName("localhost"),
                                     x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    try:
        ip = ipaddress.ip_address(host)
        if str(ip) != "127.0.0.1":
            names.append(x509.IPAddress(ip))
    except ValueError:
        if host != "localhost":
            names.append(x509.DNSName(host))
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    chain = os.path.join(directory, "chain.pem")
    keyf = os.path.join(directory, "key.pem")
    caf = os.path.join(directory, "ca.pem")
    with open(chain, "wb") as f:
        f.write(leaf.public_bytes(pem) + ca.public_bytes(pem))
    with open(keyf, "wb") as f:
        f.write(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    with open(caf, "wb") as f:
        f.write(ca.public_bytes(pem))
    return chain, keyf, caf


class _Body:
    """The deterministic body bytes, generated once up to the largest size asked."""

    def __init__(self) -> None:
        self.buf = b""

    def get(self, n: int) -> bytes:
        if n > len(self.buf):
            self.buf = _core.expected_bytes(n, 0)
        return self.buf if n == len(self.buf) else self.buf[:n]


class _Stats:
    def __init__(self) -> None:
        self.requests = 0
        self.by_route = dict.fromkeys(H3_ROUTES, 0)
        self.by_status: dict[int, int] = {}
        self.connections = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.body_bytes_in = 0

    def count(self, route: str, status: int, body_out: int) -> None:
        self.requests += 1
        self.by_route[route] += 1
        self.by_status[status] = self.by_status.get(status, 0) + 1
        self.bytes_out += body_out


def _make_protocol(server: H3Server) -> Any:
    from aioquic.asyncio import QuicConnectionProtocol
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic.events import HandshakeCompleted, ProtocolNegotiated

    class Protocol(QuicConnectionProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._h3: H3Connection | None = None
            # stream id -> [method, path, body length, crc, echo chunks]
            self._open: dict[int, list[Any]] = {}

        def quic_event_received(self, event: Any) -> None:
            if isinstance(event, ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
                self._h3 = H3Connection(self._quic)
            elif isinstance(event, HandshakeCompleted):
                server.stats.connections += 1
            if self._h3 is None:
                return
            for ev in self._h3.handle_event(event):
                if isinstance(ev, HeadersReceived):
                    hd = dict(ev.headers)
                    st = [hd.get(b":method", b"GET").decode(), hd.get(b":path", b"/").decode(),
                          0, 0, []]
                    server.stats.bytes_in += sum(len(k) + len(v) for k, v in ev.headers)
                    self._open[ev.stream_id] = st
                    if ev.stream_ended:
                        self._answer(ev.stream_id)
                elif isinstance(ev, DataReceived):
                    st = self._open.get(ev.stream_id)
                    if st is None:
                        continue
                    if ev.data:
                        st[2] += len(ev.data)
                        st[3] = _core.crc32(ev.data, st[3])
                        if st[1] == "/echo":
                            st[4].append(ev.data)
                        server.stats.bytes_in += len(ev.data)
                        server.stats.body_bytes_in += len(ev.data)
                    if ev.stream_ended:
                        self._answer(ev.stream_id)

        def _answer(self, sid: int) -> None:
            method, path, blen, crc, chunks = self._open.pop(sid)
            route, status, ctype, body, delay = server.route(method, path, blen, crc, chunks)
            if delay:
                self._loop.call_later(delay / 1000, self._send, sid, route, status, ctype, body)
            else:
                self._send(sid, route, status, ctype, body)

        def _send(self, sid: int, route: str, status: int, ctype: bytes, body: bytes) -> None:
            h3 = self._h3
            assert h3 is not None
            hdrs = [(b":status", str(status).encode()), (b"server", b"httpbench"),
                    (b"content-type", ctype)]
            if status != 204:
                hdrs.append((b"content-length", str(len(body)).encode()))
            try:
                h3.send_headers(sid, hdrs, end_stream=not body)
                if body:
                    h3.send_data(sid, body, end_stream=True)
            except Exception:  # the client reset the stream or closed the connection
                server.stats.count(route, 0, 0)
                return
            server.stats.count(route, status, len(body))
            self.transmit()

    return Protocol, H3_ALPN


class H3Server:
    """An HTTP/3 listener on UDP ``host:port`` (``port=0``: ephemeral) with the given
    certificate chain and key, served by one asyncio thread of this process."""

    def __init__(self, cert_file: str, key_file: str, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        reason = h3_missing()
        if reason is not None:
            raise H3Unavailable(reason)
        self.host, self.cert_file, self.key_file = host, cert_file, key_file
        self._want_port = port
        self.port = 0
        self.stats = _Stats()
        self.body = _Body()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ident: int | None = None
        self._cpu_final: int | None = None
        self._server: Any = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    # -- routes ----------------------------------------------------------
    def route(self, method: str, path: str, blen: int, crc: int,
              chunks: list[bytes]) -> tuple[str, int, bytes, bytes, int]:
        """``(route, status, content type, body, delay ms)`` of one request."""
        octet, text = b"application/octet-stream", b"text/plain"
        path = path.split("?", 1)[0]
        parts = path.split("/")
        if path == "/":
            return "root", 200, text, b"httpbench test server\n", 0
        if len(parts) == 3 and parts[1] in ("bytes", "delay", "status"):
            name, arg = parts[1], parts[2]
            n = int(arg) if arg.isdigit() and len(arg) <= 10 else -1
            if name == "bytes" and 0 <= n <= MAX_BYTES:
                return "bytes", 200, octet, self.body.get(n), 0
            if name == "delay" and 0 <= n <= MAX_DELAY_MS:
                return "delay", 200, octet, b"", n
            if name == "status" and 200 <= n <= 999:
                return "status", n, text, b"", 0
            return name, 400, text, b"bad parameter\n", 0
        if path == "/sink":
            body = json.dumps({"bytes": blen, "crc32": f"{crc:08x}"}).encode()
            return "sink", 200, b"application/json", body, 0
        if path == "/echo":
            return "echo", 200, octet, b"".join(chunks), 0
        return "not_found", 404, text, b"not found\n", 0

    # -- lifecycle -------------------------------------------------------
    def start(self, timeout: float = 10.0) -> H3Server:
        """Bind and serve in a new thread; returns once bound (``OSError`` if it cannot)."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="httpbench-h3", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout):
            raise H3Unavailable("the HTTP/3 listener did not start in time")
        if self._error is not None:
            err, self._error = self._error, None
            self._thread.join(timeout)
            self._thread = None
            raise err
        return self

    def _run(self) -> None:
        from aioquic.asyncio import serve
        from aioquic.quic.configuration import QuicConfiguration

        self._ident = threading.get_ident()
        loop = self._loop = asyncio.new_event_loop()
        try:
            proto, alpn = _make_protocol(self)
            cfg = QuicConfiguration(is_client=False, alpn_protocols=alpn,
                                    max_datagram_frame_size=None)
            cfg.load_cert_chain(self.cert_file, self.key_file)
            self._server = loop.run_until_complete(
                serve(self.host, self._want_port, configuration=cfg, create_protocol=proto))
            sock = self._server._transport.get_extra_info("socket")
            self.port = int(sock.getsockname()[1])
        except BaseException as exc:  # reported to start()'s caller
            self._error = exc
            self._started.set()
            loop.close()
            return
        self._started.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            loop.run_until_complete(asyncio.sleep(0))
            self._cpu_final = self._cpu_now()
            loop.close()

    def stop(self) -> None:
        """Close the listener and end its thread (idempotent)."""
        t, self._thread = self._thread, None
        if t is None:
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        t.join(10)

    @property
    def running(self) -> bool:
        return self._thread is not None

    def _cpu_now(self) -> int:
        if self._ident is None:
            return 0
        try:
            return time.clock_gettime_ns(time.pthread_getcpuclockid(self._ident))
        except (OSError, AttributeError):
            return 0

    def cpu_ns(self) -> int:
        """CPU time of the listener's thread so far (its final figure once stopped)."""
        if self._cpu_final is not None and self._thread is None:
            return self._cpu_final
        return self._cpu_now()

    def snapshot(self) -> dict[str, Any]:
        """The counters, named as in the C server's ``stats()``."""
        s = self.stats
        return {
            "port": self.port,
            "requests": s.requests,
            "by_route": dict(s.by_route),
            "by_status": dict(s.by_status),
            "connections_accepted": s.connections,
            "bytes_in": s.bytes_in,
            "bytes_out": s.bytes_out,
            "body_bytes_in": s.body_bytes_in,
            "cpu_ns": self.cpu_ns(),
        }


def temp_certificate(host: str = "127.0.0.1") -> tuple[str, str, str, str]:
    """:func:`make_certificate` in a new temporary directory: ``(dir, chain, key, ca)``."""
    d = tempfile.mkdtemp(prefix="httpbench-h3-")
    return (d, *make_certificate(d, host))


def _serve() -> None:
    """A child process for bench_h3server.py: prints {"port", "ca_file"}, then answers
    "stats" (this listener's snapshot, cpu_ns its thread's) until "stop" or EOF."""
    import shutil
    import sys

    d, chain, key, ca = temp_certificate()
    srv = H3Server(chain, key, "127.0.0.1", 0).start()
    print(json.dumps({"port": srv.port, "ca_file": ca, "pid": os.getpid()}), flush=True)
    try:
        for line in sys.stdin:
            if line.strip() == "stats":
                print(json.dumps(srv.snapshot()), flush=True)
            elif line.strip() == "stop":
                break
    finally:
        srv.stop()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    _serve()
