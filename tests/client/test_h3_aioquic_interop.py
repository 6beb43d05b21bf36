"""Our HTTP/3 client and load generator (our own framing and QPACK over ngtcp2) against
another implementation: aioquic's HTTP/3 server (benchmarks/h3_aioquic_server.py, which
uses pylsqpack for QPACK), with exact counts from that server's own stats and
byte-exact bodies."""

from __future__ import annotations

import json
import os
import shutil
import sys
import zlib

import httpbench
import pytest
from httpbench import Client, expected_bytes
from httpbench._features import h3_missing

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

pytest.importorskip("aioquic", reason="aioquic not installed (pip install 'httpbench[h3]')")
needs_h3 = pytest.mark.skipif(not httpbench.features()["http3-client"] or h3_missing() is not None,
                              reason=f"built without HTTP/3: {h3_missing()}")


@pytest.fixture(scope="module")
def aioquic_server():
    import h3_aioquic_server as aq

    d, chain, key, ca = aq.temp_certificate()
    srv = aq.H3Server(chain, key, "127.0.0.1", 0).start()
    try:
        yield srv, ca
    finally:
        srv.stop()
        shutil.rmtree(d, ignore_errors=True)


@needs_h3
def test_client_against_aioquic(aioquic_server) -> None:
    srv, ca = aioquic_server
    base = f"https://127.0.0.1:{srv.port}"
    before = srv.snapshot()["requests"]
    with Client(http3=True, ca_file=ca, timeout=10) as c:
        for n in (0, 150, 5000, 100_000):
            r = c.get(f"{base}/bytes/{n}")
            assert r.status == 200
            assert r.body == expected_bytes(n)
            assert r.headers["content-length"] == str(n)
        body = bytes(range(256)) * 300
        r = c.request("POST", f"{base}/sink", body=body)
        assert json.loads(r.body) == {"bytes": len(body), "crc32": f"{zlib.crc32(body):08x}"}
        r = c.get(f"{base}/status/404")
        assert r.status == 404 and r.body == b""
    assert srv.snapshot()["requests"] - before == 6


@needs_h3
@pytest.mark.parametrize("conc,streams", [(1, 1), (2, 10)])
def test_generator_against_aioquic(aioquic_server, conc: int, streams: int) -> None:
    srv, _ca = aioquic_server
    before = srv.snapshot()
    r = httpbench.bench(f"https://127.0.0.1:{srv.port}/bytes/150", n=300, concurrency=conc,
                        streams=streams, verify=False, timeout=30, http3=True)
    after = srv.snapshot()
    assert r.successes == 300 and r.errors == 0, r.metadata.get("first_error")
    assert after["requests"] - before["requests"] == 300
    assert after["by_route"].get("bytes", 0) - before["by_route"].get("bytes", 0) == 300
