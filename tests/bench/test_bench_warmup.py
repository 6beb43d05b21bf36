"""bench() warm-up accounting is exact: every request the server saw is either
one of the n measured ones or counted in warmup_requests, also when a warm-up
request is still in flight when the last measured one completes."""

from __future__ import annotations

import socket
import threading
import time

from httpbench import bench

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class CountingServer:
    """Counts request heads per connection; answers the first connection at
    once and every later one after `slow` seconds, so a warm-up request on a
    slow connection outlives the whole measured phase on the fast one."""

    def __init__(self, slow: float) -> None:
        self.slow = slow
        self.lock = threading.Lock()
        self.requests = 0
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.port = self.lsock.getsockname()[1]
        self.threads: list[threading.Thread] = []
        self.nconn = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            delay = 0.0 if self.nconn == 0 else self.slow
            self.nconn += 1
            t = threading.Thread(target=self._serve, args=(s, delay), daemon=True)
            t.start()
            self.threads.append(t)

    def _serve(self, s: socket.socket, delay: float) -> None:
        buf = b""
        with s:
            while True:
                try:
                    chunk = s.recv(65536)
                except OSError:
                    return
                if not chunk:
                    return
                buf += chunk
                while b"\r\n\r\n" in buf:
                    _, buf = buf.split(b"\r\n\r\n", 1)
                    with self.lock:
                        self.requests += 1
                    if delay:
                        time.sleep(delay)
                    try:
                        s.sendall(RESPONSE)
                    except OSError:
                        return

    def close(self) -> None:
        self.lsock.close()


def test_warmup_request_in_flight_at_the_end_is_counted():
    srv = CountingServer(slow=0.4)
    try:
        t0 = time.monotonic()
        r = bench(f"http://127.0.0.1:{srv.port}/", n=20, concurrency=2, warmup=0.1)
        elapsed = time.monotonic() - t0
        for t in srv.threads:
            t.join(timeout=5)
        assert r.successes == 20 and r.errors == 0 and r.in_flight_at_stop == 0
        warm = r.metadata["warmup_requests"]
        # the slow connection's warm-up requests (answered after 0.4 s, past
        # the measured phase) were dropped uncounted before
        assert srv.requests == 20 + warm, (srv.requests, warm)
        assert elapsed >= 0.4
        # the wait for them is not measured time
        assert r.duration_ns < 0.35e9, r.duration_ns
    finally:
        srv.close()
