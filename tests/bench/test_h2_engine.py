"""The load generator over HTTP/2 (bench(http2=True), ``httpbench URL --h2``) against
nginx (Debian's build has http_v2): exact accounting against nginx's own access log,
typed stream errors (RST_STREAM, GOAWAY), and the refusal to fall back to HTTP/1.1."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator

import httpbench
import pytest

NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None)

BODY = bytes(range(150))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class H2Nginx:
    """nginx with: h2c (prior knowledge), h2 over TLS, HTTP/1.1-only plain and TLS ports,
    and an h2c port that sends GOAWAY after 5 requests per connection. The access
    log has one "port status" line per request."""

    def __init__(self, d: str) -> None:
        self.dir = d
        self.ports = {k: _free_port() for k in ("h2c", "h2", "h1", "h1tls", "goaway",
                                                "nostreams")}
        crt, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
            check=True, capture_output=True, timeout=30)
        self.ca_file = crt
        www = os.path.join(d, "www")
        os.makedirs(www)
        os.makedirs(os.path.join(d, "tmp"))
        with open(os.path.join(www, "150b"), "wb") as f:
            f.write(BODY)
        self.log = os.path.join(d, "access.log")
        p = self.ports
        tls = f"ssl_certificate {crt}; ssl_certificate_key {key};"
        user = "user root;\n" if os.geteuid() == 0 else ""
        common = (f"root {www}; location = /rst {{ return 444; }}")
        conf = (
            f"{user}worker_processes 1; daemon off; pid {d}/nginx.pid;\n"
            f"error_log {d}/error.log warn;\n"
            "events { worker_connections 1024; }\n"
            "http {\n"
            "  log_format hb '$server_port $status';\n"
            f"  access_log {self.log} hb;\n"
            "  keepalive_requests 100000000; keepalive_timeout 300s;\n"
            f"  client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp;\n"
            f"  fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;\n"
            f"  server {{ listen 127.0.0.1:{p['h2c']} http2; listen 127.0.0.1:{p['h1']};\n"
            f"    listen 127.0.0.1:{p['h2']} ssl http2; listen 127.0.0.1:{p['h1tls']} ssl;\n"
            f"    {tls} {common} }}\n"
            f"  server {{ listen 127.0.0.1:{p['goaway']} http2; keepalive_requests 5; {common} }}\n"
            f"  server {{ listen 127.0.0.1:{p['nostreams']} http2; "
            f"http2_max_concurrent_streams 0; {common} }}\n"
            "}\n")
        self.conf = os.path.join(d, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen([NGINX, "-e", f"{d}/error.log", "-c", self.conf, "-p", d],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not self._ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.skip("nginx did not start")
            time.sleep(0.02)

    def _ready(self) -> bool:
        for port in self.ports.values():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    pass
            except OSError:
                return False
        return True

    def url(self, kind: str, path: str = "/150b") -> str:
        scheme = "https" if kind in ("h2", "h1tls") else "http"
        return f"{scheme}://127.0.0.1:{self.ports[kind]}{path}"

    def counts(self) -> Counter[tuple[str, str]]:
        """(port kind, status) -> requests nginx logged (it writes the line when done)."""
        by_port = {str(v): k for k, v in self.ports.items()}
        c: Counter[tuple[str, str]] = Counter()
        with open(self.log) as f:
            for line in f:
                port, status = line.split()
                c[(by_port[port], status)] += 1
        return c

    def reset_log(self) -> None:
        open(self.log, "w").close()
        os.kill(self.proc.pid, signal.SIGUSR1)  # reopen the log
        time.sleep(0.05)

    def settle(self, expect: int, kind: str) -> Counter[tuple[str, str]]:
        """The log once it holds `expect` lines for `kind` (nginx logs after the response)."""
        deadline = time.monotonic() + 3
        while True:
            c = self.counts()
            if sum(v for (k, _), v in c.items() if k == kind) >= expect or \
                    time.monotonic() > deadline:
                return c
            time.sleep(0.02)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture(scope="module")
def ng() -> Iterator[H2Nginx]:
    if NGINX is None or shutil.which("openssl") is None:
        pytest.skip("nginx (with http_v2) and openssl are needed: apt-get install nginx openssl")
    with tempfile.TemporaryDirectory(prefix="hb-h2-") as d:
        os.chmod(d, 0o755)  # workers drop privileges when started as root
        n = H2Nginx(d)
        try:
            yield n
        finally:
            n.stop()


@pytest.fixture()
def fresh(ng: H2Nginx) -> H2Nginx:
    ng.reset_log()
    return ng


# ---- exact accounting ----

def test_n_exact_h2c(fresh: H2Nginx) -> None:
    r = httpbench.bench(fresh.url("h2c"), http2=True, streams=7, concurrency=3, n=1001)
    assert (r.responses, r.successes, r.errors, r.in_flight_at_stop) == (1001, 1001, 0, 0)
    assert r.config.protocol == "h2" and r.config.streams == 7
    assert r.metadata["doc_length"] == 150 and r.metadata["body_bytes_in"] == 1001 * 150
    assert r.connections == 3
    assert set(r.error_counts) >= {"rst_stream", "goaway", "protocol"}
    assert fresh.settle(1001, "h2c") == Counter({("h2c", "200"): 1001})


def test_n_exact_h2_tls_verified(fresh: H2Nginx) -> None:
    r = httpbench.bench(fresh.url("h2"), http2=True, streams=10, concurrency=2, n=500,
                        ca_file=fresh.ca_file)
    assert (r.responses, r.successes, r.errors) == (500, 500, 0)
    assert r.metadata["tls_info"].endswith(",h2")
    assert fresh.settle(500, "h2") == Counter({("h2", "200"): 500})
    # Verification is on by default, as for HTTP/1.1.
    r = httpbench.bench(fresh.url("h2"), http2=True, n=3)
    assert r.responses == 0 and r.error_counts["tls"] == 3


def test_rate_exact_per_stream_slot(fresh: H2Nginx) -> None:
    r = httpbench.bench(fresh.url("h2c"), http2=True, streams=4, concurrency=2, n=200,
                        rate=2000)
    assert (r.responses, r.errors, r.sends, r.unsent) == (200, 0, 200, 0)
    assert r.latency_uncorrected is not None
    assert fresh.settle(200, "h2c") == Counter({("h2c", "200"): 200})


def test_warmup_and_no_keepalive(fresh: H2Nginx) -> None:
    r = httpbench.bench(fresh.url("h2c"), http2=True, streams=4, concurrency=2, n=100,
                        warmup=0.2)
    warm = r.metadata["warmup_requests"]
    assert r.responses == 100 and warm > 0
    assert fresh.settle(100 + warm, "h2c") == Counter({("h2c", "200"): 100 + warm})
    fresh.reset_log()
    r = httpbench.bench(fresh.url("h2c"), http2=True, concurrency=2, n=20, keepalive=False)
    assert (r.responses, r.errors, r.connections) == (20, 0, 20)
    assert fresh.settle(20, "h2c") == Counter({("h2c", "200"): 20})


@pytest.mark.slow
def test_duration_accounts_every_stream(fresh: H2Nginx) -> None:
    r = httpbench.bench(fresh.url("h2c"), http2=True, streams=8, concurrency=2, duration=1)
    assert r.errors == 0 and r.responses > 100
    logged = sum(fresh.settle(r.responses, "h2c").values())
    # Streams still in flight at the end may or may not have reached nginx.
    assert r.responses <= logged <= r.responses + r.in_flight_at_stop


# ---- typed errors ----

def test_rst_stream_counted(fresh: H2Nginx) -> None:
    # nginx answers `return 444` on HTTP/2 by resetting the stream.
    r = httpbench.bench(fresh.url("h2c", "/rst"), http2=True, streams=3, n=9)
    assert r.responses == 0 and r.error_counts["rst_stream"] == 9 and r.errors == 9
    assert r.metadata["first_error"].startswith("rst_stream: ")


def test_goaway_streams_typed(fresh: H2Nginx) -> None:
    # 5 requests per connection, then GOAWAY: streams above its last id are not processed
    # (16 streams go out together once nginx's SETTINGS arrive, so some always are).
    r = httpbench.bench(fresh.url("goaway"), http2=True, streams=16, concurrency=1, n=60)
    assert r.responses + r.error_counts["goaway"] == 60
    assert r.errors == r.error_counts["goaway"]
    assert r.error_counts["goaway"] > 0 and r.responses <= 5 * r.connections
    assert fresh.settle(r.responses, "goaway") == Counter({("goaway", "200"): r.responses})


def test_server_allowing_no_streams_ends(fresh: H2Nginx) -> None:
    # SETTINGS_MAX_CONCURRENT_STREAMS 0: each connection's first stream (sent before the
    # SETTINGS) is refused, then the connection is dropped; -n still ends, every stream typed.
    r = httpbench.bench(fresh.url("nostreams"), http2=True, streams=3, n=3)
    assert r.responses == 0 and r.error_counts["rst_stream"] == 3 == r.errors
    assert "REFUSED_STREAM" in r.metadata["first_error"]


def test_server_without_h2c_is_a_typed_error(fresh: H2Nginx) -> None:
    with pytest.raises(httpbench.HTTP2NotSupported, match="does not speak HTTP/2.*HTTP/1.1 400"):
        httpbench.bench(fresh.url("h1"), http2=True, n=5)


def test_server_without_h2_alpn_is_a_typed_error(fresh: H2Nginx) -> None:
    with pytest.raises(httpbench.HTTP2NotSupported, match="ALPN selected 'http/1.1'"):
        httpbench.bench(fresh.url("h1tls"), http2=True, n=5, ca_file=fresh.ca_file)
    # The same server is fine over HTTP/1.1.
    assert httpbench.bench(fresh.url("h1tls"), n=2, ca_file=fresh.ca_file).responses == 2


# ---- the CLI ----

def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "httpbench", *args], capture_output=True,
                          text=True, timeout=60)


def test_cli_h2_report_and_errors(fresh: H2Nginx) -> None:
    p = _cli(fresh.url("h2c"), "--h2", "-m", "5", "-c", "2", "-n", "300", "-q")
    assert p.returncode == 0, p.stderr
    assert "Protocol:               HTTP/2 (h2c, prior knowledge)" in p.stdout
    assert "Streams per connection: 5 (10 in flight)" in p.stdout
    assert "Complete requests:      300" in p.stdout
    p = _cli(fresh.url("h1"), "--h2", "-n", "3", "-q")
    assert p.returncode == 1 and "HTTP2NotSupported" in p.stderr and "HTTP/2" in p.stderr


def test_h2load_counts_agree(fresh: H2Nginx) -> None:
    h2load = shutil.which("h2load")
    if h2load is None:
        pytest.skip("h2load not installed (apt-get install nghttp2-client)")
    subprocess.run([h2load, "-n", "400", "-c", "4", "-m", "10", fresh.url("h2c")],
                   check=True, capture_output=True, timeout=60)
    theirs = fresh.settle(400, "h2c")
    fresh.reset_log()
    r = httpbench.bench(fresh.url("h2c"), http2=True, streams=10, concurrency=4, n=400)
    assert r.responses == 400
    assert fresh.settle(400, "h2c") == theirs == Counter({("h2c", "200"): 400})


# ---- arguments (no server) ----

def test_arguments() -> None:
    url = "http://127.0.0.1:9/"
    with pytest.raises(ValueError, match="needs http2=True"):
        httpbench.bench(url, streams=2, n=1)
    with pytest.raises(ValueError, match="use streams"):
        httpbench.bench(url, http2=True, pipeline=2, n=1)
    with pytest.raises(ValueError, match="streams must be 1"):
        httpbench.bench(url, http2=True, streams=2, keepalive=False, n=1)
    with pytest.raises(ValueError, match="streams"):
        httpbench.bench(url, http2=True, streams=0, n=1)
    with pytest.raises(ValueError, match="not allowed in HTTP/2"):
        httpbench.bench(url, http2=True, headers={"Connection": "keep-alive"}, n=1)
    with pytest.raises(ValueError, match="from memory"):
        import pathlib

        httpbench.bench(url, http2=True, body=pathlib.Path(__file__), n=1)


@pytest.mark.slow
def test_cli_m_flag() -> None:
    url = "http://127.0.0.1:9/"
    p = _cli(url, "--h2", "-m", "POST", "-n", "1")
    assert p.returncode == 2 and "-X POST" in p.stderr
    p = _cli(url, "-m", "4", "-n", "1")
    assert p.returncode == 2 and "--h2" in p.stderr
    p = _cli(url, "--h2", "-m", "0", "-n", "1")
    assert p.returncode == 2 and "1..1024" in p.stderr
    p = _cli(url, "--h2", "--pipeline", "2", "-n", "1")
    assert p.returncode == 2 and "-m STREAMS" in p.stderr
