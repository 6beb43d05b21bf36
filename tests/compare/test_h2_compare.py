"""compare over HTTP/2: scenarios, per-protocol proof, h1 fallback, skipped clients, batches.

The proof of the protocol is the server's own per-protocol request counts
(``by_protocol`` in its stats), taken around every round. A client forced to
HTTP/1.1 in an h2 scenario must be flagged ``h1-fallback`` and its figures
dropped; a client without HTTP/2 is skipped with the reason; a batch of k
multiplexed requests counts k requests, exactly as the server counts them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import textwrap

import pytest
from httpbench._adapters import available_clients
from httpbench._roundnotes import protocol_verdict, server_counts
from httpbench._runner import Runner, RunOptions
from httpbench._scenarios import (
    DEFAULT_SCENARIOS,
    H2_SCENARIOS,
    SCENARIOS,
    Scenario,
    parse_scenario,
)

H2_CLIENTS = ("httpx", "httpx-async", "niquests", "pycurl", "curl", "native", "curl_cffi",
              "curl_cffi-async", "pyreqwest", "pyreqwest-async", "wreq", "wreq-async", "primp",
              "primp-async", "httpx2", "httpx2-async", "httpxyz", "httpxyz-async", "aiosonic")
# sync clients that speak HTTP/2 one request at a time (skipped where more are in flight)
H2_SINGLE = {"httpx", "httpx2", "httpxyz", "curl_cffi"}
NO_H2 = {"requests": "requests", "urllib3": "urllib3", "http.client": "http.client",
         "aiohttp": "aiohttp"}

HELPERS = textwrap.dedent('''
    import http.client
    from httpbench._adapters import Adapter
    from httpbench._adapters.httpx_ import HttpxAdapter

    class ForcedH1(HttpxAdapter):
        """httpx told to use HTTP/2 but built without it: HTTP/1.1 over the same URL."""
        name = "forced-h1"
        h2_mode = "shared"

        def _client_kwargs(self):
            self.http2 = False
            return super()._client_kwargs()

    class ForcedH2(HttpxAdapter):
        """httpx with HTTP/2 on in an HTTP/1.1 scenario: h2 by ALPN over TLS."""
        name = "forced-h2"

        def _client_kwargs(self):
            self.http2 = True
            return super()._client_kwargs()

    class SeqBatch(Adapter):
        """A batch client whose batch is k sequential HTTP/1.1 GETs (accounting only)."""
        name = "seq-batch"
        h2_mode = "batch"

        def _setup(self):
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=10)

        def request(self):
            self.request_batch(1)

        def request_batch(self, k):
            for _ in range(k):
                self.conn.request(self.method, self.path)
                r = self.conn.getresponse()
                self.last_body = r.read()
                self.last_status = r.status
            return 0

        def close(self):
            self.conn.close()
''')


@pytest.fixture
def helpers(tmp_path, monkeypatch):
    (tmp_path / "hb_test_h2.py").write_text(HELPERS)
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + (":" + old if old else ""))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "hb_test_h2"


def test_h2_scenarios_and_specs():
    assert H2_SCENARIOS == ("h2-get-150b", "h2-https-get-150b", "h2-download-7m")
    assert not set(H2_SCENARIOS) & set(DEFAULT_SCENARIOS)  # they run when named
    g, t, d = (SCENARIOS[n] for n in H2_SCENARIOS)
    assert (g.protocol, g.tls, g.concurrency, g.expect_bytes) == ("h2", False, 16, 150)
    assert (t.protocol, t.tls, t.concurrency) == ("h2", True, 16)
    assert (d.protocol, d.download, d.concurrency, d.expect_bytes) == ("h2", True, 1, 7_000_000)
    assert SCENARIOS["get-150b"].protocol == "http/1.1"
    own = parse_scenario("mine:path=/bytes/10,protocol=h2,concurrency=4")
    assert (own.protocol, own.concurrency, own.is_h2) == ("h2", 4, True)
    assert Scenario.from_dict(own.to_dict()) == own
    for bad in ("x:protocol=h3", "x:protocol=h2,keep_alive=0",
                "x:protocol=h2,download=1,concurrency=2"):
        with pytest.raises(ValueError):
            parse_scenario(bad)


@pytest.mark.parametrize("by, want", [
    ({"http/1.1": 0, "h2": 32}, ("h2", None)),
    ({"http/1.1": 32, "h2": 0}, ("http/1.1", "h1-fallback")),
    ({"http/1.1": 1, "h2": 31}, ("http/1.1", "h1-fallback")),  # a partial fallback counts
    ({"http/1.1": 0, "h2": 0}, ("unproven", "protocol-unproven")),
    (None, ("unproven", "protocol-unproven")),
])
def test_protocol_verdict_from_stats_delta(by, want):
    before = server_counts({"requests": 10, **({"by_protocol": {"http/1.1": 10, "h2": 0}}
                                               if by is not None else {})})
    after = server_counts({"requests": 42, **({"by_protocol": {
        "http/1.1": 10 + by["http/1.1"], "h2": by["h2"]}} if by is not None else {})})
    delta = {k: None if before[k] is None or after[k] is None else after[k] - before[k]
             for k in before}
    proto, kind, msg = protocol_verdict(SCENARIOS["h2-get-150b"], delta)
    assert (proto, kind) == want
    assert (msg is None) == (kind is None)
    # an HTTP/1.1 scenario: any h2 request is a client that took h2 (ALPN)
    h1_want = ("h2", "h2-negotiated") if by and by["h2"] else ("http/1.1", None)
    assert protocol_verdict(SCENARIOS["https-get-150b"], delta)[:2] == h1_want


@pytest.mark.parametrize("client", sorted(NO_H2))
def test_clients_without_h2_are_skipped_with_reason(client, tmp_path):
    if client not in available_clients([client]):
        pytest.skip(f"{client} not installed")
    from httpbench._worker import serve

    job = {"client": client, "scenario": SCENARIOS["h2-get-150b"].to_dict(),
           "base_url": "http://127.0.0.1:9", "workdir": str(tmp_path)}
    sent: list[dict] = []
    assert serve(iter([json.dumps(job).encode()]), sent.append) == 0
    assert len(sent) == 1 and sent[0]["status"] == "skipped", sent
    assert sent[0]["reason"].startswith("no HTTP/2: ") and "HTTP/1.1" in sent[0]["reason"]


class _WithProtocol:
    """The embedded server in its own process; per-protocol counts added when it has
    none (a server without h2 answers everything over HTTP/1.1)."""

    def __init__(self, tls: bool, threads: int) -> None:
        from httpbench._server import start_process

        self.srv = start_process(tls=tls, threads=threads)
        self.url, self.ca_file, self.pid = self.srv.url, self.srv.ca_file, self.srv.pid

    def stats(self):
        s = self.srv.stats()
        s = dict(s if isinstance(s, dict) else vars(s))
        s.setdefault("by_protocol", {"http/1.1": s["requests"], "h2": 0})
        return s

    def stop(self) -> None:
        self.srv.stop()


@pytest.mark.h2_server
@pytest.mark.slow
def test_client_forced_to_http1_is_flagged_and_dropped(helpers):
    """httpx without http2 in the h2-over-TLS scenario: every round is HTTP/1.1."""
    if "httpx" not in available_clients(["httpx"]):
        pytest.skip("httpx not installed")
    client = f"{helpers}:ForcedH1"
    r = Runner(RunOptions(repeat=2, n=32, reruns=0, warmup=1, native_allocs=False),
               server_factory=_WithProtocol)
    rs = r.run([client], [SCENARIOS["h2-https-get-150b"]])
    assert not rs.results  # no figure reported as h2
    fall = [n for n in rs.notes if n.kind == "h1-fallback"]
    assert len(fall) == 1 and fall[0].client == client and fall[0].severity == "error"
    assert "over HTTP/1.1 and 0 over h2" in fall[0].message
    assert rs.skipped[f"{client}/h2-https-get-150b"].startswith("h1-fallback: ")
    from httpbench.report import format_tables

    out = format_tables(rs)
    assert "[h1-fallback]" in out
    assert f"Skipped:\n  * {client}/h2-https-get-150b: h1-fallback: " in out


@pytest.mark.slow
@pytest.mark.h2_server
def test_client_taking_h2_in_an_http1_scenario_is_flagged_and_dropped(helpers):
    """httpx with HTTP/2 on in https-get-150b: the server offers h2 by ALPN and counts every
    request as h2, so no figure is reported as HTTP/1.1."""
    if "httpx" not in available_clients(["httpx"]) or importlib.util.find_spec("h2") is None:
        pytest.skip("httpx[http2] not installed")
    client = f"{helpers}:ForcedH2"
    r = Runner(RunOptions(repeat=2, n=32, reruns=0, warmup=1, native_allocs=False))
    rs = r.run([client, "http.client"], [SCENARIOS["https-get-150b"]])
    assert {c for (c, _, _) in rs.results} == {"http.client"}  # no h2 row as HTTP/1.1
    got = [n for n in rs.notes if n.kind == "h2-negotiated"]
    assert len(got) == 1 and got[0].client == client and got[0].severity == "error"
    assert "over h2 and 0 over HTTP/1.1" in got[0].message
    assert rs.skipped[f"{client}/https-get-150b"].startswith("h2-negotiated: ")


def test_batch_counts_every_request(helpers, server, tmp_path):
    """A batch client's round: k requests per call, counted k times by worker and server."""
    from httpbench._worker import Worker

    sc = parse_scenario("h2-acct:path=/bytes/150,protocol=h2,concurrency=8,expect_bytes=150")
    job = {"client": f"{helpers}:SeqBatch", "scenario": sc.to_dict(), "base_url": server.url,
           "workdir": str(tmp_path), "warmup": 1}
    w = Worker(job)
    try:
        assert w.setup()["status"] == "ready"
        before = server.stats()["requests"]
        res = w.round({"cmd": "run", "n": 37})  # rounded down to whole batches: 32
        after = server.stats()["requests"]
    finally:
        w.close()
    mr = res["result"]
    assert res["status"] == "ok" and res["verify"]["ok"], res
    assert mr["calls"] == 32 and res["round_requests"] == 32 and mr["concurrency"] == 8
    assert after - before == 32
    assert mr["metadata"]["batch_size"] == 8
    from httpbench import _results

    lat = _results.MeasureResult.from_dict(mr).latency
    assert lat.count == 32  # one latency per request (its batch's)


@pytest.mark.h2_server
@pytest.mark.slow
@pytest.mark.parametrize("scenario", H2_SCENARIOS)
def test_every_h2_adapter_proven_by_server_stats(scenario):
    """Each installed h2 client × each h2 scenario against the embedded server: every
    round's requests are counted by the server as h2, exactly as many as the worker made,
    the bodies verify, and nothing fell back."""
    from httpbench._server import start_process

    probe = start_process(tls=False)
    try:
        has_h2 = "by_protocol" in dict(probe.stats() if isinstance(probe.stats(), dict)
                                       else vars(probe.stats()))
    finally:
        probe.stop()
    if not has_h2:
        pytest.skip("this embedded server has no HTTP/2 (no per-protocol stats)")
    clients = [c for c in (*H2_CLIENTS, *NO_H2) if c in available_clients([c])]
    n = 32 if scenario != "h2-download-7m" else 3
    r = Runner(RunOptions(repeat=1, n=n, reruns=0, warmup=1, native_allocs=False))
    rs = r.run(clients, [SCENARIOS[scenario]])
    bad = [n for n in rs.notes if n.kind in ("h1-fallback", "protocol-unproven", "errors",
                                             "bad-response", "count-mismatch",
                                             "worker-failed", "new-connections")]
    assert not bad, bad
    ran = {c for (c, _, _) in rs.results}
    assert {"native", "pycurl"} & set(clients) <= ran
    skipped = {k.split("/")[0] for k in rs.skipped}
    assert ran | skipped == set(clients)
    sc_ = SCENARIOS[scenario]
    for k, why in rs.skipped.items():  # only a known client limitation may skip
        c = k.split("/")[0]
        if c in NO_H2:  # listed with the reason, never run over HTTP/1.1
            assert why.startswith("no HTTP/2: ") and c not in ran, (k, why)
        elif c in H2_SINGLE and sc_.concurrency > 1:  # e.g. httpx's Client: not thread-safe
            assert why.startswith("one stream at a time over HTTP/2: "), (k, why)
        elif c == "aiosonic" and not sc_.tls:
            assert "no h2c" in why, (k, why)
        else:
            assert "curl 7." in why or "not built" in why, (k, why)
    assert {c for c in NO_H2 if c in clients} <= skipped
    from httpbench.report import format_resultset, format_tables

    sc = SCENARIOS[scenario]
    proto = "h2" if sc.tls else "h2c"
    assert (f"protocol: {proto}, {sc.concurrency} in flight on one connection; proven in every "
            "round") in format_tables(rs)
    assert f"HTTP/2 ({proto}), {sc.concurrency} stream(s) on one connection" in \
        format_resultset(rs)
    for (c, _, _), m in rs.results.items():
        srv = m.metadata["server"]
        assert m.metadata["protocol"] == "h2", (c, srv)
        assert srv["h2_requests"] == m.metadata["worker_requests"] == m.calls, (c, srv)
        assert srv["http1_requests"] == 0
        assert m.metadata["verify"]["ok"], (c, m.metadata["verify"])


def test_stats_keys_ignore_non_numbers():
    c = server_counts({"requests": 3, "by_protocol": {"http/1.1": "x", "h2": 2}})
    assert (c["http1_requests"], c["h2_requests"]) == (None, 2)


def test_list_marks_h2_scenarios(capsys):
    from httpbench._compare import cli_main

    assert cli_main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in H2_SCENARIOS:
        line = next(x for x in lines if x.split()[:1] == [name] or f" {name} " in x)
        assert line.endswith("(HTTP/2: runs when named)"), line
    assert not next(x for x in lines if " get-150b " in x).endswith("runs when named)")
