"""compare's workers run with the caller's environment; the harness's changes are recorded."""

from __future__ import annotations

import json
import os
import sys
import textwrap

from httpbench._runner import Runner, RunOptions
from httpbench._scenarios import SCENARIOS
from httpbench._workerproc import worker_env
from httpbench.report import format_tables

ADAPTER = textwrap.dedent("""
    import json, os
    from httpbench._adapters.http_client import HttpClientAdapter

    class EnvDump(HttpClientAdapter):
        def setup(self, *a, **kw):
            with open(os.environ["HB_TEST_ENV_DUMP"], "w") as f:
                json.dump(dict(os.environ), f)
            super().setup(*a, **kw)
""")


def test_worker_env_unchanged_without_proxy():
    env = {"PATH": "/bin", "HB_X": "1", "NO_PROXY": "example.org"}
    out, changes = worker_env(env)
    assert out == env and changes == {}


def test_worker_env_adds_loopback_bypass_only_when_a_proxy_is_set():
    env = {"HTTP_PROXY": "http://proxy.invalid:3128", "no_proxy": "example.org"}
    out, changes = worker_env(env, preload="/x/libcount.so")
    assert out["HTTP_PROXY"] == env["HTTP_PROXY"]  # the proxy stays: users pay its lookup
    assert out["no_proxy"] == "example.org,127.0.0.1,localhost"
    assert out["NO_PROXY"] == "127.0.0.1,localhost"
    assert set(changes) == {"no_proxy", "NO_PROXY", "LD_PRELOAD"}
    assert out["LD_PRELOAD"] == "/x/libcount.so"
    # already bypassed: nothing to change
    out2, changes2 = worker_env({"HTTPS_PROXY": "http://p.invalid", "NO_PROXY": "*",
                                 "no_proxy": "localhost,127.0.0.1"})
    assert changes2 == {} and out2["NO_PROXY"] == "*"


def test_workers_see_the_callers_environment(tmp_path, monkeypatch):
    (tmp_path / "hb_envdump.py").write_text(ADAPTER)
    dump = tmp_path / "env.json"
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("HB_TEST_ENV_DUMP", str(dump))
    monkeypatch.setenv("HB_TEST_MARK", "kept as is")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.setenv("no_proxy", "example.org")
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    runner = Runner(RunOptions(repeat=1, n=3, warmup=1, native_allocs=False, timeout=60,
                               zygote=False))
    rs = runner.run(["hb_envdump:EnvDump"], [SCENARIOS["get-150b"]])
    assert not [n for n in rs.notes if n.severity == "error"], rs.notes
    seen = json.loads(dump.read_text())
    assert seen["HB_TEST_MARK"] == "kept as is"
    assert seen["HTTP_PROXY"] == "http://proxy.invalid:3128"
    assert "PYTHONUNBUFFERED" not in seen
    assert seen["no_proxy"] == "example.org,127.0.0.1,localhost"
    changes = rs.metadata["environment_changes"]
    assert set(changes) == {"NO_PROXY", "no_proxy"}
    assert "NO_PROXY" in format_tables(rs)
    for k, v in os.environ.items():
        if k not in changes and k != "LD_PRELOAD":
            assert seen.get(k) == v, k
    assert sys.executable
