"""What the embedded server's streaming routes send, byte for byte, and a raw
WebSocket peer for the tests that must misbehave (no library lets a client
send invalid UTF-8 or a 2^63-byte frame head)."""

from __future__ import annotations

import base64
import os
import socket
import struct

ALPHABET = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
PERIOD = 65521
SSE_LINE = (ALPHABET + b"01").decode()
SSE_PREAMBLE = ": httpbench\nretry: 1000\n\n"


def content(n: int, offset: int = 0) -> bytes:
    """The server's deterministic content bytes [offset, offset + n)."""
    return bytes(ALPHABET[((offset + i) % PERIOD) % 62] for i in range(n))


def sse_data(size: int) -> str:
    """An event's data as a client's parser hands it over."""
    return "".join("\n" if i % 65 == 64 else SSE_LINE[i % 65] for i in range(size))


def sse_event(i: int, size: int) -> str:
    lines = sse_data(size).split("\n")
    return f"id: {i}\nevent: tick\n" + "".join(f"data: {line}\n" for line in lines) + "\n"


def sse_stream(events: int, size: int) -> str:
    return SSE_PREAMBLE + "".join(sse_event(i, size) for i in range(1, events + 1))


def chunk_framed(pieces: list[bytes]) -> bytes:
    """pieces as an HTTP/1.1 chunked body."""
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def parse_sse(text: str) -> list[dict[str, str]]:
    """The WHATWG event-stream parsing (the field rules; ids and types per event)."""
    events: list[dict[str, str]] = []
    data: list[str] = []
    etype, last_id = "", ""
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line == "":
            if data:
                events.append({"id": last_id, "event": etype or "message", "data": "\n".join(data)})
            data, etype = [], ""
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        elif name == "event":
            etype = value
        elif name == "id":
            last_id = value
    return events


# --------------------------------------------------------------------------- raw WebSocket


def ws_frame(opcode: int, payload: bytes, fin: bool = True, mask: bytes | None = b"\x37\xfa\x21\x3d",
             length: int | None = None, rsv1: bool = False) -> bytes:
    """One frame (masked unless mask is None); `length` overrides the announced length;
    rsv1: the permessage-deflate bit."""
    n = len(payload) if length is None else length
    b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    m = 0x80 if mask is not None else 0
    if n < 126:
        head = bytes([b0, m | n])
    elif n < 65536:
        head = bytes([b0, m | 126]) + struct.pack(">H", n)
    else:
        head = bytes([b0, m | 127]) + struct.pack(">Q", n)
    if mask is None:
        return head + payload
    return head + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(payload))


class RawWS:
    """A WebSocket client on a plain socket: the upgrade, then frames as given."""

    def __init__(self, port: int, target: str = "/ws", timeout: float = 10.0,
                 extensions: str | None = None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {target} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n"
                           + (f"Sec-WebSocket-Extensions: {extensions}\r\n" if extensions else "")
                           + "\r\n").encode())
        self.buf = b""
        self.last_rsv1 = False
        while b"\r\n\r\n" not in self.buf:
            got = self.sock.recv(4096)
            if not got:
                raise ConnectionError(f"closed during the upgrade: {self.buf!r}")
            self.buf += got
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        self.head = head.decode()
        if not self.head.startswith("HTTP/1.1 101 "):
            raise ConnectionError(self.head)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> tuple[int, bool, bytes] | None:
        """(opcode, fin, payload) of the next frame; None at EOF."""
        while True:
            if len(self.buf) >= 2:
                n = self.buf[1] & 0x7F
                at = 2
                if n == 126:
                    n, at = struct.unpack(">H", self.buf[2:4])[0] if len(self.buf) >= 4 else -1, 4
                elif n == 127:
                    n, at = struct.unpack(">Q", self.buf[2:10])[0] if len(self.buf) >= 10 else -1, 10
                if n >= 0 and len(self.buf) >= at + n:
                    op, fin = self.buf[0] & 0x0F, bool(self.buf[0] & 0x80)
                    self.last_rsv1 = bool(self.buf[0] & 0x40)
                    payload, self.buf = self.buf[at:at + n], self.buf[at + n:]
                    return op, fin, payload
            got = self.sock.recv(65536)
            if not got:
                return None
            self.buf += got

    def recv_close(self) -> int | None:
        """Skip to the server's close frame: its code (1005 when empty), None at EOF."""
        while True:
            f = self.recv_frame()
            if f is None:
                return None
            if f[0] == 8:
                return struct.unpack(">H", f[2][:2])[0] if len(f[2]) >= 2 else 1005

    def close(self) -> None:
        self.sock.close()


def ws_accept(key: bytes) -> bytes:
    import hashlib

    return base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())


def scripted_ws(after_upgrade, status: bytes = b"101 Switching Protocols", good_accept: bool = True):
    """A RawServer handler: answer the upgrade (with the right Sec-WebSocket-Accept
    unless good_accept is False), then after_upgrade(conn) scripts the frames."""

    def handler(c) -> None:
        req = c.read_request()
        if req is None:
            return
        key = b""
        for line in req[0].split(b"\r\n"):
            if line.lower().startswith(b"sec-websocket-key:"):
                key = line.split(b":", 1)[1].strip()
        acc = ws_accept(key) if good_accept else b"AAAAAAAAAAAAAAAAAAAAAAAAAAA="
        c.send(b"HTTP/1.1 " + status + b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               b"Sec-WebSocket-Accept: " + acc + b"\r\n\r\n")
        after_upgrade(c)

    return handler
