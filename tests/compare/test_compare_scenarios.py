"""Scenario definitions: the built-in seeds' workloads and user-defined ones."""

from __future__ import annotations

import pytest
from httpbench._compare import _split_scenarios
from httpbench._scenarios import (
    DEFAULT_SCENARIOS,
    QUICK_SCENARIOS,
    SCENARIOS,
    Scenario,
    get_scenario,
    parse_scenario,
    resolve_scenarios,
)


def test_builtin_scenarios():
    assert list(DEFAULT_SCENARIOS) == [
        "get-150b", "get-12k", "get-100k", "post-300k-file", "post-300k-mem", "download-80k",
        "download-7m", "download-30m", "https-get-150b", "get-150b-new-conn",
        "get-150b-concurrent"]
    assert set(QUICK_SCENARIOS) <= set(DEFAULT_SCENARIOS)
    s = SCENARIOS["post-300k-file"]
    assert (s.method, s.path, s.body_size, s.body_from) == ("POST", "/sink", 300_000, "file")
    assert SCENARIOS["post-300k-mem"].body_from == "mem"
    d = SCENARIOS["download-30m"]
    assert d.download and d.expect_bytes == 30_000_000 and d.path == "/bytes/30000000"
    assert SCENARIOS["https-get-150b"].tls
    assert not SCENARIOS["get-150b-new-conn"].keep_alive
    assert SCENARIOS["get-150b-concurrent"].concurrency == 16
    for sc in SCENARIOS.values():
        assert sc.description
        assert Scenario.from_dict(sc.to_dict()) == sc


def test_user_defined():
    sc = parse_scenario("big:method=POST,path=/sink,body=2m,concurrency=4,n=50,tls=yes")
    assert (sc.name, sc.method, sc.path, sc.body_size, sc.concurrency, sc.n, sc.tls) == (
        "big", "POST", "/sink", 2_000_000, 4, 50, True)
    assert parse_scenario("up:path=/sink,body=1kib").method == "POST"  # a body implies POST
    assert parse_scenario("up:path=/sink,body=1kib").body_size == 1024
    mod = parse_scenario("get-150b:tls=1,n=7")
    assert mod.tls and mod.n == 7 and mod.path == "/bytes/150"
    assert SCENARIOS["get-150b"].n is None  # the built-in is unchanged
    assert parse_scenario("get-12k") is SCENARIOS["get-12k"]
    assert parse_scenario("dl:path=/bytes/5000,download=1,expect_bytes=5000").download


@pytest.mark.parametrize("spec", [
    "nope", "x:method=BREW", "x:path=bytes", "x:body=-1", "x:method=GET,body=10",
    "x:concurrency=0", "x:n=0", "x:duration=0", "x:bogus=1", "x:tls=maybe", "x:body=lots",
    "bad name:path=/", "x:n=1.5", "x:body_from=disk,body=10",
])
def test_bad_specs_are_value_errors(spec):
    with pytest.raises(ValueError):
        parse_scenario(spec)


def test_resolve_and_lookup():
    assert [s.name for s in resolve_scenarios(None)] == list(DEFAULT_SCENARIOS)
    assert [s.name for s in resolve_scenarios(None, quick=True)] == list(QUICK_SCENARIOS)
    own = Scenario("own", path="/bytes/1")
    assert resolve_scenarios(["get-150b", own]) == [SCENARIOS["get-150b"], own]
    with pytest.raises(ValueError):
        resolve_scenarios([])
    with pytest.raises(ValueError):
        resolve_scenarios(["get-150b", "get-150b"])
    with pytest.raises(KeyError):
        get_scenario("nope")


def test_cli_scenario_list_splitting():
    assert _split_scenarios("get-150b,get-12k") == ["get-150b", "get-12k"]
    assert _split_scenarios("get-150b,big:method=POST;path=/sink;body=2m") == [
        "get-150b", "big:method=POST,path=/sink,body=2m"]
    assert _split_scenarios("big:method=POST,path=/sink,body=2m,get-12k") == [
        "big:method=POST,path=/sink,body=2m", "get-12k"]
