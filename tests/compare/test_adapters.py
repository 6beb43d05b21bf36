"""Client adapters, driven directly (in this process) against the embedded server.

Every installed adapter makes real requests: bodies are compared byte for
byte with a reference read, POST bodies are proved intact by the sink's
byte count and CRC32, downloads are compared byte for byte on disk, and the
server's own stats prove keep-alive reuse (one connection for many
requests) and keep-alive off (one connection per request).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import zlib

import httpbench
import pytest
from httpbench._adapters import (
    ADAPTERS,
    DEFAULT_CLIENTS,
    WS_CLIENTS,
    Adapter,
    AdapterUnavailable,
    adapter_status,
    available_clients,
    load_adapter,
)
from httpbench._roundnotes import server_counts
from httpbench._scenarios import DEFAULT_SCENARIOS, SCENARIOS
from httpbench._worker import Worker, payload

INSTALLED = available_clients(DEFAULT_CLIENTS)
N = 4
# hyper-based clients hand a finished connection back to their pool from a background
# task: the next request can start before it is back and open one more connection
# (about 1 request in 300 here, more on a busy machine; the pool then keeps it)
POOL_RETURNS_LATE = {"pyreqwest", "pyreqwest-async", "wreq", "wreq-async", "primp",
                     "primp-async"}


@pytest.fixture(scope="module")
def servers():
    from httpbench import _server

    plain = _server.start_process(tls=False, threads=1)
    try:
        tls = _server.start_process(tls=True, threads=1)
    except Exception:
        plain.stop()
        raise
    yield {False: plain, True: tls}
    plain.stop()
    tls.stop()


def reference(srv, path: str) -> bytes:
    """The body as http.client reads it (the expected bytes)."""
    import ssl
    from urllib.parse import urlsplit

    u = urlsplit(srv.url)
    if u.scheme == "https":
        ctx = ssl.create_default_context(cafile=srv.ca_file)
        c = http.client.HTTPSConnection(u.hostname, u.port, timeout=30, context=ctx)
    else:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        c.request("GET", path)
        r = c.getresponse()
        assert r.status == 200
        return r.read()
    finally:
        c.close()


def counts(srv) -> dict:
    return server_counts(srv.stats())


def drive(name: str, srv, n: int = N, trust: bool = True, **params):
    """Set up adapter ``name``, make ``n`` requests, close; returns (adapter, server deltas:
    requests, connections, and requests per protocol). ``trust=False``: no CA file."""
    cls = load_adapter(name)
    a = cls()
    ca = srv.ca_file if srv.url.startswith("https") and trust else None
    s0 = counts(srv)
    if cls.kind == "async":
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(a.asetup(srv.url, ca, **params))
            for _ in range(n):
                loop.run_until_complete(a.request())
            loop.run_until_complete(a.aclose())
        finally:
            loop.close()
    else:
        a.setup(srv.url, ca, **params)
        try:
            for _ in range(n):
                a.request()
        finally:
            a.close()
    s1 = counts(srv)
    return a, {k: s1[k] - s0[k] for k in ("requests", "connections", "http1_requests",
                                          "h2_requests")}


@pytest.mark.parametrize("name", INSTALLED)
def test_get_bodies_byte_exact_one_connection(servers, name):
    srv = servers[False]
    for size in (150, 12000):
        path = f"/bytes/{size}"
        want = reference(srv, path)
        assert len(want) == size
        a, d = drive(name, srv, method="GET", path=path)
        assert a.last_status == 200
        assert a.last_body == want
        assert d["requests"] == N
        # keep-alive: one connection for all N requests (a process per request for the CLI)
        if name in POOL_RETURNS_LATE:
            assert 1 <= d["connections"] <= 2
        else:
            assert d["connections"] == (N if a.kind == "process" else 1)


@pytest.mark.parametrize("name", INSTALLED)
@pytest.mark.parametrize("source", ["mem", "file"])
def test_post_300k_reaches_sink_intact(servers, name, source, tmp_path):
    srv = servers[False]
    body = payload(300_000)
    params: dict = {"method": "POST", "path": "/sink"}
    if source == "mem":
        params["body"] = body
    else:
        f = tmp_path / "body.bin"
        f.write_bytes(body)
        params.update(body_file=str(f), body_size=len(body))
    a, d = drive(name, srv, n=2, **params)
    assert a.last_status == 200
    got = json.loads(a.last_body)
    assert got["bytes"] == 300_000
    assert got["crc32"].lower() == f"{zlib.crc32(body):08x}"
    assert d["requests"] == 2


@pytest.mark.parametrize("name", INSTALLED)
def test_download_to_disk_byte_exact(servers, name, tmp_path):
    srv = servers[False]
    path = "/bytes/7000000"
    want = reference(srv, path)
    out = tmp_path / "dl.bin"
    a, d = drive(name, srv, n=2, method="GET", path=path, download_path=str(out))
    assert a.last_status == 200
    assert out.read_bytes() == want
    assert d["requests"] == 2


# clients that cannot be held to HTTP/1.1 over TLS (ALPN picks h2) and say so
NO_H1_OVER_TLS = {"primp", "primp-async"}


@pytest.mark.parametrize("name", INSTALLED)
def test_https_verified_against_server_ca(servers, name):
    """Verified against the server's CA, and over HTTP/1.1 as the scenario says: the
    server offers h2 by ALPN too, so a client that would take it must have declared
    HTTP/1.1 (or be skipped with the reason)."""
    srv = servers[True]
    assert srv.url.startswith("https://")
    if name in NO_H1_OVER_TLS:
        with pytest.raises(AdapterUnavailable, match="no HTTP/1.1 over TLS"):
            drive(name, srv, method="GET", path="/bytes/150")
        return
    want = reference(srv, "/bytes/150")
    a, d = drive(name, srv, method="GET", path="/bytes/150")
    assert a.last_body == want
    assert d["requests"] == N
    assert (d["http1_requests"], d["h2_requests"]) == (N, 0)


@pytest.mark.parametrize("name", ["http.client", "requests", "httpx"])
def test_https_without_ca_fails_verification(servers, name):
    """Verification is never disabled: without the server's CA the request fails."""
    if name not in INSTALLED:
        pytest.skip(f"{name} not installed")
    srv = servers[True]
    cls = load_adapter(name)
    a = cls()
    a.setup(srv.url, None, method="GET", path="/bytes/150")
    try:
        with pytest.raises(Exception) as ei:
            a.request()
        assert "certif" in repr(ei.value).lower() or "ssl" in repr(ei.value).lower()
    finally:
        a.close()


@pytest.mark.parametrize("name", ["curl_cffi", "curl_cffi-async", "pyreqwest", "pyreqwest-async",
                                  "wreq", "wreq-async", "primp", "primp-async", "httpx2",
                                  "httpx2-async", "aiosonic"])
def test_new_clients_verify_tls(servers, name):
    """Verification is on in every newer client: without the server's CA the request fails
    and the server never sees it (primp over h2, its only protocol over TLS)."""
    if name not in INSTALLED:
        pytest.skip(f"{name} not installed")
    srv = servers[True]
    s0 = counts(srv)
    with pytest.raises(Exception) as ei:
        drive(name, srv, n=1, trust=False, method="GET", path="/bytes/150",
              http2=name in NO_H1_OVER_TLS)
    text = repr(ei.value).lower()
    assert "certif" in text or "ssl" in text or "issuer" in text, text
    assert counts(srv)["requests"] == s0["requests"]


@pytest.mark.parametrize("name", INSTALLED)
def test_keep_alive_off_opens_a_connection_per_request(servers, name):
    srv = servers[False]
    a, d = drive(name, srv, method="GET", path="/bytes/150", keep_alive=False)
    assert a.last_status == 200
    assert d["requests"] == N
    assert d["connections"] == N


@pytest.mark.parametrize("name, module, pip", [
    ("pycurl", "pycurl", "pycurl"), ("curl_cffi", "curl_cffi", "curl_cffi"),
    ("curl_cffi-async", "curl_cffi", "curl_cffi"), ("pyreqwest", "pyreqwest", "pyreqwest"),
    ("pyreqwest-async", "pyreqwest", "pyreqwest"), ("wreq", "wreq", "wreq"),
    ("wreq-async", "wreq", "wreq"), ("primp", "primp", "primp"),
    ("primp-async", "primp", "primp"), ("httpx2", "httpx2", "httpx2"),
    ("httpx2-async", "httpx2", "httpx2"), ("httpxyz", "httpxyz", "httpxyz"),
    ("aiosonic", "aiosonic", "aiosonic"),
])
def test_missing_library_is_unavailable_with_pip_name(monkeypatch, name, module, pip):
    import importlib.util

    real = importlib.util.find_spec

    def hide(mod, *a, **k):
        return None if mod == module else real(mod, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", hide)
    with pytest.raises(AdapterUnavailable) as ei:
        load_adapter(name)
    assert ei.value.pip_name == pip
    assert f"pip install {pip}" in str(ei.value)
    ok, reason, pip_name = adapter_status(name)
    assert (ok, pip_name) == (False, pip) and "not installed" in reason


def test_httpx_adapter_refuses_an_aliased_httpx(monkeypatch):
    """httpxyz imported first registers itself as `httpx`: the httpx adapter must not
    report its figures as httpx's."""
    import importlib.machinery
    import sys
    import types

    if "httpx" not in INSTALLED:
        pytest.skip("httpx not installed")
    fake = types.ModuleType("httpxyz")
    fake.__spec__ = importlib.machinery.ModuleSpec("httpxyz", None)
    fake.__version__ = "0.42.1"
    monkeypatch.setitem(sys.modules, "httpx", fake)
    a = load_adapter("httpx")()
    with pytest.raises(AdapterUnavailable, match="'httpx' in this process is httpxyz 0.42.1"):
        a.setup("http://127.0.0.1:9", None)


def test_registry_names():
    assert set(DEFAULT_CLIENTS) == set(ADAPTERS) - {"command", "aioquic", *WS_CLIENTS}
    for name in ADAPTERS:
        assert load_adapter.__module__ == "httpbench._adapters"
        ok, reason, _ = adapter_status(name)
        assert ok or reason


def test_unknown_client_name():
    with pytest.raises(KeyError):
        load_adapter("no-such-client")
    assert adapter_status("no-such-client")[0] is False


def test_custom_adapter_by_import_path(tmp_path, monkeypatch):
    (tmp_path / "myadapters.py").write_text(
        "from httpbench._adapters import Adapter\n"
        "class Mine(Adapter):\n"
        "    name = 'mine'\n"
        "    modules = ('surely_not_a_module_hb',)\n"
        "    pip_name = 'surely-not-a-module'\n"
        "class NotAdapter:\n"
        "    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AdapterUnavailable) as ei:
        load_adapter("myadapters:Mine")
    assert ei.value.pip_name == "surely-not-a-module"
    with pytest.raises(KeyError):
        load_adapter("myadapters:NotAdapter")
    with pytest.raises(AdapterUnavailable):
        load_adapter("no_such_module_hb:Thing")


def test_adapter_rejects_bad_base_url():
    a = Adapter()
    with pytest.raises(ValueError):
        a.configure("ftp://127.0.0.1:1")


def test_command_adapter_runs_argv_per_request(servers, tmp_path):
    import shutil

    if shutil.which("curl") is None:
        pytest.skip("curl not installed")
    srv = servers[False]
    out = tmp_path / "out.bin"
    cls = load_adapter("command")
    a = cls()
    a.setup(srv.url, None, method="GET", path="/bytes/12000", download_path=str(out),
            argv=["curl", "-sS", "--fail", "-o", "{out}", "{url}"])
    s0 = counts(srv)
    for _ in range(3):
        a.request()
    a.close()
    d = counts(srv)["requests"] - s0["requests"]
    assert d == 3
    assert out.read_bytes() == reference(srv, "/bytes/12000")
    # a failing command is an error (exit code), never a silent success
    b = cls()
    b.setup(srv.url, None, method="GET", path="/status/500", argv=["curl", "-sS", "--fail",
                                                                   "-o", os.devnull, "{url}"])
    with pytest.raises(RuntimeError):
        b.request()
    b.close()


# the big downloads and the concurrent round take a second or more per client
SLOW_SCENARIOS = {"download-30m", "download-7m", "get-150b-concurrent"}


@pytest.mark.parametrize("scenario", [pytest.param(s, marks=pytest.mark.slow)
                                      if s in SLOW_SCENARIOS else s for s in DEFAULT_SCENARIOS])
@pytest.mark.parametrize("name", INSTALLED)
def test_worker_round_every_adapter_every_default_scenario(servers, name, scenario, tmp_path):
    """The worker's own code path (set-up, warm-up, measured round, verification), in process.

    The server must have seen exactly the requests the worker says it made, the
    round must verify (byte-exact bodies and downloads, the sink's CRC for
    POSTs) and keep-alive must hold: no new connection during the round (one
    per request with keep-alive off, or for a process per request).
    """
    sc = SCENARIOS[scenario]
    srv = servers[sc.tls]
    job = {"client": name, "scenario": sc.to_dict(), "base_url": srv.url,
           "ca_file": srv.ca_file if sc.tls else None, "cpu": None, "warmup": 1,
           "workdir": str(tmp_path)}
    s0 = counts(srv)
    w = Worker(job)
    if sc.tls and name in NO_H1_OVER_TLS:
        with pytest.raises(AdapterUnavailable, match="no HTTP/1.1 over TLS"):
            w.setup()
        w.close()
        assert counts(srv)["requests"] - s0["requests"] == w.requests  # the reference GET only
        return
    late = name in POOL_RETURNS_LATE
    try:
        ready = w.setup()
        assert ready["status"] == "ready"
        s1 = counts(srv)
        assert s1["requests"] - s0["requests"] == ready["requests"]
        n = 16 if sc.concurrency > 1 else 3
        if late and sc.keep_alive:
            w.round({"cmd": "run", "n": 4 * n})  # its pool grows to what the round needs
            s1 = counts(srv)
        msg = w.round({"cmd": "run", "n": n})
        s2 = counts(srv)
    finally:
        w.close()
    assert msg["status"] == "ok"
    assert msg["errors"] == 0, msg["error_samples"]
    assert msg["verify"] == {"ok": True, "detail": ""}
    assert msg["round_requests"] == n
    assert s2["requests"] - s1["requests"] == n
    assert s2["http1_requests"] - s1["http1_requests"] == n  # HTTP/1.1, as the scenario says
    r = httpbench.MeasureResult.from_dict(msg["result"])
    assert r.calls == n and r.latency.count == n
    new_conns = s2["connections"] - s1["connections"]
    if w.kind == "process" or not sc.keep_alive:
        assert new_conns == n
    else:  # the runner's own allowance for a late pool (its note past that)
        assert new_conns <= (2 if late else 0)
    if w.kind == "process":
        assert r.alloc_counts is None and r.cpu_ns > 0
    else:
        assert r.allocs_per_call > 0


def test_aiosonic_keeps_its_connection_past_1000_requests(servers):
    """aiosonic's default pool recycles a connection after 1000 requests and then reconnects
    for every request; the adapter lifts the limit, so 1100 requests use one connection."""
    if "aiosonic" not in INSTALLED:
        pytest.skip("aiosonic not installed")
    a, d = drive("aiosonic", servers[False], n=1100, method="GET", path="/bytes/150")
    assert a.last_status == 200
    assert (d["requests"], d["connections"]) == (1100, 1)


@pytest.mark.parametrize("name", ["httpx", "httpx2"])
def test_httpx_family_without_h2_is_unavailable_for_http2(monkeypatch, name):
    """Without the h2 package an HTTP/2 scenario skips the client, naming the extra."""
    import importlib.util

    if name not in INSTALLED:
        pytest.skip(f"{name} not installed")
    a = load_adapter(name)()  # checked before h2 is hidden
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda mod, *x, **k: None if mod == "h2" else real(mod, *x, **k))
    with pytest.raises(AdapterUnavailable, match="needs the 'h2' package") as ei:
        a.setup("http://127.0.0.1:9", None, http2=True)
    assert ei.value.pip_name == f"{name}[http2]"
