"""Comparing a new run with a saved one (``--baseline-file``): not interleaved, same scenarios."""

from __future__ import annotations

import json

import httpbench
import pytest
from httpbench._compare import cli_main
from httpbench._results import ResultSet
from httpbench._versions import _saved_match
from httpbench.report import format_tables


def _run(**kw) -> ResultSet:
    kw.setdefault("clients", ["http.client"])
    kw.setdefault("scenarios", ["get-150b"])
    return httpbench.compare(n=100, repeat=2, plots=False, warmup=5, **kw)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("saved") / "results.json"
    _run().save(path)
    return str(path)


@pytest.mark.slow
def test_deltas_against_a_saved_run(saved: str, tmp_path) -> None:
    progress: list[str] = []
    rs = _run(scenarios=["get-150b", "get-12k"], baseline_file=saved, progress=progress.append)
    bf = rs.metadata["baseline_file"]
    assert bf["interleaved"] is False and bf["path"] == saved
    assert bf["matched"] == {"http.client": "http.client"}
    assert bf["missing_scenarios"] == ["get-12k"]
    assert any("baseline file has no get-12k" in p for p in progress)
    d = bf["deltas"]["get-150b"]["http.client"]
    cpu = d["cpu_ns_per_request"]
    assert cpu["ratio"] > 0 and cpu["lo"] <= cpu["ratio"] <= cpu["hi"]
    assert cpu["p"] is not None  # two rounds on each side
    assert "delta" in d["allocs_per_request"] and "get-12k" not in bf["deltas"]
    text = format_tables(rs)
    assert "vs saved run results.json (not interleaved" in text
    assert "http.client vs saved http.client: CPU " in text
    assert "vs saved run results.json: it has no get-12k (not compared)" in text
    # the saved comparison survives a round trip through the results file (NaN -> null)
    rs.save(tmp_path / "new.json")
    again = httpbench.load(tmp_path / "new.json")
    assert format_tables(again) == text


def test_matching_rows(saved: str) -> None:
    old = httpbench.load(saved)
    assert isinstance(old, ResultSet)

    def rekey(rs: ResultSet, names: dict[str, str]) -> ResultSet:
        return ResultSet({(names.get(c, c), s, r): v for (c, s, r), v in rs.results.items()},
                         rs.metadata, rs.notes, rs.skipped)

    new = rekey(old, {"http.client": "urllib3 2.2.3"})
    assert _saved_match(new, old, "urllib3 2.2.3") == "http.client"  # the only row of each
    more = ResultSet({**new.results, **old.results}, old.metadata, (), {})
    assert _saved_match(more, old, "urllib3 2.2.3") is None  # another client: not compared
    two = ResultSet({**rekey(old, {"http.client": "urllib3 1.26.20"}).results,
                     **rekey(old, {"http.client": "requests 2.32.3"}).results},
                    old.metadata, (), {})
    assert _saved_match(new, two, "urllib3 2.2.3") == "urllib3 1.26.20"  # same client
    assert _saved_match(new, two, "httpx 0.28.1") is None


def test_bad_baseline_files_fail_before_measuring(saved: str, tmp_path) -> None:
    progress: list[str] = []
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    one = httpbench.measure(lambda: None, n=10)
    one.save(tmp_path / "one.json")
    cases = [(tmp_path / "nope.json", "No such file"), (bad, "not an httpbench results file"),
             (tmp_path / "one.json", "not the results of a compare run")]
    for path, words in cases:
        with pytest.raises(ValueError, match=words) as ei:
            _run(baseline_file=path, progress=progress.append)
        assert "\n" not in str(ei.value) and str(path) in str(ei.value)
    with pytest.raises(ValueError, match="none of the scenarios get-12k"):
        _run(scenarios=["get-12k"], baseline_file=saved, progress=progress.append)
    assert not any("get-150b" in p for p in progress)  # nothing was measured


@pytest.mark.slow
def test_cli_baseline_file(saved: str, capsys) -> None:
    rc = cli_main(["--clients", "http.client", "--scenarios", "get-150b", "--n", "100",
                   "--repeat", "2", "--no-out", "-q", "--baseline-file", saved])
    out = capsys.readouterr().out
    assert rc == 0 and "(not interleaved" in out and "http.client vs saved http.client" in out
    rc = cli_main(["--clients", "http.client", "--scenarios", "get-150b", "--n", "100",
                   "--repeat", "1", "--no-out", "-q", "--json", "--baseline-file", saved])
    doc = json.loads(capsys.readouterr().out)
    md = doc["record"]["metadata"]
    assert rc == 0 and md["baseline_file"]["interleaved"] is False
    rc = cli_main(["--clients", "http.client", "--scenarios", "get-12k", "--no-out", "-q",
                   "--baseline-file", saved])
    assert rc == 2 and "none of the scenarios" in capsys.readouterr().err
