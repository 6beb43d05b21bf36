"""Hand-built HTTP/2 frames for tests that talk to the server byte by byte.

A tiny frame builder and reader, not a client: headers are encoded as HPACK
literals without indexing (no Huffman), and response header blocks are not
decoded (tests read statuses from the server's stats). ``H2Conn`` opens a
connection (plain h2c, or TLS with ALPN h2), sends the preface and SETTINGS,
and reads frames with a deadline.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from dataclasses import dataclass

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20

NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT, STREAM_CLOSED, \
    FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, CONNECT_ERROR, \
    ENHANCE_YOUR_CALM = range(12)

S_HEADER_TABLE_SIZE, S_ENABLE_PUSH, S_MAX_CONCURRENT_STREAMS, S_INITIAL_WINDOW_SIZE, \
    S_MAX_FRAME_SIZE, S_MAX_HEADER_LIST_SIZE = range(1, 7)


def frame(ftype: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(
        ">I", stream & 0x7FFFFFFF) + payload


def settings(**kv: int) -> bytes:
    ids = {"max_concurrent_streams": S_MAX_CONCURRENT_STREAMS,
           "initial_window_size": S_INITIAL_WINDOW_SIZE, "max_frame_size": S_MAX_FRAME_SIZE,
           "enable_push": S_ENABLE_PUSH, "header_table_size": S_HEADER_TABLE_SIZE}
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", ids[k], v) for k, v in kv.items()))


def hpack_int(value: int, prefix_bits: int, first: int = 0) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_literal(name: bytes, value: bytes, index: bool = False) -> bytes:
    """A literal field with a new name: without indexing, or (index=True) with
    incremental indexing, so it lands in the dynamic table at index 62."""
    first = 0x40 if index else 0x00
    return (bytes([first]) + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value)


def hpack_indexed(index: int) -> bytes:
    return hpack_int(index, 7, 0x80)


def request_block(path: str, method: str = "GET", authority: str = "127.0.0.1",
                  extra: list[tuple[bytes, bytes]] | None = None) -> bytes:
    fields = [(b":method", method.encode()), (b":scheme", b"http"), (b":path", path.encode()),
              (b":authority", authority.encode()), *(extra or [])]
    return b"".join(hpack_literal(n, v) for n, v in fields)


def headers(stream: int, block: bytes, end_stream: bool = True, end_headers: bool = True) -> bytes:
    flags = (END_STREAM if end_stream else 0) | (END_HEADERS if end_headers else 0)
    return frame(HEADERS, flags, stream, block)


def data(stream: int, payload: bytes, end_stream: bool = False) -> bytes:
    return frame(DATA, END_STREAM if end_stream else 0, stream, payload)


def window_update(stream: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, stream, struct.pack(">I", increment))


def rst_stream(stream: int, code: int) -> bytes:
    return frame(RST_STREAM, 0, stream, struct.pack(">I", code))


@dataclass
class Frame:
    type: int
    flags: int
    stream: int
    payload: bytes

    @property
    def error_code(self) -> int:
        """RST_STREAM / GOAWAY error code."""
        off = 4 if self.type == GOAWAY else 0
        return struct.unpack(">I", self.payload[off:off + 4])[0]

    @property
    def last_stream(self) -> int:
        return struct.unpack(">I", self.payload[:4])[0] & 0x7FFFFFFF


class H2Conn:
    """One raw HTTP/2 connection. ``preface=False`` sends nothing at connect."""

    def __init__(self, port: int, tls_ca: str | None = None, preface: bool = True,
                 client_settings: bytes | None = None, timeout: float = 5.0) -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        if tls_ca is not None:
            ctx = ssl.create_default_context(cafile=tls_ca)
            ctx.set_alpn_protocols(["h2"])
            sock = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
            assert sock.selected_alpn_protocol() == "h2"
        self.sock = sock
        self.buf = b""
        self.timeout = timeout
        self.closed = False
        if preface:
            self.send(PREFACE + (client_settings if client_settings is not None else settings()))

    def send(self, b: bytes) -> None:
        self.sock.sendall(b)

    def _fill(self, deadline: float) -> bool:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no frame from the server in time")
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.closed = True
            return False
        self.buf += chunk
        return True

    def read_frame(self, deadline: float | None = None) -> Frame | None:
        """The next frame, or None once the server closed the connection."""
        deadline = deadline or time.monotonic() + self.timeout
        while len(self.buf) < 9:
            if not self._fill(deadline):
                return None
        n = int.from_bytes(self.buf[:3], "big")
        while len(self.buf) < 9 + n:
            if not self._fill(deadline):
                return None
        f = Frame(self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF,
                  self.buf[9:9 + n])
        self.buf = self.buf[9 + n:]
        if f.type == SETTINGS and not f.flags & ACK:
            self.send(frame(SETTINGS, ACK, 0))
        return f

    def read_until(self, pred, limit: int = 10000) -> list[Frame]:
        """Frames up to and including the first matching pred (or the close)."""
        out: list[Frame] = []
        deadline = time.monotonic() + self.timeout
        for _ in range(limit):
            f = self.read_frame(deadline)
            if f is None:
                return out
            out.append(f)
            if pred(f):
                return out
        raise AssertionError("too many frames")

    def read_all(self) -> list[Frame]:
        """Every frame until the server closes the connection."""
        return self.read_until(lambda f: False)

    def stream_body(self, stream: int) -> tuple[list[Frame], bytes]:
        """Frames until the stream's END_STREAM (or RST_STREAM / GOAWAY / close),
        and its DATA bytes."""
        frames = self.read_until(lambda f: (f.stream == stream and (
            f.flags & END_STREAM and f.type in (DATA, HEADERS) or f.type == RST_STREAM))
            or f.type == GOAWAY)
        body = b"".join(f.payload for f in frames if f.type == DATA and f.stream == stream)
        return frames, body

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> H2Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
