"""Recording from where runs happen: bench(history=...), `httpbench URL --history`,
HTTPBENCH_HISTORY, and `httpbench compare --history`."""

import httpbench
import pytest
from httpbench._cli import main as cli


def test_bench_records_its_run(server, tmp_path):
    path = str(tmp_path / "h.db")
    r = httpbench.bench(server.url + "/bytes/150", n=300, concurrency=2, history=path)
    h = httpbench.history(path)
    (run,) = h.runs()
    assert run["source"] == "bench" and run["label"] == r.label
    rps = h.series(metric="rps")[0]
    assert rps.scenario == "GET http/1.1 -c2 -t1 closed loop" and rps.points[0].value == r.rps
    assert h.series(metric="p50_ns")[0].points[0].samples == r.successes


def test_bench_with_a_bad_store_fails_before_any_request(server, tmp_path):
    bad = tmp_path / "h.db"
    bad.write_bytes(b"\0garbage" * 512)
    before = server.stats()["connections_accepted"]
    with pytest.raises(httpbench.HistoryError, match="not a readable SQLite history"):
        httpbench.bench(server.url, n=50, history=str(bad))
    assert server.stats()["connections_accepted"] == before
    assert bad.read_bytes() == b"\0garbage" * 512


def test_load_test_cli_records_with_flag_or_env(server, tmp_path, monkeypatch, capsys):
    path = str(tmp_path / "h.db")
    assert cli([server.url, "-n", "100", "-q", "--history", path]) == 0
    monkeypatch.setenv("HTTPBENCH_HISTORY", path)
    assert cli([server.url, "-n", "100", "-q"]) == 0
    assert [r["source"] for r in httpbench.history(path).runs()] == ["bench", "bench"]
    capsys.readouterr()
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"x" * 4096)
    assert cli([server.url, "-n", "100", "-q", "--history", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err


@pytest.mark.slow
def test_compare_records_every_cell_and_draws_its_trends(tmp_path, capsys):
    path = str(tmp_path / "h.db")
    out_dir = tmp_path / "out"
    for i in (1, 2):
        rc = cli(["compare", "--quick", "--clients", "http.client", "--scenarios", "get-150b",
                  "--out", str(out_dir), "--no-plots", "-q", "--history", path])
        assert rc == 0
        out = capsys.readouterr().out
        assert f"Recorded run {i} in history {path}" in out
    assert "working-set probe (4 MiB):" in out and "ns/step" in out
    assert f"its trends: {out_dir / 'history.html'}" in out  # two runs: a trend to draw
    assert (out_dir / "history.png").read_bytes()[:4] == b"\x89PNG"
    h = httpbench.history(path)
    run = h.runs()[-1]
    assert run["source"] == "compare" and run["speed_ns"] and run["wakeup"]
    assert run["meta"]["working_set_ns"] > 0  # the working-set probe beside the speed index
    assert run["versions"]["clients"]
    (cpu,) = h.series("http.client", "get-150b", "cpu_ns_per_request")
    assert len(cpu) == 2 and cpu.points[-1].samples >= 1 and cpu.points[-1].value > 0
