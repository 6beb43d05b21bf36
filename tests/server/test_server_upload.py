"""Upload integrity: 200 POSTs of random sizes (0 B .. 5 MB, Content-Length and
chunked) to /sink; the server's byte counts and CRC32 match the client's.
Echo round trips and HTTPS uploads too."""

from __future__ import annotations

import http.client
import json
import os
import random
import ssl
import zlib

import httpbench
import pytest
import requests

MAX = 5 * 1024 * 1024
POOL = os.urandom(MAX)  # bodies are slices of this (no per-request copies)


def chunks(view: memoryview, rng: random.Random):
    """Split a body into random-size pieces for chunked encoding."""
    pos = 0
    while pos < len(view):
        k = rng.choice((1, 7, 1000, 65536, 300_000))
        yield view[pos:pos + k]
        pos += k


def sink(conn: http.client.HTTPConnection, body: memoryview, chunked: bool, rng) -> dict:
    if chunked:
        conn.request("POST", "/sink", body=chunks(body, rng), encode_chunked=True,
                     headers={"Transfer-Encoding": "chunked"})
    else:
        conn.request("POST", "/sink", body=body, headers={"Content-Length": str(len(body))})
    r = conn.getresponse()
    assert r.status == 200
    return json.loads(r.read())


@pytest.mark.slow
def test_two_hundred_random_uploads():
    rng = random.Random(20240601)
    view = memoryview(POOL)
    with httpbench.Server() as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        total = 0
        sizes = [0, 1, MAX] + [rng.randint(0, MAX) for _ in range(197)]
        for i, n in enumerate(sizes):
            off = rng.randint(0, MAX - n)
            body = view[off:off + n]
            got = sink(conn, body, chunked=(i % 2 == 1), rng=rng)
            assert got == {"bytes": n, "crc32": f"{zlib.crc32(body):08x}"}, (i, n)
            total += n
        conn.close()
        st = srv.stats()
        assert st["by_route"]["sink"] == 200 and st["by_status"] == {200: 200}
        assert st["body_bytes_in"] == total
        assert st["connections_accepted"] == 1  # all on one keep-alive connection
        assert st["bytes_in"] > total


def test_echo_round_trips():
    rng = random.Random(7)
    view = memoryview(POOL)
    with httpbench.Server() as srv, requests.Session() as s:
        for i in range(30):
            n = rng.choice([0, 1, 100, 65535, 65536, 65537, rng.randint(0, 1_500_000)])
            body = bytes(view[:n])
            if i % 2:
                r = s.post(srv.url + "/echo", data=iter([body[:n // 2], body[n // 2:]]),
                           timeout=30)  # a generator body is sent chunked
                assert r.headers.get("Transfer-Encoding") == "chunked" or n == 0
            else:
                r = s.post(srv.url + "/echo", data=body, timeout=30)
                assert r.headers["Content-Length"] == str(n)
            assert r.status_code == 200 and r.content == body, (i, n)
        assert srv.stats()["connections_accepted"] == 1


@pytest.mark.parametrize("chunked", [False, True])
def test_https_uploads(chunked):
    rng = random.Random(99)
    view = memoryview(POOL)
    with httpbench.Server(tls=True) as srv:
        ctx = ssl.create_default_context(cafile=srv.ca_file)
        conn = http.client.HTTPSConnection("127.0.0.1", srv.port, context=ctx, timeout=30)
        for n in (0, 1, 16383, 16384, 16385, 1_000_000, MAX):
            body = view[:n]
            got = sink(conn, body, chunked, rng)
            assert got == {"bytes": n, "crc32": f"{zlib.crc32(body):08x}"}
        conn.close()
