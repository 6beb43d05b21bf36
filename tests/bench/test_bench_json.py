"""The generator's output for tools: ``--json -`` on stdout, plain summary fields
that validate against the shipped JSON Schema, ``-R 2k``, a TLS verification failure
that stops before the run and says how to trust the server, connection failures
counted apart from requests."""

import importlib.resources
import json
import subprocess
import sys

import httpbench
import pytest

jsonschema = pytest.importorskip("jsonschema")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "httpbench", *args], capture_output=True,
                          text=True, timeout=60)


def _schema():
    text = (importlib.resources.files("httpbench") / "bench-result.schema.json").read_text()
    schema = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def test_json_to_stdout_validates_and_carries_the_headline_numbers(server):
    p = _cli(server.url + "/bytes/150", "-n", "300", "-c", "2", "--json", "-")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)  # stdout is the document alone; the report went to stderr
    assert "Complete requests:      300" in p.stderr
    jsonschema.validate(doc, _schema())
    s = doc["record"]["summary"]
    r = httpbench.BenchResult.from_dict(doc["record"])
    assert s["rps"] == pytest.approx(r.rps) and s["rps"] > 0
    assert s["latency_ns"]["p99"] == int(r.p99) and s["latency_ns"]["p50"] <= s["latency_ns"]["p99"]
    assert s["requests"]["completed"] == 300 and s["errors"] == {"total": 0, "by_type": {}}
    assert s["status"] == {"200": 300} and s["connections"]["opened"] == 2
    assert s["bytes"]["in"] == r.bytes_in and s["cpu"]["user_ns"] == r.cpu_user_ns


def test_summary_timeline_and_stdev_follow_the_series():
    r = httpbench.BenchResult(url="http://x/", latency=httpbench.Histogram(),
                              duration_ns=3_500_000_000, responses=3500, successes=3500,
                              series_responses=(1000, 1200, 800, 500),
                              series_errors=(0, 1, 0, 0))
    s = r.to_dict()["summary"]
    assert [p["rps"] for p in s["timeline"]] == [1000, 1200, 800, 1000]  # last: 500 in 0.5 s
    assert [p["t_s"] for p in s["timeline"]] == [1.0, 2.0, 3.0, 3.5]
    assert s["timeline"][1]["errors"] == 1
    assert s["rps_stdev"] == pytest.approx(200.0)  # of the three whole seconds
    assert s["latency_ns"]["p99"] is None  # no samples: null, not 0
    jsonschema.validate(json.loads(r.to_json()), _schema())
    assert "Req/s stdev" in httpbench.report.format_report(r)


def test_rate_takes_a_suffix(server, tmp_path):
    j = tmp_path / "r.json"
    p = _cli(server.url + "/bytes/150", "-d", "0.3s", "-R", "2k", "--json", str(j))
    assert p.returncode == 0, p.stderr
    assert httpbench.load(j).config.rate == 2000.0
    bad = _cli(server.url + "/", "-R", "2x")
    assert bad.returncode == 2 and "invalid rate '2x'" in bad.stderr


def test_tls_verification_failure_stops_before_the_run_and_says_how_to_trust(tls_server):
    p = _cli(tls_server.url + "/bytes/150", "-d", "5s")
    assert p.returncode == 1
    assert "TLS verification of 127.0.0.1" in p.stderr and "nothing was sent" in p.stderr
    assert "--ca-file PATH" in p.stderr and "--insecure" in p.stderr
    assert p.stdout == ""  # no run, no report
    ok = _cli(tls_server.url + "/bytes/150", "-n", "20", "--ca-file", tls_server.ca_file)
    assert ok.returncode == 0 and "Complete requests:      20" in ok.stdout


def test_connection_failures_are_not_failed_requests():
    p = _cli("http://127.0.0.1:9/", "-n", "3")
    assert p.returncode == 1
    assert "Failed requests:        0\n" in p.stdout
    assert "Failed connections:     3 (Connect: 3; no request sent on them)" in p.stdout
    assert "Complete requests:      0 (no request sent)" in p.stdout


def test_timeline_carries_each_seconds_p50_and_p99(server):
    r = httpbench.bench(server.url + "/bytes/150", duration=2.3, concurrency=2)
    points = r.to_dict()["summary"]["timeline"]
    assert len(points) == 3 and len(r.series_p50_ns) == len(r.series_responses)
    lo, hi = r.latency.min, r.latency.max
    for p in points:
        # each second's figures lie within the run's, up to their bucket (1/16 of the value)
        assert lo * 15 / 16 <= p["p50_ns"] <= p["p99_ns"] <= hi * 17 / 16, p
    jsonschema.validate(json.loads(r.to_json()), _schema())
    again = httpbench.BenchResult.from_dict(r.to_dict())
    assert again.series_p99_ns == r.series_p99_ns  # saved and loaded
