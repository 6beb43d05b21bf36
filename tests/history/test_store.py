"""The history store on SQLite and PostgreSQL: what a run keeps, concurrent writers,
schema versions, and bad stores (an error naming the store, exit 2, nothing lost)."""

import os
import sqlite3
import subprocess
import sys
import textwrap

import httpbench
import pytest
from httpbench._cli import main as cli
from httpbench._historyrun import fingerprint, new_run
from httpbench._historystore import SCHEMA_VERSION, NewRun, Point, open_store


def synthetic_run(values, machine=None, commit=None, speed=None, subject="t::x"):
    pts = [Point(subject, "", metric, v, v * 0.99, v * 1.01, 5, "thin" if v < 0 else "")
           for metric, v in values.items()]
    return NewRun("pytest", machine or fingerprint(), pts,
                  git={"commit": commit, "branch": "main", "dirty": False} if commit else None,
                  speed_ns=speed)


def test_a_run_keeps_commit_machine_calibration_and_cells(store_target, tmp_path):
    rs = httpbench.measure(lambda: None, n=50)
    run = new_run("bench", [Point("fn", "", "p50_ns", 1234.5, 1200.0, 1300.0, 50, "wake-up")],
                  {**rs.metadata, "speed_index": {"median": 812.0, "unit": "ns"},
                   "wakeup_ns": {"same_cpu": 9000, "cross_cpu": 40000},
                   "placement": {"get": {"server_cpus": [0], "client_cpus": [0]}},
                   "client_versions": {"requests": "2.34.2"}},
                  label="fn", cwd=os.path.dirname(os.path.abspath(__file__)))
    with open_store(store_target) as st:
        run_id = st.record(run)
        assert st.schema_version() == SCHEMA_VERSION
    h = httpbench.history(store_target)
    (r,) = h.runs()
    assert r["id"] == run_id and r["source"] == "bench" and r["label"] == "fn"
    assert len(r["commit_sha"]) == 40 and r["branch"] is not None and r["dirty"] in (True, False)
    assert r["speed_ns"] == 812.0 and r["wakeup"] == {"same_cpu": 9000, "cross_cpu": 40000}
    assert r["placement"]["get"]["client_cpus"] == [0]
    assert r["versions"]["httpbench"] == httpbench.__version__
    assert r["versions"]["clients"] == {"requests": "2.34.2"}
    m = h.machines()[r["machine"]]
    assert m["cores"] >= 1 and m["python"] and m["openssl"] and m["kernel"]
    (s,) = h.series()
    (p,) = s.points
    assert (s.subject, s.metric, p.value, p.ci_low, p.ci_high, p.samples, p.notes) == (
        "fn", "p50_ns", 1234.5, 1200.0, 1300.0, 50, "wake-up")
    h.close()


def test_compare_results_become_cells_with_cis(tmp_path):
    """A ResultSet's cells: the median over repeats with its CI, repeats, notes."""
    rs = httpbench.ResultSet()
    for i in range(3):
        rs = rs.with_result("noop", "call", i, httpbench.measure(lambda: None, n=200))
    with pytest.raises(httpbench.HistoryError, match="no such history file"):
        httpbench.history(str(tmp_path / "h.db"))
    with httpbench.history(str(tmp_path / "h.db"), create=True) as h:
        h.record(rs)
        cpu = h.series("noop", "call", "cpu_ns_per_request")[0].points[0]
        assert cpu.samples == 3 and cpu.ci_low <= cpu.value <= cpu.ci_high
        assert {s.metric for s in h.series("noop")} >= {"cpu_ns_per_request", "p50_ns", "rps",
                                                         "allocs_per_request"}


def test_repeats_of_one_label_become_one_point_with_a_ci(tmp_path):
    rs = [httpbench.measure(lambda: None, n=100, label="noop") for _ in range(3)]
    with httpbench.history(str(tmp_path / "h.db"), create=True) as h:
        h.record(rs)
        (p,) = h.series("noop", metric="p50_ns")[0].points
        assert p.samples == 3 and p.ci_low <= p.value <= p.ci_high
        assert p.value == sorted(r.p50 for r in rs)[1]


def test_client_under_test_git_state_is_kept(tmp_path):
    repo = tmp_path / "client"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f").write_text("x")
    subprocess.run(["git", "-C", str(repo), "add", "f"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a",
                    "commit", "-qm", "c"], check=True)
    (repo / "f").write_text("y")  # dirty
    run = new_run("compare", [], {}, clients=[f"requests@{repo}"])
    assert run.meta["client_git"]["requests"]["dirty"] is True
    assert len(run.meta["client_git"]["requests"]["commit"]) == 40


WRITER = textwrap.dedent("""
    import sys
    from httpbench._historyrun import fingerprint
    from httpbench._historystore import NewRun, Point, open_store
    target, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    m = fingerprint()
    with open_store(target) as st:
        for i in range(n):
            pts = [Point(f"client{c}", "get", "cpu_ns_per_request", 1000.0 + i, None, None, 3,
                         who) for c in range(40)]
            st.record(NewRun("compare", m, pts, label=f"{who}-{i}"))
""")


def test_two_processes_recording_at_once_lose_nothing(store_target):
    n = 25
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, store_target, who, str(n)],
                              stderr=subprocess.PIPE, text=True) for who in ("a", "b")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    h = httpbench.history(store_target)
    labels = sorted(r["label"] for r in h.runs())
    assert labels == sorted([f"a-{i}" for i in range(n)] + [f"b-{i}" for i in range(n)])
    series = h.series(scenario="get")
    assert len(series) == 40  # created once each, though both writers raced to create them
    assert all(len(s) == 2 * n for s in series)
    h.close()


def test_unknown_series_is_an_error_naming_the_store(store_target):
    with open_store(store_target) as st:
        st.record(synthetic_run({"cpu_ns_per_request": 10.0}))
    h = httpbench.history(store_target)
    with pytest.raises(httpbench.HistoryError, match="no series matches metric='nope'") as ei:
        h.series(metric="nope")
    assert h.name in str(ei.value)
    assert cli(["history", "show", "--history", store_target, "--metric", "nope"]) == 2
    assert cli(["history", "check", "--history", store_target, "--subject", "nobody"]) == 2


def _newer_schema(target):
    with open_store(target) as st:
        st.record(synthetic_run({"cpu_ns_per_request": 10.0}))
        cur = st._db.cursor()
        cur.execute(f"UPDATE schema_version SET version = {SCHEMA_VERSION + 1}")


def test_newer_schema_is_refused_and_left_alone(store_target, capsys):
    _newer_schema(store_target)
    before = open(store_target, "rb").read() if "://" not in store_target else None
    with pytest.raises(httpbench.HistoryError, match="newer httpbench") as ei:
        open_store(store_target)
    assert "Nothing was written" in str(ei.value)
    capsys.readouterr()
    assert cli(["history", "list", "--history", store_target]) == 2
    err = capsys.readouterr().err
    assert "newer httpbench" in err and ("postgresql://" in err or store_target in err)
    if before is not None:
        assert open(store_target, "rb").read() == before
    else:
        import psycopg

        with psycopg.connect(store_target) as db:
            assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_corrupt_sqlite_file_is_refused_and_left_alone(tmp_path, capsys):
    path = tmp_path / "h.db"
    junk = os.urandom(8192)
    path.write_bytes(junk)
    for argv in (["list"], ["check"], ["prune", "--keep-last", "1"]):
        assert cli(["history", *argv, "--history", str(path)]) == 2
        err = capsys.readouterr().err
        assert str(path) in err and "not a readable SQLite history" in err
    with pytest.raises(httpbench.HistoryError):
        open_store(str(path)).record(synthetic_run({"x": 1.0}))
    assert path.read_bytes() == junk


def test_truncated_sqlite_file_is_refused_and_left_alone(tmp_path, capsys):
    path = tmp_path / "h.db"
    with open_store(str(path)) as st:
        for i in range(30):
            st.record(synthetic_run({f"m{k}": float(i + k) for k in range(60)},
                                    subject=f"t{i}"))
    data = path.read_bytes()
    assert len(data) > 3 * 4096
    cut = data[:len(data) // 3]
    path.write_bytes(cut)
    errors = 0
    for argv in (["list"], ["show"], ["export"], ["check"]):
        rc = cli(["history", *argv, "--history", str(path)])
        err = capsys.readouterr().err
        if rc:
            assert rc == 2 and str(path) in err, err
            errors += 1
    assert errors  # at least the commands reading the lost pages say so
    with pytest.raises(httpbench.HistoryError, match=str(path)):
        with open_store(str(path)) as st:
            st.record(synthetic_run({f"m{k}": 1.0 for k in range(60)}, subject="t0"))
            st.series()
            st.points([s[0] for s in st.series()])
    assert path.read_bytes() == cut


def test_a_foreign_sqlite_database_is_not_taken_over(tmp_path):
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (x TEXT)")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(httpbench.HistoryError, match="not an httpbench history"):
        open_store(str(path))
    assert path.read_bytes() == before


def test_unreachable_postgresql_is_exit_2(capsys):
    pytest.importorskip("psycopg", reason="pip install 'psycopg[binary]'")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once closed
    url = f"postgresql://u:secret@127.0.0.1:{port}/h"
    assert cli(["history", "list", "--history", url]) == 2
    err = capsys.readouterr().err
    assert f"postgresql://u:***@127.0.0.1:{port}/h" in err and "cannot connect" in err
    assert "secret" not in err


def test_no_store_given_is_exit_2(monkeypatch, capsys):
    monkeypatch.delenv("HTTPBENCH_HISTORY", raising=False)
    assert cli(["history", "list"]) == 2
    assert "HTTPBENCH_HISTORY" in capsys.readouterr().err


def test_env_names_the_store(monkeypatch, tmp_path, capsys):
    path = str(tmp_path / "h.db")
    with open_store(path) as st:
        st.record(synthetic_run({"cpu_ns_per_request": 5.0}, commit="ab" * 20))
    monkeypatch.setenv("HTTPBENCH_HISTORY", path)
    assert cli(["history", "list"]) == 0
    assert "abababa" in capsys.readouterr().out


def test_prune_keeps_the_newest(store_target, capsys):
    with open_store(store_target) as st:
        for i in range(10):
            st.record(synthetic_run({"cpu_ns_per_request": float(i)}, subject=f"t{i % 3}"))
    assert cli(["history", "prune", "--history", store_target, "--keep-last", "4"]) == 0
    assert "deleted 6 run(s)" in capsys.readouterr().out
    h = httpbench.history(store_target)
    assert len(h.runs()) == 4
    assert sorted(p.value for s in h.series() for p in s.points) == [6.0, 7.0, 8.0, 9.0]
    assert cli(["history", "prune", "--history", store_target]) == 2


def test_export_csv_and_json(tmp_path, capsys):
    import csv
    import json

    path = str(tmp_path / "h.db")
    with open_store(path) as st:
        for i in range(3):
            st.record(synthetic_run({"p50_ns": 100.0 + i}, commit=f"{i:040x}"))
    assert cli(["history", "export", "--history", path]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert [float(r["value"]) for r in rows] == [100.0, 101.0, 102.0]
    out = tmp_path / "e.json"
    assert cli(["history", "export", "--history", path, "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == "httpbench-history-export" and len(doc["points"]) == 3
