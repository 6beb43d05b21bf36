"""httpbench.Client against the embedded server (httpbench._server.Server):
HTTPS with verification, wrong CA, deterministic bodies, a 30 MB download to
disk byte for byte, request bodies, the server's fault routes, keep-alive as
the server counts it."""

from __future__ import annotations

import json
import os
import time
import zlib

import pytest
from httpbench import Client, RemoteClosed, RequestTimeout, TLSError

_server = pytest.importorskip("httpbench._server")
Server = _server.Server
expected_bytes = _server.expected_bytes


def test_https_verified_against_server_ca(tls_server):
    with Client(ca_file=tls_server.ca_file) as c:
        for n in (0, 1, 150, 12 * 1024, 1_000_003):
            r = c.get(f"{tls_server.url}/bytes/{n}")
            assert r.status == 200 and r.body == expected_bytes(n)
        r = c.get(f"{tls_server.url}/chunked/300000?chunk=4096")
        assert r.body == expected_bytes(300000) and r.reused
        assert c.pool_stats()["connects"] == 1
    assert tls_server.stats()["tls_handshakes"] >= 1


def test_https_wrong_ca_is_tls_error(tls_server):
    with Server(tls=True) as other, Client(ca_file=other.ca_file) as c:
        with pytest.raises(TLSError, match="(?i)verif"):
            c.get(f"{tls_server.url}/bytes/10")


def test_https_without_ca_is_tls_error(tls_server):
    with Client() as c, pytest.raises(TLSError):
        c.get(f"{tls_server.url}/bytes/10")


def test_https_localhost_name_verifies(tls_server):
    with Client(ca_file=tls_server.ca_file) as c:
        r = c.get(f"https://localhost:{tls_server.port}/bytes/64")
        assert r.body == expected_bytes(64)


def _file_crc(path: str) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def test_download_30mb_byte_exact(server, tmp_path):
    n = 30 * 1024 * 1024
    p = tmp_path / "30mb.bin"
    with Client(timeout=60) as c:
        r = c.download(f"{server.url}/bytes/{n}", p)
    assert r.status == 200 and r.size == n and r.body == b""
    assert os.path.getsize(p) == n
    assert _file_crc(str(p)) == zlib.crc32(expected_bytes(n))


def test_download_chunked_over_tls_byte_exact(tls_server, tmp_path):
    n = 8 * 1024 * 1024 + 5
    p = tmp_path / "c.bin"
    with Client(ca_file=tls_server.ca_file, timeout=60) as c:
        r = c.download(f"{tls_server.url}/chunked/{n}?chunk=65536", p)
    assert r.size == n and p.read_bytes() == expected_bytes(n)


def test_keepalive_counted_by_server():
    with Server() as s, Client() as c:
        for _ in range(50):
            assert c.get(f"{s.url}/bytes/150").body == expected_bytes(150)
        st = s.stats()
        assert st["requests"] == 50 and st["connections_accepted"] == 1


def test_upload_to_sink_and_echo(server, tmp_path):
    data = os.urandom(2_000_000)
    p = tmp_path / "up.bin"
    p.write_bytes(data)
    with Client() as c:
        r = c.request("POST", f"{server.url}/sink", body=p)
        info = json.loads(r.body)
        assert info["bytes"] == len(data) and int(info["crc32"], 16) == zlib.crc32(data)
        r = c.request("PUT", f"{server.url}/echo", body=data[:100_000])
        assert r.body == data[:100_000]
        with open(p, "rb") as f:
            r = c.request("POST", f"{server.url}/echo", body=f)
        assert r.body == data


@pytest.mark.parametrize(
    "path", ["/fault/close-mid-body", "/fault/close-after-headers", "/fault/reset"]
)
def test_fault_routes_raise_remote_closed(server, path):
    with Client(timeout=5) as c:
        with pytest.raises(RemoteClosed):
            c.get(server.url + path)
        assert c.get(f"{server.url}/bytes/5").body == expected_bytes(5)


@pytest.mark.parametrize("path", ["/fault/stall/3000", "/drip/1000?interval_ms=20"])
def test_stalling_and_dripping_time_out(server, path):
    with Client(timeout=0.4) as c:
        t0 = time.monotonic()
        with pytest.raises(RequestTimeout):
            c.get(server.url + path)
        assert 0.4 <= time.monotonic() - t0 < 3.0


def test_early_response_while_uploading(server):
    with Client(timeout=5) as c:
        r = c.request("POST", f"{server.url}/fault/early-response", body=b"x" * 5_000_000)
        assert r.status == 413


@pytest.mark.parametrize("code", [204, 304, 404, 500])
def test_status_routes(server, code):
    with Client() as c:
        r = c.get(f"{server.url}/status/{code}")
        assert r.status == code
        if code in (204, 304):
            assert r.body == b""
        r2 = c.get(f"{server.url}/bytes/3")
        assert r2.body == expected_bytes(3) and r2.reused


def test_close_while_other_threads_request(server):
    import threading

    c = Client(timeout=5)
    per_thread: list[list[str]] = [[] for _ in range(4)]
    deadline = time.monotonic() + 30

    def run(out: list[str]) -> None:
        # requests until the client is closed under it (bounded by the deadline)
        while time.monotonic() < deadline:
            try:
                body = c.get(f"{server.url}/bytes/1000").body
                out.append("ok" if body == expected_bytes(1000) else "bad body")
            except ValueError as e:
                out.append("closed" if "closed" in str(e) else repr(e))
            if out[-1] != "ok":
                return

    ts = [threading.Thread(target=run, args=(o,)) for o in per_thread]
    for t in ts:
        t.start()
    # close once every thread is mid-stream (a fixed sleep let all of them finish first
    # on a fast machine, and nothing was then closed under a request)
    while min(len(o) for o in per_thread) < 20 and time.monotonic() < deadline:
        time.sleep(0.005)
    c.close()
    for t in ts:
        t.join(30)
    for out in per_thread:
        # ok until the one clear "closed" error
        assert len(out) >= 20 and out[-1] == "closed" and set(out[:-1]) == {"ok"}, out[-3:]
    assert c.pool_stats()["open"] == 0


@pytest.mark.slow
def test_no_c_malloc_per_request_in_steady_state():
    """Under the preloaded malloc counter: 2000 keep-alive GETs of 150 B cost
    no malloc at all (the Response and body are small pymalloc objects; the
    pool reuses the connection and its buffer)."""
    import subprocess
    import sys

    try:
        from httpbench import native_alloc_preload_path

        lib = native_alloc_preload_path()
    except (ImportError, FileNotFoundError):
        pytest.skip("malloc counter library not built")
    code = """
import sys, httpbench
from httpbench import native_allocs
c = httpbench.Client()
url = sys.argv[1] + "/bytes/150"
for _ in range(200):
    c.get(url)
a = native_allocs()
for _ in range(2000):
    r = c.get(url)
b = native_allocs()
print(b["count"] - a["count"], len(r.body))
"""
    with _server.start_process() as srv:
        out = subprocess.run([sys.executable, "-c", code, srv.url], capture_output=True, text=True,
                             timeout=120, env=dict(os.environ, LD_PRELOAD=lib))
    assert out.returncode == 0, out.stderr
    mallocs, size = map(int, out.stdout.split())
    assert size == 150
    assert mallocs <= 20, f"{mallocs} mallocs over 2000 requests"


def test_threads_share_one_https_client(tls_server):
    import threading

    with Client(ca_file=tls_server.ca_file, max_connections_per_host=4) as c:
        errors: list[BaseException] = []
        counts = [0] * 4

        def run(i: int) -> None:
            try:
                for _ in range(40):
                    assert c.get(f"{tls_server.url}/bytes/2000").body == expected_bytes(2000)
                    counts[i] += 1
            except BaseException as e:  # reported below
                errors.append(e)

        ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        assert not errors and counts == [40] * 4
        st = c.pool_stats()
        assert 1 <= st["connects"] <= 4 and st["open"] <= 4
