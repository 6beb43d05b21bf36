"""Change points through the store and History.check: where they are, their size and
CI, what counts as a regression, and what never does (another machine, one noisy run,
noise itself)."""

import random
import shutil

import httpbench
import pytest
from httpbench._cli import main as cli
from httpbench._historyrun import fingerprint
from httpbench._historystore import NewRun, Point, open_store

pytest.importorskip("otava.analysis", reason="pip install apache-otava")

OTHER_MACHINE = {**fingerprint(), "cpu_model": "Other CPU", "fingerprint": "0123456789ab"}


def record(target, values, metric="cpu_ns_per_request", machine=None, speeds=None,
           subject="t::x", start=0):
    with open_store(target) as st:
        for i, v in enumerate(values):
            st.record(NewRun("pytest", machine or fingerprint(),
                             [Point(subject, "", metric, v, None, None, 100, "")],
                             git={"commit": f"{start + i + 1:040x}", "branch": "main",
                                  "dirty": False},
                             speed_ns=None if speeds is None else speeds[i]))


def commit_no(finding_point):
    return int(finding_point.commit, 16)


def noisy(seed, n=40, cv=0.03, step_at=None, step=0.08, base=1000.0):
    r = random.Random(seed)
    return [base * (1 + step if step_at and i + 1 >= step_at else 1) * (1 + r.gauss(0, cv))
            for i in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_step_of_8pct_is_found_once_at_its_commit_with_its_ci(tmp_path, seed):
    path = str(tmp_path / "h.db")
    record(path, noisy(seed, step_at=25))
    rep = httpbench.history(path).check()
    (f,) = rep.findings
    assert abs(commit_no(f.after) - 25) <= 1 and commit_no(f.before) == commit_no(f.after) - 1
    lo, hi = f.change_point.ci
    assert lo <= 0.08 <= hi and f.change_point.pvalue < 0.001
    assert f.regression and rep.regressions == [f] and not rep
    assert f.describe().startswith(f"regression since {f.after.commit[:7]} (+")


def test_flat_series_has_no_change(tmp_path):
    path = str(tmp_path / "h.db")
    record(path, [1000.0] * 40)
    rep = httpbench.history(path).check()
    assert rep.findings == [] and rep


def test_noise_of_6pct_cv_over_20_seeds_gives_at_most_one_false_change(tmp_path):
    false = 0
    for seed in range(20):
        path = str(tmp_path / f"h{seed}.db")
        record(path, noisy(100 + seed, cv=0.06))
        false += len(httpbench.history(path).check().findings)
    assert false <= 1


@pytest.mark.slow
def test_instruction_counts_show_a_1pct_step_at_exactly_its_commit(tmp_path, monkeypatch):
    """Two real callgrind counts (the work and 1 % more of it), recorded as 24 runs of the
    one and 16 of the other: exact counts make even a 1 % step certain."""
    if shutil.which("valgrind") is None:
        pytest.skip("instruction counts need valgrind (apt-get install valgrind)")
    mod = tmp_path / "hb_work_mod.py"
    mod.write_text("import itertools\n\ndef work(n):\n    for _ in itertools.repeat(None, n):\n"
                   "        object()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    try:
        counts = [httpbench.measure("hb_work_mod:work", args=(n,), n=20,
                                    instructions=True).instructions_per_call
                  for n in (10000, 10100)]
    except httpbench.FeatureUnavailable as exc:
        pytest.skip(str(exc))
    assert 1.005 < counts[1] / counts[0] < 1.015
    path = str(tmp_path / "h.db")
    record(path, [counts[0]] * 24 + [counts[1]] * 16, metric="instructions_per_request")
    (f,) = httpbench.history(path).check(metric="instructions_per_request").findings
    assert commit_no(f.after) == 25 and f.regression
    assert f.change_point.change == pytest.approx(counts[1] / counts[0] - 1)


def test_another_machine_starts_its_own_series_and_is_no_regression(tmp_path):
    path = str(tmp_path / "h.db")
    record(path, noisy(7, n=25))
    record(path, noisy(8, n=15, base=1150.0), machine=OTHER_MACHINE, start=25)
    h = httpbench.history(path)
    rep = h.check()
    assert rep.series_checked == 2 and rep.findings == [] and rep
    assert sorted(len(s) for s in h.series()) == [15, 25]
    assert cli(["history", "check", "--history", path]) == 0


def test_one_noisy_run_is_not_a_regression(tmp_path):
    path = str(tmp_path / "h.db")
    record(path, [1000.0] * 30 + [1500.0])
    rep = httpbench.history(path).check()
    assert all(not f.regression for f in rep.findings) and rep


def test_min_change_and_max_pvalue_are_the_users(tmp_path):
    path = str(tmp_path / "h.db")
    record(path, noisy(3, step_at=25))
    h = httpbench.history(path)
    assert len(h.check().findings) == 1
    assert h.check(min_change=0.12).findings == []
    assert h.check(max_pvalue=1e-40).findings == []
    assert cli(["history", "check", "--history", path, "--min-change", "12%"]) == 0
    assert cli(["history", "check", "--history", path, "--min-change", "lots"]) == 2


def test_throughput_falling_is_the_regression_rising_is_not(tmp_path):
    down, up = str(tmp_path / "d.db"), str(tmp_path / "u.db")
    record(down, noisy(4, step_at=25, step=-0.1), metric="rps")
    record(up, noisy(4, step_at=25, step=0.1), metric="rps")
    (f,) = httpbench.history(down).check().findings
    assert f.regression and f.change_point.change < 0
    (g,) = httpbench.history(up).check().findings
    assert not g.regression and not g.worse and "better since" in g.describe()


def test_speed_index_moves_are_annotated_and_adjusted_only_by_name(tmp_path):
    """The machine got 10 % slower at run 25 (its speed index says so) and the figures
    with it: the raw series shows the change, annotated; METRIC@speed shows none."""
    path = str(tmp_path / "h.db")
    r = random.Random(5)
    speeds = [500.0 * (1.10 if i >= 24 else 1) * (1 + r.gauss(0, 0.002)) for i in range(40)]
    values = [v * s / 500.0 for v, s in zip(noisy(6, cv=0.01), speeds, strict=True)]
    record(path, values, speeds=speeds)
    h = httpbench.history(path)
    assert [s.metric for s in h.series()] == ["cpu_ns_per_request"]  # no adjusted one stored
    (f,) = h.check().findings
    assert f.speed_notes and "speed index" in f.describe()
    (adj,) = h.series(metric="cpu_ns_per_request@speed")
    assert adj.metric == "cpu_ns_per_request@speed" and len(adj) == 40
    assert h.check(metric="cpu_ns_per_request@speed").findings == []


def test_check_looks_at_the_newest_runs_only(tmp_path):
    path = str(tmp_path / "h.db")
    record(path, noisy(9, n=80, step_at=20))
    h = httpbench.history(path)
    assert len(h.check().findings) == 1
    assert h.check(last=50).findings == []  # the step is older than the newest 50 runs


def test_check_json_and_plot(tmp_path, capsys):
    import json

    path = str(tmp_path / "h.db")
    record(path, noisy(2, step_at=25))
    capsys.readouterr()
    assert cli(["history", "check", "--history", path, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    (f,) = doc["findings"]
    assert f["regression"] and f["last_before"]["commit"] and f["runs_before"] >= 23
    png, page = tmp_path / "h.png", tmp_path / "h.html"
    assert cli(["history", "plot", "--history", path, "-o", str(png), "--html", str(page)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "data:image/png;base64," in page.read_text()
    df = httpbench.history(path).to_dataframe()
    assert len(df) == 40 and {"commit", "value", "ci_low", "speed_change"} <= set(df.columns)
