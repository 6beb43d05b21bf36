"""compare over HTTP/3: the h3 scenarios, clients declaring h3 (others skipped with the
reason), and the protocol proven each round by the server's own HTTP/3 request count."""

from __future__ import annotations

import json

import pytest
from httpbench._adapters import available_clients
from httpbench._features import h3_missing
from httpbench._roundnotes import protocol_verdict, server_counts
from httpbench._runner import Runner, RunOptions
from httpbench._scenarios import (
    DEFAULT_SCENARIOS,
    H3_SCENARIOS,
    SCENARIOS,
    parse_scenario,
)

H3_CLIENTS = ("native", "pycurl", "curl_cffi", "curl_cffi-async", "aioquic", "curl")
NO_H3 = ("requests", "http.client", "httpx")
needs_h3 = pytest.mark.skipif(h3_missing() is not None, reason=str(h3_missing()))


def test_h3_scenarios_and_specs():
    assert H3_SCENARIOS == ("h3-get-150b", "h3-get-12k", "h3-download-7m")
    assert not set(H3_SCENARIOS) & set(DEFAULT_SCENARIOS)  # they run when named
    for name in H3_SCENARIOS:
        sc = SCENARIOS[name]
        assert (sc.protocol, sc.tls, sc.concurrency, sc.is_h3) == ("h3", True, 1, True)
    assert SCENARIOS["h3-download-7m"].download
    own = parse_scenario("mine:protocol=h3,tls=1,path=/bytes/99")
    assert (own.protocol, own.is_h3, own.is_h2) == ("h3", True, False)
    for bad in ("x:protocol=h3", "x:protocol=h3,tls=1,concurrency=4",
                "x:protocol=h3,tls=1,keep_alive=0", "x:protocol=h4"):
        with pytest.raises(ValueError):
            parse_scenario(bad)


def _delta(by: dict[str, int] | None, h3: int | None) -> dict:
    stats: dict = {"requests": sum((by or {}).values()) + (h3 or 0)}
    if by is not None:
        stats["by_protocol"] = dict(by, **({} if h3 is None else {"h3": h3}))
    return server_counts(stats)


@pytest.mark.parametrize("by, h3, want", [
    ({"http/1.1": 0, "h2": 0}, 16, ("h3", None)),
    ({"http/1.1": 0, "h2": 16}, 0, ("h2", "h3-fallback")),
    ({"http/1.1": 2, "h2": 0}, 14, ("http/1.1", "h3-fallback")),  # a partial fallback counts
    ({"http/1.1": 0, "h2": 0}, 0, ("unproven", "protocol-unproven")),
    # a server without the HTTP/3 listener: what it counted was TCP
    ({"http/1.1": 16, "h2": 0}, None, ("http/1.1", "h3-fallback")),
    (None, None, ("unproven", "protocol-unproven")),  # no per-protocol counts at all
])
def test_protocol_verdict_h3(by, h3, want):
    proto, kind, msg = protocol_verdict(SCENARIOS["h3-get-150b"], _delta(by, h3))
    assert (proto, kind) == want
    assert (msg is None) == (kind is None)


@pytest.mark.parametrize("client, why", [(c, "no HTTP/3: ") for c in NO_H3]
                         + [("aioquic", "speaks HTTP/3 only")])
def test_clients_skipped_with_reason(client, why, tmp_path):
    if client not in available_clients([client]):
        pytest.skip(f"{client} not installed")
    from httpbench._worker import serve

    sc = "get-150b" if client == "aioquic" else "h3-get-150b"
    job = {"client": client, "scenario": SCENARIOS[sc].to_dict(),
           "base_url": "https://127.0.0.1:9", "workdir": str(tmp_path)}
    sent: list[dict] = []
    assert serve(iter([json.dumps(job).encode()]), sent.append) == 0
    assert len(sent) == 1 and sent[0]["status"] == "skipped", sent
    assert sent[0]["reason"].startswith(why), sent


def _check(rs, clients):
    bad = [n for n in rs.notes if n.kind in ("h3-fallback", "protocol-unproven", "errors",
                                             "bad-response", "count-mismatch",
                                             "worker-failed", "new-connections")]
    assert not bad, bad
    ran = {c for (c, _, _) in rs.results}
    skipped = {k.split("/")[0] for k in rs.skipped}
    assert ran | skipped == set(clients)
    for k, why in rs.skipped.items():  # only a missing HTTP/3 may skip
        assert "HTTP/3" in why, (k, why)
    for (c, _, _), m in rs.results.items():
        srv = m.metadata["server"]
        assert m.metadata["protocol"] == "h3", (c, srv)
        assert srv["h3_requests"] == m.metadata["worker_requests"] == m.calls, (c, srv)
        assert srv["http1_requests"] == 0 and srv["h2_requests"] == 0
        assert m.metadata["verify"]["ok"], (c, m.metadata["verify"])
    return ran


@needs_h3
def test_h3_round_proven_by_server_counts():
    client = next((c for c in ("pycurl", "aioquic") if c in available_clients([c])), None)
    if client is None:
        pytest.skip("no HTTP/3 client installed")
    r = Runner(RunOptions(repeat=1, n=16, reruns=0, warmup=1, native_allocs=False))
    rs = r.run([client, "http.client"], [SCENARIOS["h3-get-150b"]])
    assert _check(rs, [client, "http.client"]) == {client}
    assert rs.skipped["http.client/h3-get-150b"].startswith("no HTTP/3: ")
    from httpbench.report import format_tables

    assert ("protocol: h3 (QUIC), one request at a time on one connection; proven in every "
            "round") in format_tables(rs)


@needs_h3
@pytest.mark.slow
@pytest.mark.parametrize("scenario", H3_SCENARIOS)
def test_every_h3_adapter_proven_by_server_stats(scenario):
    """Each installed h3 client × each h3 scenario: every round's requests are counted by
    the server's HTTP/3 listener, exactly as many as the worker made, bodies verified."""
    clients = [c for c in (*H3_CLIENTS, *NO_H3) if c in available_clients([c])]
    n = 16 if scenario != "h3-download-7m" else 2
    r = Runner(RunOptions(repeat=1, n=n, reruns=0, warmup=1, native_allocs=False,
                          timeout=120.0))
    rs = r.run(clients, [SCENARIOS[scenario]])
    ran = _check(rs, clients)
    assert {c for c in ("native", "pycurl", "aioquic") if c in clients} <= ran


@needs_h3
def test_native_client_has_an_h3_row_proven_by_server_counts():
    """The native client (Client(http3=True)) runs every h3 scenario: each round's requests
    all counted by the server's HTTP/3 listener, none over TCP, bodies verified."""
    from httpbench._features import features

    if not features()["http3-client"]:
        pytest.skip("built without the HTTP/3 client")
    r = Runner(RunOptions(repeat=1, n=12, reruns=0, warmup=1, native_allocs=False,
                          timeout=60.0))
    rs = r.run(["native"], [SCENARIOS[s] for s in H3_SCENARIOS])
    assert _check(rs, ["native"]) == {"native"}
    assert not rs.skipped
    assert {sc for (_, sc, _) in rs.results} == set(H3_SCENARIOS)


def test_h3_scenario_in_a_build_without_http3_stops_before_running(monkeypatch):
    import httpbench
    from httpbench import _features

    monkeypatch.setattr(_features._core, "HAVE_H3", 0)
    with pytest.raises(httpbench.FeatureUnavailable,
                       match=r"^scenario h3-get-150b: this build has no HTTP/3 server: install "):
        httpbench.compare(clients=["native"], scenarios=["get-150b", "h3-get-150b"], n=10,
                          repeat=1, plots=False)
