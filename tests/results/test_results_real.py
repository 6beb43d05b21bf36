"""Records from real runs (bench() against the embedded server, measure() when
available) survive JSON, DataFrames, tables and plots."""

import httpbench
import pytest
from httpbench import _units as U
from httpbench import report as P


@pytest.fixture(scope="module")
def real_bench(server):
    r = httpbench.bench(server.url + "/bytes/150", n=300, concurrency=2)
    return r, server.stats()


def test_real_bench_record_round_trip(real_bench, tmp_path):
    r, stats = real_bench
    assert r.successes == 300 and r.errors == 0
    assert stats["requests"] >= 300
    path = tmp_path / "bench.json"
    r.save(path)
    back = httpbench.load(path)
    assert back == r
    assert back.latency.count == 300
    assert back.latency.encode() == r.latency.encode()
    assert back.p99 == r.p99


def test_real_bench_dataframe_table_plot(real_bench):
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    r, _ = real_bench
    df = r.to_dataframe()
    row = df.iloc[0]
    assert row.requests == 300 and row.responses == 300 and row.connections == r.connections
    assert row.p50_ns == r.latency.percentile(50)
    assert row.bytes_in == r.bytes_in
    assert "| 0 |" in r.summary("md")  # no errors column value
    fig = r.plot(kind="percentiles")
    (line,) = fig.axes[0].get_lines()
    unit = fig.axes[0].get_ylabel().split("(")[1].rstrip(")").split(",")[0]
    assert line.get_ydata()[-1] == pytest.approx(r.latency.max / U.DURATION_UNITS[unit])
    assert "<svg" in r._repr_mimebundle_()["text/html"]


def test_real_measure_record_round_trip(tmp_path):
    if not hasattr(httpbench, "measure"):
        pytest.skip("httpbench.measure is not available in this build")
    m = httpbench.measure(lambda: [0] * 10, n=500, label="list")
    path = tmp_path / "m.json"
    m.save(path)
    back = httpbench.load(path)
    assert back == m and back.calls == 500 and back.latency.count == 500
    rs = httpbench.ResultSet().with_result("list", "alloc", 0, m)
    assert P.result_rows(rs)[0]["allocs_per_request"] == pytest.approx(m.allocs_per_call,
                                                                        nan_ok=True)
