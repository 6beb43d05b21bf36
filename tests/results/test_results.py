"""Result records: construction, derived figures, JSON round trips, schema errors."""

import dataclasses
import gzip
import json
import math
import random

import httpbench
import pytest
from httpbench import _resultfile
from httpbench import _results as R


def hist(values):
    h = httpbench.Histogram()
    for v in values:
        h.record(int(v))
    return h


def make_bench(seed=1, **kw):
    rng = random.Random(seed)
    lat = [rng.randint(200_000, 2_000_000) for _ in range(500)]
    args = dict(
        url="http://127.0.0.1:8080/150b",
        latency=hist(lat),
        duration_ns=2_000_000_000,
        config=R.BenchConfig(duration_ns=2_000_000_000, concurrency=16, threads=2, rate=250.0),
        responses=500,
        successes=480,
        status_counts={200: 480, 503: 20},
        error_counts={"connect": 3, "timeout": 2},
        bytes_in=500 * 300,
        bytes_out=500 * 80,
        latency_uncorrected=hist([x // 2 for x in lat]),
        connect=hist([50_000] * 16),
        ttfb=hist([x - 10_000 for x in lat]),
        connections=16,
        reconnects=3,
        in_flight_at_stop=4,
        cpu_user_ns=300_000_000,
        cpu_sys_ns=100_000_000,
        start_unix_ns=1_700_000_000_000_000_000,
        end_unix_ns=1_700_000_002_000_000_000,
        series_responses=(240, 240),
        series_errors=(12, 13),
        metadata={"server": "httpbench/0.1", "document_length": 150},
    )
    args.update(kw)
    return R.BenchResult(**args)


def make_measure(label="requests", seed=2, **kw):
    rng = random.Random(seed)
    args = dict(
        label=label,
        calls=1000,
        wall_ns=500_000_000,
        latency=hist(rng.randint(300_000, 600_000) for _ in range(1000)),
        cpu_user_ns=400_000_000,
        cpu_sys_ns=50_000_000,
        cpu_thread_ns=420_000_000,
        alloc_counts={"raw": 1000, "mem": 20_000, "obj": 60_000},
        alloc_bytes={"raw": 8_000_000, "mem": 1_000_000, "obj": 9_000_000},
        alloc_net_bytes=4096,
        gc_collections=(12, 1, 0),
        gc_pause_ns=3_000_000,
        peak_rss_bytes=60 * 1024**2,
        overhead_ns_per_call=80.0,
        overhead_allocs_per_call=0.0,
        metadata={"python": "3.12"},
    )
    args.update(kw)
    return R.MeasureResult(**args)


def make_set():
    rs = R.ResultSet(metadata={"n": 1000, "repeat": 2})
    for rep in range(2):
        rs = rs.with_result("requests", "get-150b", rep, make_measure("requests", seed=rep))
        rs = rs.with_result("httpx", "get-150b", rep, make_measure("httpx", seed=10 + rep))
    rs = rs.with_result("native", "load", 0, make_bench())
    rs = rs.with_note(R.Note("spread", "run-to-run spread 30%", "httpx", "get-150b"))
    return rs.with_skipped("pycurl", "not installed (pip install pycurl)")


def test_bench_derived_figures():
    b = make_bench()
    assert b.non_2xx == 20
    assert b.errors == 5
    assert b.failures == 25
    assert b.error_counts == {"connect": 3, "tls": 0, "write": 0, "read": 0, "timeout": 2,
                              "protocol": 0, "closed": 0}
    assert b.rps == pytest.approx(240.0)
    assert b.success_rps == b.rps
    assert b.error_rps == pytest.approx(12.5)
    assert b.bytes_in_per_s == pytest.approx(75_000)
    assert b.cpu_ns_per_request == pytest.approx(400_000_000 / 505)
    assert b.p50 == b.latency.percentile(50)
    assert b.p99 == b.latency.percentile(99)
    ps = b.percentiles([50, 99.9], which="latency_uncorrected")
    assert ps == {50.0: b.latency_uncorrected.percentile(50),
                  99.9: b.latency_uncorrected.percentile(99.9)}
    assert b.config.constant_rate
    assert b.label == b.url
    assert math.isnan(b.percentiles([50], which="tls")[50.0])  # not measured
    with pytest.raises(ValueError):
        b.percentiles(which="nope")


def test_measure_derived_figures():
    m = make_measure()
    assert m.calls_per_s == pytest.approx(2000.0)
    assert m.cpu_ns_per_call == pytest.approx(450_000.0)
    assert m.thread_cpu_ns_per_call == pytest.approx(420_000.0)
    assert m.allocs_per_call == pytest.approx(81.0)
    assert m.alloc_bytes_per_call == pytest.approx(18_000.0)
    assert m.gc_total == 13
    assert m.gc_per_10k == pytest.approx(130.0)
    assert math.isnan(m.native_allocs_per_call)
    off = make_measure(alloc_counts=None, alloc_bytes=None, gc_collections=None)
    assert off.allocs is None and math.isnan(off.allocs_per_call)  # untracked is not 0
    assert math.isnan(off.gc_per_10k)
    assert make_measure(alloc_counts={"OBJ": 5}).alloc_counts == {"raw": 0, "mem": 0, "obj": 5}


def test_records_are_frozen_and_validated():
    b = make_bench()
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.responses = 1
    with pytest.raises(TypeError):
        make_bench(latency=[1, 2, 3])
    with pytest.raises(ValueError):
        make_bench(successes=501)
    with pytest.raises(ValueError):
        make_measure(gc_collections=(1, 2))
    with pytest.raises(ValueError, match="calls must be >= 0"):
        make_measure(calls=-1)
    with pytest.raises(ValueError, match="bytes_in must be >= 0"):
        make_bench(bytes_in=-5)
    with pytest.raises(ValueError, match="error_counts"):
        make_bench(error_counts={"read": -1})
    assert make_measure(alloc_net_bytes=-4096).alloc_net_bytes == -4096  # net can be freed
    with pytest.raises(TypeError):
        R.ResultSet({("a", "b", 0): "not a result"})
    with pytest.raises(ValueError):
        R.ResultSet({("a", "b"): make_measure()})
    assert not hasattr(b, "__dict__")  # slots


@pytest.mark.parametrize("factory", [make_bench, make_measure, make_set])
def test_dict_and_json_round_trip(factory, tmp_path):
    rec = factory()
    d = rec.to_dict()
    json.dumps(d, allow_nan=False)  # JSON-ready, no NaN
    back = type(rec).from_dict(json.loads(json.dumps(d)))
    assert back == rec
    assert back.to_dict() == d
    for name in ("x.json", "x.json.gz"):
        path = tmp_path / name
        rec.save(path)
        loaded = httpbench.load(path)
        assert type(loaded) is type(rec)
        assert loaded == rec
    assert R.loads(R.dumps(rec)) == rec


def test_round_trip_keeps_histograms_and_values(tmp_path):
    def _saved(rec):
        path = tmp_path / f"{type(rec).__name__}.json"
        rec.save(path)
        return path

    b = httpbench.load(_saved(make_bench()))
    orig = make_bench()
    for name in ("latency", "latency_uncorrected", "connect", "ttfb"):
        assert getattr(b, name).encode() == getattr(orig, name).encode()
        assert getattr(b, name).count == getattr(orig, name).count
    assert b.tls is None
    assert b.status_counts == {200: 480, 503: 20}  # int keys back
    assert b.series_errors == (12, 13)
    assert b.config == orig.config
    rs = httpbench.load(_saved(make_set()))
    assert rs.keys() == make_set().keys()
    assert rs.clients == ["requests", "httpx", "native"]
    assert rs.scenarios == ["get-150b", "load"]
    assert [r.label for r in rs.repeats("httpx", "get-150b")] == ["httpx", "httpx"]
    assert rs.skipped == {"pycurl": "not installed (pip install pycurl)"}
    assert [str(n) for n in rs.notes] == ["[spread] httpx/get-150b: run-to-run spread 30%"]
    assert rs.metadata == {"n": 1000, "repeat": 2}


def test_inequality_detects_a_changed_histogram():
    a = make_measure()
    b = make_measure(latency=hist([1, 2, 3]))
    assert a != b
    assert a == make_measure()
    assert a != make_measure(calls=999)


def test_resultset_building_is_non_mutating():
    rs = R.ResultSet()
    rs2 = rs.with_result("a", "s", 0, make_measure("a"))
    assert len(rs) == 0 and len(rs2) == 1
    assert ("a", "s", 0) in rs2
    assert rs2.get("a", "s", 0).label == "a"
    assert rs2.get("a", "s", 1) is None
    sel = make_set().select(client="httpx")
    assert sel.clients == ["httpx"] and len(sel.notes) == 1
    assert make_set().select(client=["requests"]).notes == ()


def _doc(rec):
    return json.loads(R.dumps(rec))


def test_schema_version_errors(tmp_path):
    doc = _doc(make_measure())
    newer = dict(doc, schema_version=R.SCHEMA_VERSION + 1)
    with pytest.raises(ValueError, match="newer than this httpbench supports"):
        R.loads(json.dumps(newer))
    older = dict(doc, schema_version=0)
    with pytest.raises(ValueError, match="cannot migrate"):
        R.loads(json.dumps(older))
    with pytest.raises(ValueError, match="schema_version"):
        R.loads(json.dumps(dict(doc, schema_version="1")))
    p = tmp_path / "new.json"
    p.write_text(json.dumps(newer))
    with pytest.raises(ValueError, match=str(p)):
        httpbench.load(p)


def test_migration_hook_is_applied(monkeypatch):
    doc = _doc(make_measure())
    doc["schema_version"] = 0
    doc["record"]["old_name"] = doc["record"].pop("label")

    def v0_to_v1(d):
        d = dict(d, schema_version=1)
        d["record"]["label"] = d["record"].pop("old_name")
        return d

    monkeypatch.setitem(_resultfile._MIGRATIONS, 0, v0_to_v1)
    assert R.loads(json.dumps(doc)) == make_measure()


@pytest.mark.parametrize(
    "text,msg",
    [
        ("not json", "invalid JSON"),
        ("[1, 2]", "not an httpbench results file"),
        ('{"format": "other", "schema_version": 1}', "not an httpbench results file"),
    ],
)
def test_not_a_results_file(text, msg):
    with pytest.raises(ValueError, match=msg):
        R.loads(text)


def test_malformed_records_are_value_errors():
    good = make_measure().to_dict()
    with pytest.raises(ValueError, match="missing required field 'calls'"):
        R.MeasureResult.from_dict({k: v for k, v in good.items() if k != "calls"})
    with pytest.raises(ValueError, match="expected an integer"):
        R.MeasureResult.from_dict(dict(good, calls="many"))
    with pytest.raises(ValueError, match="base64"):
        R.MeasureResult.from_dict(dict(good, latency={"encoding": "hb-base64", "data": "!!"}))
    with pytest.raises(ValueError):
        R.MeasureResult.from_dict(dict(good, latency={"encoding": "hb-base64", "data": "AAAA"}))
    with pytest.raises(ValueError, match="unknown result kind"):
        R.result_from_dict(dict(good, kind="Banana"))
    with pytest.raises(ValueError, match="expected kind"):
        R.BenchResult.from_dict(good)
    with pytest.raises(ValueError, match="status_counts"):
        R.BenchResult.from_dict(dict(make_bench().to_dict(), status_counts={"ok": 1}))


def test_no_pickle_in_files(tmp_path):
    p = tmp_path / "x.json.gz"
    make_set().save(p)
    raw = gzip.decompress(p.read_bytes()).decode()
    doc = json.loads(raw)
    assert doc["format"] == "httpbench-results"
    assert doc["schema_version"] == R.SCHEMA_VERSION
    assert doc["record"]["kind"] == "ResultSet"


def test_fields_added_later_round_trip():
    @dataclasses.dataclass(frozen=True, slots=True, eq=False, repr=False)
    class Later(R.MeasureResult):
        new_count: int = 0
        new_series: tuple = ()

    rec = Later(**{f.name: getattr(make_measure(), f.name)
                   for f in dataclasses.fields(R.MeasureResult)}, new_count=7, new_series=(1, 2))
    back = Later.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert back.new_count == 7 and back.new_series == (1, 2)
    assert back == rec


def test_bench_repr_names_http2_connections_and_streams():
    h1 = make_bench()
    h2 = make_bench(config=R.BenchConfig(concurrency=4, protocol="h2", streams=10))
    assert repr(h1).startswith("<BenchResult GET http://127.0.0.1:8080/150b 480/500 ok, ")
    assert repr(h2).startswith("<BenchResult GET http://127.0.0.1:8080/150b h2 -c4 -m10 "
                               "480/500 ok, ")
