"""compare's WebSocket scenarios: ws-echo-1k (each request one 1 KiB echo, counted
exactly by the server's own messages read) and ws-push-100k (each request the next
pushed message, its bytes checked), run by the WebSocket clients only; the HTTP clients
are skipped with the reason, and the WebSocket clients skip the HTTP scenarios."""

from __future__ import annotations

import json

import pytest
from httpbench._adapters import DEFAULT_CLIENTS, WS_CLIENTS, available_clients
from httpbench._runner import Runner, RunOptions
from httpbench._scenarios import SCENARIOS, parse_scenario


def test_ws_scenarios_and_specs():
    echo, push = SCENARIOS["ws-echo-1k"], SCENARIOS["ws-push-100k"]
    assert (echo.ws, echo.ws_size, echo.path) == ("echo", 1024, "/ws")
    assert (push.ws, push.ws_size, push.n) == ("push", 16, 100_000)
    assert not set(WS_CLIENTS) & set(DEFAULT_CLIENTS)  # they run when asked for
    assert parse_scenario("mine:path=/ws,ws=echo,ws_size=10").ws_size == 10
    for bad in ("x:path=/bytes/5,ws=echo", "x:path=/ws,ws=pull", "x:path=/ws,ws=echo,tls=0,"
                "keep_alive=0", "x:path=/ws,ws=echo,concurrency=2"):
        with pytest.raises(ValueError):
            parse_scenario(bad)


@pytest.mark.parametrize("client, scenario, why", [
    ("requests", "ws-echo-1k", "no WebSocket client"),
    ("websockets", "get-150b", "speaks WebSocket only"),
])
def test_skipped_with_reason(client, scenario, why, tmp_path):
    if client not in available_clients([client]):
        pytest.skip(f"{client} not installed")
    from httpbench._worker import serve

    job = {"client": client, "scenario": SCENARIOS[scenario].to_dict(),
           "base_url": "http://127.0.0.1:9", "workdir": str(tmp_path)}
    sent: list[dict] = []
    assert serve(iter([json.dumps(job).encode()]), sent.append) == 0
    assert sent[0]["status"] == "skipped" and sent[0]["reason"].startswith(why), sent


@pytest.mark.slow
def test_ws_clients_counted_by_the_server():
    clients = [c for c in WS_CLIENTS if c in available_clients([c])]
    if not clients:
        pytest.skip("no WebSocket client installed")
    r = Runner(RunOptions(repeat=1, n=100, reruns=0, warmup=2, native_allocs=False,
                          timeout=60.0))
    rs = r.run(clients, [SCENARIOS["ws-echo-1k"], SCENARIOS["ws-push-100k"]])
    bad = [n for n in rs.notes if n.kind in ("errors", "bad-response", "count-mismatch",
                                             "worker-failed")]
    assert not bad, bad
    assert {(c, s) for (c, s, _) in rs.results} == {
        (c, s) for c in clients for s in ("ws-echo-1k", "ws-push-100k")}
    for (c, s, _), m in rs.results.items():
        assert m.metadata["verify"]["ok"], (c, s, m.metadata["verify"])
        if s == "ws-echo-1k":  # every echo was a message the server read, none more
            assert m.metadata["server"]["ws_messages_in"] == m.metadata["worker_requests"]
