"""A hostile HTTP/3 peer for tests: aioquic's sans-I/O QUIC client on a plain UDP
socket, driven step by step so a test decides what is sent, what is withheld and
what is ignored. 127.0.0.1 only; every wait is bounded."""

from __future__ import annotations

import socket
import time
from typing import Any

from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionTerminated, StopSendingReceived, StreamReset

HOST = "127.0.0.1"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def config(ca: str | None = None, alpn: list[str] | None = None, ticket: Any = None,
           cid_len: int = 8) -> QuicConfiguration:
    cfg = QuicConfiguration(is_client=True, alpn_protocols=alpn or H3_ALPN,
                            server_name="localhost", session_ticket=ticket,
                            connection_id_length=cid_len)
    if ca:
        cfg.load_verify_locations(ca)
    else:
        import ssl
        cfg.verify_mode = ssl.CERT_NONE
    return cfg


def initials(n: int, port: int, cid_len: int = 8) -> list[bytes]:
    """n client Initials, each the first datagram of a connection of its own
    (a fresh DCID and key share): what a flood of spoofed sources sends."""
    out = []
    for _ in range(n):
        q = QuicConnection(configuration=config(cid_len=cid_len))
        q.connect((HOST, port), now=time.monotonic())
        out.append(q.datagrams_to_send(now=time.monotonic())[0][0])
    return out


class Peer:
    """One QUIC connection over its own socket. ``pump`` sends what aioquic has
    and feeds what arrives; ``events`` collects HTTP/3 and QUIC events."""

    def __init__(self, port: int, ca: str | None = None, ignore_stop_sending: bool = False,
                 **cfg: Any) -> None:
        self.addr = (HOST, port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((HOST, 0))
        self.sock.setblocking(False)
        self.tickets: list[Any] = []
        self.q = QuicConnection(configuration=config(ca, **cfg),
                                session_ticket_handler=self.tickets.append)
        if ignore_stop_sending:  # a client that never answers STOP_SENDING with a reset
            def ignore(context: Any, frame_type: int, buf: Any) -> None:
                buf.pull_uint_var()
                buf.pull_uint_var()
            table = self.q._QuicConnection__frame_handlers  # type: ignore[attr-defined]
            table[0x05] = (ignore, table[0x05][1])
        self.h3: H3Connection | None = None
        self.status: dict[int, int] = {}
        self.body: dict[int, bytes] = {}
        self.ended: set[int] = set()
        self.reset: set[int] = set()
        self.reset_codes: dict[int, int] = {}
        self.stop_codes: dict[int, int] = {}
        self.closed_code: int | None = None  # the peer's CONNECTION_CLOSE error code
        self.sent_bytes = 0
        self.recv_bytes = 0
        self.q.connect(self.addr, now=time.monotonic())

    def outgoing(self) -> list[bytes]:
        return [d for d, _ in self.q.datagrams_to_send(now=time.monotonic())]

    def send(self, datagrams: list[bytes] | None = None) -> None:
        for d in self.outgoing() if datagrams is None else datagrams:
            self.sock.sendto(d, self.addr)
            self.sent_bytes += len(d)

    def pump(self, seconds: float, until: Any = None) -> None:
        """Exchange datagrams for up to ``seconds`` (or until ``until()``)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.send()
            if until is not None and until():
                return
            timer = self.q.get_timer()
            wait = min(0.02, max(0.0, end - time.monotonic()))
            if timer is not None:
                wait = max(0.0, min(wait, timer - time.monotonic()))
            got = False
            deadline = time.monotonic() + wait
            while True:
                try:
                    d, _ = self.sock.recvfrom(65536)
                except BlockingIOError:
                    if got or time.monotonic() >= deadline:
                        break
                    time.sleep(0.001)
                    continue
                got = True
                self.recv_bytes += len(d)
                self.q.receive_datagram(d, self.addr, now=time.monotonic())
            timer = self.q.get_timer()
            if timer is not None and timer <= time.monotonic():
                self.q.handle_timer(now=time.monotonic())
            self._events()

    def _events(self) -> None:
        while (e := self.q.next_event()) is not None:
            if self.h3 is None and self.q._handshake_complete:
                self.h3 = H3Connection(self.q)
            if isinstance(e, StreamReset):
                self.reset.add(e.stream_id)
                self.reset_codes[e.stream_id] = e.error_code
            elif isinstance(e, StopSendingReceived):
                self.stop_codes[e.stream_id] = e.error_code
            elif isinstance(e, ConnectionTerminated):
                self.closed_code = e.error_code
            if self.h3 is None:
                continue
            for he in self.h3.handle_event(e):
                if isinstance(he, HeadersReceived):
                    self.status[he.stream_id] = int(dict(he.headers)[b":status"])
                elif isinstance(he, DataReceived):
                    self.body[he.stream_id] = self.body.get(he.stream_id, b"") + he.data
                if getattr(he, "stream_ended", False):
                    self.ended.add(he.stream_id)

    def handshake(self, seconds: float = 5.0) -> bool:
        self.pump(seconds, until=lambda: self.q._handshake_complete and self.h3 is not None)
        if self.h3 is None and self.q._handshake_complete:
            self.h3 = H3Connection(self.q)
        return self.h3 is not None

    def request(self, path: str, method: str = "GET", body: bytes | None = None,
                end: bool = True) -> int:
        if self.h3 is None:
            self.h3 = H3Connection(self.q)
        sid = self.q.get_next_available_stream_id()
        self.h3.send_headers(sid, [(b":method", method.encode()), (b":scheme", b"https"),
                                   (b":authority", b"localhost"), (b":path", path.encode())],
                             end_stream=body is None and end)
        if body is not None:
            self.h3.send_data(sid, body, end_stream=end)
        return sid

    def raw_stream(self, data: bytes) -> int:
        """A request stream carrying exactly these bytes (no HTTP/3 framing added)."""
        sid = self.q.get_next_available_stream_id()
        self.q.send_stream_data(sid, data, end_stream=False)
        return sid

    def uni_stream(self, data: bytes) -> int:
        """A client unidirectional stream carrying exactly these bytes (its type first)."""
        sid = self.q.get_next_available_stream_id(is_unidirectional=True)
        self.q.send_stream_data(sid, data, end_stream=False)
        return sid

    def rebind(self) -> None:
        """A new source port for the same connection (what a NAT rebinding looks like)."""
        self.sock.close()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((HOST, 0))
        self.sock.setblocking(False)

    def close(self) -> None:
        try:
            self.q.close()
            self.send()
        finally:
            self.sock.close()


def drain(sock: socket.socket, seconds: float) -> tuple[int, int]:
    """(datagrams, bytes) arriving on sock within seconds."""
    sock.setblocking(False)
    n = b = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            d, _ = sock.recvfrom(65536)
        except BlockingIOError:
            time.sleep(0.005)
            continue
        n += 1
        b += len(d)
    return n, b


def new_socket() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((HOST, 0))
    return s


__all__ = ["Peer", "initials", "rss_kib", "drain", "new_socket", "config", "HOST"]
