"""Raw-socket helpers shared by the tests.

Client side: read everything until the peer closes, one request/close
exchange (raw_exchange), split a byte stream of Content-Length responses. Server side:
RawServer, a threaded listener whose handler scripts the exact bytes each
connection gets (Conn reads requests), with ready-made handlers and
response builders."""

from __future__ import annotations

import contextlib
import hashlib
import json
import resource
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

# --------------------------------------------------------------------------- client side


@contextlib.contextmanager
def open_files(need: int) -> Iterator[None]:
    """At least `need` open files for the block (the test skips when the hard limit is
    lower); the limit is restored after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {need}")
    if soft != resource.RLIM_INFINITY and soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def read_until_close(s: socket.socket, limit: float = 10.0, reset_ok: bool = True) -> bytes:
    """Everything the peer sends until it closes (a reset ends the read too,
    unless reset_ok is False: then it raises)."""
    s.settimeout(limit)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except ConnectionResetError:
        if not reset_ok:
            raise
    return out


def raw_exchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send data on a new connection, read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        return read_until_close(s, timeout, reset_ok=False)


def stats_answers(port: int, rounds: int, timeout: float = 10.0) -> list[dict]:
    """`rounds` GET /__stats on one keep-alive connection, one after the other: each
    answer is the server's counts at the moment it served that request."""
    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        f = s.makefile("rb")
        for _ in range(rounds):
            s.sendall(b"GET /__stats HTTP/1.1\r\nHost: x\r\n\r\n")
            length = None
            while (line := f.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert length is not None, "no answer"
            out.append(json.loads(f.read(length)))
    return out


def settled_h3(srv: Any, deadline_s: float = 30.0) -> dict:
    """A server's h3 stats (``accepted``: its connections) once every connection it
    accepted was freed (a failed handshake: by the client's CONNECTION_CLOSE after the
    server's draining period, or else by its handshake timeout, counted in ``errors``),
    or at the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        s = srv.stats()
        h3 = dict(s["h3"], accepted=s["connections_by_protocol"]["h3"])
        if h3["accepted"] == h3["connections_closed"] or time.monotonic() > end:
            return h3
        time.sleep(0.05)


def parse_responses(data: bytes) -> list[tuple[int, bytes]]:
    """Split a byte stream of Content-Length responses."""
    out = []
    pos = 0
    while pos < len(data):
        end = data.index(b"\r\n\r\n", pos)
        head = data[pos:end].decode()
        status = int(head.split(" ", 2)[1])
        n = 0
        for line in head.split("\r\n")[1:]:
            k, _, v = line.partition(":")
            if k.lower() == "content-length":
                n = int(v)
        out.append((status, data[end + 4:end + 4 + n]))
        pos = end + 4 + n
    return out


# --------------------------------------------------------------------------- scripted server


class Conn:
    """One accepted connection, with helpers for reading requests."""

    def __init__(self, sock: socket.socket, server: RawServer) -> None:
        self.sock = sock
        self.server = server
        self.buf = b""

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        if not data:
            return False
        self.buf += data
        return True

    def read_request(self) -> tuple[bytes, bytes] | None:
        """(head, body) of the next request, or None at EOF."""
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                return None
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        hdrs = {}
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            hdrs[k.strip().lower()] = v.strip()
        body = b""
        if b"content-length" in hdrs:
            n = int(hdrs[b"content-length"])
            while len(self.buf) < n:
                if not self._fill():
                    return None
            body, self.buf = self.buf[:n], self.buf[n:]
        elif hdrs.get(b"transfer-encoding") == b"chunked":
            while True:
                while b"\r\n" not in self.buf:
                    if not self._fill():
                        return None
                line, self.buf = self.buf.split(b"\r\n", 1)
                size = int(line.split(b";")[0], 16)
                while len(self.buf) < size + 2:
                    if not self._fill():
                        return None
                if size == 0:
                    self.buf = self.buf[2:]
                    break
                body += self.buf[:size]
                self.buf = self.buf[size + 2 :]
        self.server.requests.append((head + b"\r\n\r\n", body))
        return head + b"\r\n\r\n", body

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_bytewise(self, data: bytes) -> None:
        for i in range(len(data)):
            self.sock.send(data[i : i + 1])

    def rst(self) -> None:
        """Close with an RST (SO_LINGER 0)."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


class RawServer:
    """A threaded socket server; handler(conn) runs per accepted connection."""

    def __init__(self, handler: Callable[[Conn], None], ssl_context=None) -> None:
        self.handler = handler
        self.ssl_context = ssl_context
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.connections = 0
        self.requests: list[tuple[bytes, bytes]] = []
        self.errors: list[BaseException] = []
        self.socks: list[socket.socket] = []
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://{host}:{self.port}{path}"

    def _accept(self) -> None:
        while not self.stopping:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.settimeout(20)
            self.connections += 1
            self.socks.append(s)
            threading.Thread(target=self._run, args=(s,), daemon=True).start()

    def _run(self, s: socket.socket) -> None:
        try:
            if self.ssl_context is not None:
                s = self.ssl_context.wrap_socket(s, server_side=True)
            self.handler(Conn(s, self))
        except (ConnectionError, BrokenPipeError, TimeoutError, OSError):
            pass
        except BaseException as e:  # surfaced by close()
            self.errors.append(e)
        finally:
            try:
                s.close()
            except OSError:
                pass

    def close(self) -> None:
        self.stopping = True
        self.lsock.close()
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass
        assert not self.errors, self.errors

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def responder(*responses: bytes, close: bool = False, bytewise: bool = False):
    """Handler answering the n-th request on a connection with responses[n]
    (the last one repeats); close: hang up after each response."""

    def handler(c: Conn) -> None:
        i = 0
        while c.read_request() is not None:
            r = responses[min(i, len(responses) - 1)]
            i += 1
            (c.send_bytewise if bytewise else c.send)(r)
            if close:
                return

    return handler


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def chunked(body: bytes, size: int = 1000, ext: bytes = b"", trailers: bytes = b"") -> bytes:
    out = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"]
    for i in range(0, len(body), size):
        part = body[i : i + size]
        out.append(b"%x%s\r\n%s\r\n" % (len(part), ext, part))
    out.append(b"0\r\n%s\r\n" % trailers)
    return b"".join(out)


def idle_closer(body: bytes = b"ok", rst: bool = False):
    """Answer one request per connection, then close it while idle (no
    Connection: close header: the client believes it can reuse it)."""

    def handler(c: Conn) -> None:
        if c.read_request() is None:
            return
        c.send(ok(body))
        time.sleep(0.05)
        if rst:
            c.rst()

    return handler


def echo_handler(c: Conn) -> None:
    """Answer each request with the SHA-256 of its body and the body's length."""
    while (req := c.read_request()) is not None:
        head, body = req
        digest = hashlib.sha256(body).hexdigest().encode()
        c.send(ok(digest + b" %d" % len(body)))


def run_with_tty_stderr(argv: list[str], timeout: float = 60) -> tuple[Any, bytes]:
    """Run argv with stderr on a pseudo-terminal (so progress lines are drawn) and stdout
    piped; returns (CompletedProcess, everything written to the terminal)."""
    import os
    import pty
    import subprocess

    master, slave = pty.openpty()
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=slave, text=True,
                           timeout=timeout)
        os.close(slave)
        slave = -1
        err = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO once the terminal's other side is closed
                break
            if not chunk:
                break
            err += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    return p, err

