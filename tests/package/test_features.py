"""What a build has: ``httpbench.features()``, ``httpbench --version``, and the clear
refusal of the HTTP/2 server's features in a build without nghttp2 (the same tests
run in both builds; each checks what its build must do)."""

from __future__ import annotations

import socket
import subprocess
import sys

import httpbench
import pytest

H2 = httpbench.features()["http2-server"]
MISSING = ("this build has no HTTP/2 server: install libnghttp2-dev (or the distribution's "
           "nghttp2 headers) and reinstall")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "httpbench", *args], capture_output=True,
                          text=True, timeout=120)


def test_features_lists_the_build():
    f = httpbench.features()
    assert set(f) == {"http2-server", "http2-client", "tls", "callgrind", "http3-server",
                      "http3-client"}
    assert all(isinstance(v, bool) for v in f.values())
    assert f["http2-client"] and f["tls"]  # our own code: in every build
    assert f is not httpbench.features()  # a fresh dict: callers may change theirs


def test_version_names_what_the_build_has_and_lacks():
    p = _cli("--version")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"httpbench {httpbench.__version__}"
    have = [k for k, v in httpbench.features().items() if v]
    assert lines[1] == "built with: " + ", ".join(have)
    if H2:
        assert "http2-server" in lines[1] and MISSING not in p.stdout
    else:
        assert f"built without http2-server: {MISSING}" in lines


def test_server_http2_follows_the_build():
    with httpbench.Server() as srv:
        assert srv.http2 is H2
    with httpbench.Server(http2=False) as srv:
        assert srv.http2 is False
    if H2:
        with httpbench.Server(http2=True) as srv:
            assert srv.http2 is True
    else:
        with pytest.raises(httpbench.FeatureUnavailable) as ei:
            httpbench.Server(http2=True)
        assert str(ei.value) == f"Server(http2=True): {MISSING}"
        assert isinstance(ei.value, httpbench.HttpbenchError)


@pytest.mark.skipif(H2, reason="a build with the HTTP/2 server answers the preface over h2c")
def test_without_h2_server_an_h2c_preface_is_http11_and_counted():
    with httpbench.Server() as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            s.shutdown(socket.SHUT_WR)
            got = b""
            while chunk := s.recv(65536):
                got += chunk
        assert got.startswith(b"HTTP/1.1 400 "), got[:80]
        st = srv.stats()
    assert st["connections_by_protocol"] == {"http/1.1": 1, "h2": 0}
    assert st["by_protocol"]["h2"] == 0


def test_serve_h2_flag():
    if H2:
        p = _cli("serve", "--h2", "--port", "0", "--duration", "0.2")
        assert p.returncode == 0, p.stderr
        assert "HTTP/1.1 and h2c" in p.stdout
    else:
        p = _cli("serve", "--h2", "--port", "0", "--duration", "0.2")
        assert p.returncode == 2 and p.stderr == f"httpbench serve: --h2: {MISSING}\n"
        p = _cli("serve", "--port", "0", "--duration", "0.2")
        assert p.returncode == 0, p.stderr
        assert "(1 thread(s), HTTP/1.1)" in p.stdout


def test_compare_h2_scenario_in_a_build_without_it():
    if H2:
        pytest.skip("this build has the HTTP/2 server (the h2 scenarios run: tests/compare)")
    p = _cli("compare", "--clients", "native", "--scenarios", "get-150b,h2-get-150b", "--quick",
             "--no-out")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1] == f"httpbench compare: scenario h2-get-150b: {MISSING}"
    with pytest.raises(httpbench.FeatureUnavailable, match="scenario h2-get-150b"):
        httpbench.compare(clients=["native"], scenarios=["h2-get-150b"], n=10, repeat=1,
                          plots=False)
