"""Results files of schema version 1 still load, their machine metadata renamed to the
keys every kind of result now shares (one collector: httpbench._metadata)."""

from __future__ import annotations

import json

import httpbench
from httpbench import _metadata, _resultfile
from httpbench import _results as R

# Machine metadata as measure() and a compare worker wrote it in schema version 1.
V1_MEASURE_MD = {
    "python": "3.11.7", "python_implementation": "CPython", "clock": "CLOCK_MONOTONIC",
    "clock_source": "tsc", "cpu_model": "AMD EPYC", "cpu_count": 2,
    "kernel": "6.18.44-fc-v1147", "platform": "Linux-6.18.44-fc-v1147-x86_64-with-glibc2.36",
    "worker": {"pid": 41, "python": "3.11.7", "python_impl": "CPython", "cpus": [1]},
}


def _v1_doc(record: dict) -> str:
    return json.dumps({"format": R.FILE_FORMAT, "schema_version": 1,
                       "httpbench_version": "0.1.0", "saved_unix_ns": 0, "record": record})


def _v1_measure() -> dict:
    d = httpbench.measure(lambda: None, n=50, label="noop").to_dict()
    d["metadata"] = json.loads(json.dumps(V1_MEASURE_MD))
    return d


def test_schema_history_mentions_every_version():
    assert R.SCHEMA_VERSION == 5
    assert sorted(_resultfile._MIGRATIONS) == [1, 2, 3, 4]


def test_v1_measure_record_loads_with_the_shared_keys(tmp_path):
    p = tmp_path / "old.json"
    p.write_text(_v1_doc(_v1_measure()))
    r = httpbench.load(p)
    md = r.metadata
    assert md["cpus"] == 2 and "cpu_count" not in md
    assert md["kernel"] == "Linux 6.18.44-fc-v1147"
    assert md["worker"]["python_implementation"] == "CPython"
    assert "python_impl" not in md["worker"]
    # "cpus" is a count everywhere; the worker's pinning is its affinity list
    assert md["worker"]["cpus"] == 1 and md["worker"]["affinity"] == [1]
    assert r.label == "noop" and r.calls == 50


def test_v1_resultset_records_are_migrated_and_resaved_as_current(tmp_path):
    rs = {"kind": "ResultSet", "metadata": {"cpus": 2, "kernel": "Linux 6.1"},
          "results": [{"client": "c", "scenario": "s", "repeat": i, "result": _v1_measure()}
                      for i in range(2)], "notes": [], "skipped": {}}
    loaded = R.loads(_v1_doc(rs))
    assert loaded.metadata == {"cpus": 2, "kernel": "Linux 6.1"}
    for _key, r in loaded:
        assert r.metadata["cpus"] == 2 and r.metadata["kernel"].startswith("Linux ")
    again = json.loads(R.dumps(loaded))
    assert again["schema_version"] == R.SCHEMA_VERSION
    assert R.loads(json.dumps(again)) == loaded


def test_every_kind_of_result_carries_the_same_machine_keys():
    keys = set(_metadata.METADATA_KEYS)
    m = httpbench.measure(lambda: None, n=10)
    assert keys <= set(m.metadata)
    assert isinstance(m.metadata["cpus"], int)
    with httpbench.Server() as srv:
        b = httpbench.bench(srv.url + "/bytes/10", n=5, concurrency=1)
    assert keys <= set(b.metadata)
    assert {k: b.metadata[k] for k in keys} == {k: m.metadata[k] for k in keys}


def test_v3_worker_cpu_list_becomes_affinity_and_a_count():
    m = httpbench.measure(lambda: None, n=10).to_dict()
    m["metadata"] = {"cpus": 2, "worker": {"pid": 7, "cpus": [0, 1]}}
    rs = {"kind": "ResultSet", "metadata": {"cpus": 2},
          "results": [{"client": "c", "scenario": "s", "repeat": 0, "result": m}],
          "notes": [], "skipped": {}}
    doc = json.dumps({"format": R.FILE_FORMAT, "schema_version": 3,
                      "httpbench_version": "0.1.0", "saved_unix_ns": 0, "record": rs})
    r = R.loads(doc).get("c", "s", 0)
    assert r.metadata["cpus"] == 2
    assert r.metadata["worker"] == {"pid": 7, "cpus": 2, "affinity": [0, 1]}


def test_v4_version_deltas_are_keyed_by_the_row_columns():
    m = httpbench.measure(lambda: None, n=10).to_dict()
    old_row = {"cpu": {"ratio": 1.2}, "allocs": {"delta": 3.0}, "rss": {"ratio": 1.0}}
    rs = {"kind": "ResultSet",
          "metadata": {"versions": {"baseline": "a", "deltas": {"s": {"b": old_row}}},
                       "baseline_file": {"path": "x.json", "deltas": {"s": {"b": old_row}}}},
          "results": [{"client": c, "scenario": "s", "repeat": 0, "result": m} for c in "ab"],
          "notes": [], "skipped": {}}
    doc = json.dumps({"format": R.FILE_FORMAT, "schema_version": 4,
                      "httpbench_version": "0.1.0", "saved_unix_ns": 0, "record": rs})
    md = R.loads(doc).metadata
    want = {"cpu_ns_per_request": {"ratio": 1.2}, "allocs_per_request": {"delta": 3.0},
            "peak_rss_bytes": {"ratio": 1.0}}
    assert md["versions"]["deltas"]["s"]["b"] == want
    assert md["baseline_file"]["deltas"]["s"]["b"] == want
    assert md["versions"]["baseline"] == "a"
