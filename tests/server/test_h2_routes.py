"""HTTP/2 in the embedded server, against real clients: curl with prior
knowledge (h2c) and over TLS (ALPN h2, certificate verified), and h2load.
Every route answers with the bytes it sends over HTTP/1.1; the server's own
stats must count each stream exactly once, under h2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import httpbench
import pytest
from httpbench import expected_bytes
from httpbench._server import crc32

pytestmark = pytest.mark.own_server

CURL = shutil.which("curl")
H2LOAD = shutil.which("h2load")


def _curl(url: str, *args: str, ca: str | None = None, tls: bool = False,
          out: str | None = None) -> tuple[int, str, bytes]:
    """(exit code, "status version", body) of one curl request over h2."""
    if CURL is None:
        pytest.skip("curl not installed")
    proto = ["--http2", "--cacert", ca] if tls else ["--http2-prior-knowledge"]
    r = subprocess.run([CURL, "-sS", *proto, "-o", out or "-", "-w", "\n%{http_code} %{http_version}",
                        *args, url], capture_output=True, timeout=30)
    body, _, meta = r.stdout.rpartition(b"\n")
    return r.returncode, meta.decode(), body


def _delta(before: dict, after: dict, key: str) -> dict:
    return {k: v - before[key].get(k, 0) for k, v in after[key].items() if v != before[key].get(k, 0)}


# (path, curl args, expected status, expected body)
ROUTES = [
    ("/", (), 200, b"httpbench test server\n"),
    ("/bytes/0", (), 200, b""),
    ("/bytes/150", (), 200, expected_bytes(150)),
    ("/bytes/300000", (), 200, expected_bytes(300000)),
    ("/chunked/70000?chunk=1000", (), 200, expected_bytes(70000)),
    ("/sink", ("--data-binary", "hello h2"), 200,
     json.dumps({"bytes": 8, "crc32": f"{crc32(b'hello h2'):08x}"}).encode()),
    ("/echo", ("--data-binary", "echo me"), 200, b"echo me"),
    ("/delay/20?bytes=33", (), 200, expected_bytes(33)),
    ("/status/201", (), 201, b""),
    ("/status/204", (), 204, b""),
    ("/drip/6?interval_ms=2&chunk=4", (), 200, expected_bytes(6)),
    ("/fault/stall/30?bytes=1000", (), 200, expected_bytes(1000)),
    ("/fault/early-response?status=413", ("--data-binary", "x" * 5000), 413, b"early response\n"),
    ("/nope", (), 404, b"not found\n"),
    ("/bytes/x", (), 400, b"bad parameter\n"),
]


def _route_of(path: str) -> str:
    """The stats bucket of a path in ROUTES."""
    p = path.split("?")[0]
    if p == "/":
        return "root"
    if p.startswith("/fault/"):
        return p.split("/")[2].replace("-", "_")
    name = p.split("/")[1]
    return name if name in ("bytes", "chunked", "sink", "echo", "delay", "status", "drip") \
        else "not_found"


@pytest.mark.h2_server
@pytest.mark.slow
@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2-tls"])
def test_curl_every_route_byte_exact(server, tls_server, tls):
    srv = tls_server if tls else server
    before = srv.stats()
    for path, args, status, body in ROUTES:
        rc, meta, got = _curl(srv.url + path, *args, ca=srv.ca_file if tls else None, tls=tls)
        assert rc == 0, (path, rc)
        assert meta == f"{status} 2", (path, meta)
        assert got == body, path
    after = srv.stats()
    n = len(ROUTES)
    assert after["requests"] - before["requests"] == n
    assert _delta(before, after, "by_protocol") == {"h2": n}
    assert _delta(before, after, "connections_by_protocol") == {"h2": n}
    assert after["h2"]["streams"] - before["h2"]["streams"] == n
    want: dict[str, int] = {}
    for path, *_ in ROUTES:
        name = _route_of(path)
        want[name] = want.get(name, 0) + 1
    assert _delta(before, after, "by_route") == want
    assert _delta(before, after, "by_status") == {200: 10, 201: 1, 204: 1, 413: 1, 404: 1, 400: 1}
    if tls:
        assert after["tls_handshakes"] - before["tls_handshakes"] == n


@pytest.mark.h2_server
def test_stats_page_over_h2(server):
    rc, meta, body = _curl(server.url + "/__stats")
    assert rc == 0 and meta == "200 2"
    doc = json.loads(body)
    assert doc["by_protocol"]["h2"] == server.stats()["by_protocol"]["h2"]
    assert doc["h2"]["settings"] == {"max_concurrent_streams": 100, "initial_window_size": 65535,
                                     "max_frame_size": 16384}
    assert set(doc["connections_by_protocol"]) == {"http/1.1", "h2"}


@pytest.mark.h2_server
def test_faults_map_to_h2(server):
    before = server.stats()
    rc, _, _ = _curl(server.url + "/fault/reset")
    assert rc == 92  # curl: HTTP/2 stream error (RST_STREAM)
    rc, _, got = _curl(server.url + "/fault/close-mid-body?bytes=10000")
    assert rc == 18 and got == expected_bytes(5000)  # half the body, then GOAWAY and close
    rc, _, got = _curl(server.url + "/fault/close-after-headers?bytes=100")
    assert rc == 18 and got == b""
    after = server.stats()
    h2b, h2a = before["h2"], after["h2"]
    assert h2a["streams_reset_sent"] - h2b["streams_reset_sent"] == 1
    assert h2a["goaway_sent"] - h2b["goaway_sent"] == 2
    assert h2a["protocol_errors"] == h2b["protocol_errors"]
    assert _delta(before, after, "by_status") == {0: 1, 200: 2}
    assert _delta(before, after, "by_route") == {"reset": 1, "close_mid_body": 1,
                                                 "close_after_headers": 1}


def test_http11_still_http11_on_the_same_port(server, tls_server):
    before, tbefore = server.stats(), tls_server.stats()
    r = subprocess.run([CURL or "curl", "-sS", "--http1.1", server.url + "/bytes/10"],
                       capture_output=True, timeout=30)
    assert r.stdout == expected_bytes(10)
    r = subprocess.run([CURL or "curl", "-sS", "--http1.1", "--cacert", tls_server.ca_file,
                        tls_server.url + "/bytes/10"], capture_output=True, timeout=30)
    assert r.stdout == expected_bytes(10)
    after, tafter = server.stats(), tls_server.stats()
    assert _delta(before, after, "by_protocol") == {"http/1.1": 1}
    assert _delta(before, after, "connections_by_protocol") == {"http/1.1": 1}
    assert _delta(tbefore, tafter, "connections_by_protocol") == {"http/1.1": 1}


def test_http2_off():
    with httpbench.Server(http2=False) as srv:
        rc, meta, _ = _curl(srv.url + "/bytes/5")
        assert rc != 0  # the preface is answered as a bad HTTP/1.1 request
        st = srv.stats()
        assert st["by_protocol"] == {"http/1.1": 1, "h2": 0}
        assert st["by_route"]["bad_request"] == 1
        assert st["connections_by_protocol"] == {"http/1.1": 1, "h2": 0}


@pytest.mark.parametrize("kw, name", [
    ({"h2_max_concurrent_streams": 0}, "h2_max_concurrent_streams"),
    ({"h2_max_concurrent_streams": 100001}, "h2_max_concurrent_streams"),
    ({"h2_initial_window_size": -1}, "h2_initial_window_size"),
    ({"h2_initial_window_size": 2**31}, "h2_initial_window_size"),
    ({"h2_max_frame_size": 16383}, "h2_max_frame_size"),
    ({"h2_max_frame_size": 2**24}, "h2_max_frame_size"),
    ({"h2_max_frame_size": True}, "h2_max_frame_size"),
])
def test_settings_validated(kw, name):
    with pytest.raises(ValueError, match=name + r" must be an int in \d+\.\.\d+"):
        httpbench.Server(**kw)


@pytest.mark.h2_server
def test_settings_reach_the_stats():
    with httpbench.Server(h2_max_concurrent_streams=7, h2_initial_window_size=1 << 20,
                          h2_max_frame_size=65536) as srv:
        rc, _, got = _curl(srv.url + "/bytes/200000")
        assert rc == 0 and got == expected_bytes(200000)
        assert srv.stats()["h2"]["settings"] == {
            "max_concurrent_streams": 7, "initial_window_size": 1 << 20, "max_frame_size": 65536}


@pytest.mark.h2_server
def test_cli_h2_flags():
    exe = [sys.executable, "-m", "httpbench", "serve", "--port", "0"]
    r = subprocess.run(exe + ["--h2-window", "-1"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "h2_initial_window_size must be an int in 0..2147483647" in r.stderr
    r = subprocess.run(exe + ["--no-h2", "--h2-max-streams", "5", "--duration", "0"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "(1 thread(s), HTTP/1.1)" in r.stdout
    r = subprocess.run(exe + ["--h2-max-frame", "20000", "--duration", "0"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "HTTP/1.1 and h2c" in r.stdout


def _h2load(url: str, *args: str) -> str:
    if H2LOAD is None:
        pytest.skip("h2load not installed (apt-get install nghttp2-client)")
    r = subprocess.run([H2LOAD, *args, url], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.h2_server
@pytest.mark.slow
@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2-tls"])
def test_h2load_counts_exact(server, tls_server, tls, tmp_path):
    srv = tls_server if tls else server
    upload = tmp_path / "up"
    upload.write_bytes(b"u" * 3000)
    runs = [("/bytes/150", ()), ("/chunked/5000?chunk=100", ()), ("/status/202", ()),
            ("/delay/1", ()), ("/sink", ("-d", str(upload))), ("/echo", ("-d", str(upload))),
            ("/drip/3?interval_ms=1&chunk=1", ()), ("/", ())]
    before = srv.stats()
    for path, extra in runs:
        out = _h2load(srv.url + path, "-n", "200", "-c", "2", "-m", "10", *extra)
        assert "200 succeeded, 0 failed, 0 errored" in out, out
        assert "TLS Protocol" in out if tls else "TLS Protocol" not in out
    after = srv.stats()
    n = 200 * len(runs)
    assert _delta(before, after, "by_protocol") == {"h2": n}
    assert _delta(before, after, "by_status") == {200: n - 200, 202: 200}
    assert _delta(before, after, "by_route") == {
        "bytes": 200, "chunked": 200, "status": 200, "delay": 200, "sink": 200, "echo": 200,
        "drip": 200, "root": 200}
    assert after["body_bytes_in"] - before["body_bytes_in"] == 2 * 200 * 3000
    assert after["h2"]["streams"] - before["h2"]["streams"] == n
    assert after["h2"]["protocol_errors"] == before["h2"]["protocol_errors"]
    assert _delta(before, after, "connections_by_protocol") == {"h2": 2 * len(runs)}


@pytest.mark.h2_server
def test_echo_large_upload_byte_exact(server, tmp_path):
    data = expected_bytes(400000, 123)
    up = tmp_path / "up"
    up.write_bytes(data)
    rc, meta, got = _curl(server.url + "/echo", "--data-binary", f"@{up}")
    assert rc == 0 and meta == "200 2" and got == data


@pytest.mark.h2_server
@pytest.mark.slow
def test_h2load_errors_and_faults_counted(server):
    before = server.stats()
    out = _h2load(server.url + "/nope", "-n", "50", "-c", "2", "-m", "5")
    assert "0 succeeded, 50 failed, 0 errored" in out and "50 4xx" in out
    out = _h2load(server.url + "/fault/stall/1?bytes=100", "-n", "50", "-c", "2", "-m", "5")
    assert "50 succeeded, 0 failed, 0 errored" in out
    out = _h2load(server.url + "/fault/reset", "-n", "50", "-c", "2", "-m", "5")
    assert "0 succeeded, 50 failed, 50 errored" in out  # every stream reset, connections kept
    after = server.stats()
    assert _delta(before, after, "by_route") == {"not_found": 50, "stall": 50, "reset": 50}
    assert _delta(before, after, "by_status") == {404: 50, 200: 50, 0: 50}
    assert after["h2"]["streams_reset_sent"] - before["h2"]["streams_reset_sent"] == 50
    assert after["h2"]["goaway_sent"] == before["h2"]["goaway_sent"]
    assert _delta(before, after, "connections_by_protocol") == {"h2": 6}


@pytest.mark.h2_server
@pytest.mark.slow
def test_h2_in_a_server_process_with_two_workers():
    with httpbench.start_process(threads=2, h2_max_concurrent_streams=20) as p:
        out = _h2load(p.url + "/bytes/150", "-n", "2000", "-c", "8", "-m", "10")
        assert "2000 succeeded, 0 failed, 0 errored" in out
        st = p.stats()  # over the child's pipe: the same keys as Server.stats()
        assert st["by_protocol"] == {"http/1.1": 0, "h2": 2000}
        assert st["connections_by_protocol"] == {"http/1.1": 0, "h2": 8}
        assert st["h2"]["streams"] == 2000 and st["requests"] == 2000
        assert st["h2"]["settings"]["max_concurrent_streams"] == 20
