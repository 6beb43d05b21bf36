"""The native Client over HTTP/2 against nginx ending each connection after 10 requests
(GOAWAY): the streams it left unprocessed, and those not yet submitted, are sent again on
a new connection, so every batch gets exact responses and nginx logs each request once."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest
from httpbench import Client

NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None)
BODY = bytes(range(256)) * 3

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(NGINX is None, reason="nginx (with http_v2) needed")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def nginx(tmp_path):
    d = str(tmp_path)
    os.chmod(d, 0o755)  # workers drop privileges when started as root
    os.makedirs(os.path.join(d, "www"))
    os.makedirs(os.path.join(d, "tmp"))
    with open(os.path.join(d, "www", "b"), "wb") as f:
        f.write(BODY)
    port = _free_port()
    log = os.path.join(d, "access.log")
    user = "user root;\n" if os.geteuid() == 0 else ""
    conf = (f"{user}worker_processes 1; daemon off; pid {d}/nginx.pid;\n"
            f"error_log {d}/error.log warn;\nevents {{ worker_connections 64; }}\n"
            f"http {{ log_format p '$server_protocol $status'; access_log {log} p;\n"
            f"  client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp;\n"
            f"  fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;\n"
            f"  server {{ listen 127.0.0.1:{port} http2; keepalive_requests 10; "
            f"root {d}/www; }} }}\n")
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(conf)
    proc = subprocess.Popen([NGINX, "-e", f"{d}/error.log", "-c", f"{d}/nginx.conf", "-p", d],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.skip("nginx did not start")
            time.sleep(0.02)
    yield f"http://127.0.0.1:{port}/b", log
    proc.terminate()
    proc.wait(10)


def _logged(log: str, expect: int) -> list[str]:
    deadline = time.monotonic() + 3  # nginx writes the line after the response
    while True:
        with open(log) as f:
            lines = f.read().split("\n")[:-1]
        if len(lines) >= expect or time.monotonic() > deadline:
            return lines
        time.sleep(0.02)


def test_goaway_streams_are_sent_again(nginx):
    url, log = nginx
    with Client(http2=True) as c:
        rs = c.get_many([url] * 50)
        more = c.get_many([url] * 7)
        # beyond nginx's 128 streams: some were never submitted when its GOAWAY came
        big = c.get_many([url] * 200)
    assert [(r.status, r.body) for r in rs + more + big] == [(200, BODY)] * 257
    time.sleep(0.1)  # a duplicate would show up in the log now
    assert _logged(log, 257) == ["HTTP/2.0 200"] * 257
