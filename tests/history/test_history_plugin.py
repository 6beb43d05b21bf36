"""The plugin's history end to end: a git repository whose measured function gets 8 %
dearer at commit 25 of 40, measured by the plugin at every commit with the history
check on (in-process pytester runs, one per commit).

The cost is a number of allocations per call read from a file of the repository, with
a small deterministic jitter per commit (about 0.3 %), so the series is exact and the
test says something about the plugin, the store and the detector rather than about
how busy this machine is. (Timing series on a shared 2-vCPU VM shift by 5-7 % with the
load of other processes; docs/history.md shows such a shift.)"""

import json
import subprocess

import httpbench
import pytest
from httpbench._cli import main as cli

pytest_plugins = ["pytester"]

# resolve the lazy public names outside the in-process runs (see tests/plugin/test_plugin.py);
# the detector's numpy/scipy too: a second copy of numpy imported inside a run breaks it
for _name in httpbench.__all__:
    getattr(httpbench, _name)
pytest.importorskip("otava.analysis", reason="pip install apache-otava")
pytest.importorskip("scipy.stats")

WORK = '''
import itertools
import pathlib

COST = int((pathlib.Path(__file__).parent / "cost.txt").read_text())


def work():
    for _ in itertools.repeat(None, COST):  # COST allocations (+ 1), nothing else
        object()


def test_work(httpbench):
    httpbench.measure(work, n=300, warmup=30)
'''

BASE = 1000
STEP_AT = 25  # 1-based commit number where the cost steps up


def git(path, *args):
    return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(pytester):
    git(pytester.path, "init", "-q")
    git(pytester.path, "config", "user.email", "t@example.com")
    git(pytester.path, "config", "user.name", "t")
    pytester.makepyfile(test_w=WORK)
    (pytester.path / "cost.txt").write_text(str(BASE))
    git(pytester.path, "add", "test_w.py", "cost.txt")


def commit(pytester, i):
    cost = (BASE * 108 // 100 if i >= STEP_AT else BASE) + (i * 37) % 7 - 3
    (pytester.path / "cost.txt").write_text(f"{cost}\n")
    git(pytester.path, "commit", "-qam", f"commit {i}")
    return git(pytester.path, "rev-parse", "HEAD")


def run(pytester, *args):
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


@pytest.mark.slow
def test_forty_commits_one_change_point_at_the_step(pytester, tmp_path, capsys):
    make_repo(pytester)
    store = str(tmp_path / "history.db")
    shas = {}
    first_fail = None
    for i in range(1, 41):
        shas[i] = commit(pytester, i)
        res = run(pytester, f"--httpbench-history={store}", "--httpbench-history-check",
                  "--httpbench-history-metrics=allocs_per_request")
        text = res.stdout.str()
        assert "recorded 1 measurement(s)" in text, text
        if res.ret != 0:
            assert i >= STEP_AT, f"the check failed before the step, at commit {i}:\n{text}"
            assert "regression since" in text and "allocs_per_request" in text, text
            first_fail = first_fail or i
    # the first run that can fail is the third after the step (min_after = 3)
    assert first_fail == STEP_AT + 2, first_fail

    capsys.readouterr()
    rc = cli(["history", "check", "--history", store, "--metric", "allocs_per_request", "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert len(rep["findings"]) == 1, rep
    f = rep["findings"][0]
    at = next(i for i, s in shas.items() if s == f["first_after"]["commit"])
    assert abs(at - STEP_AT) <= 1, (at, f)
    assert f["ci"][0] <= 0.08 <= f["ci"][1], f
    assert f["regression"] and f["runs_before"] + f["runs_after"] == 40
    # the runs carry the commit and the machine
    h = httpbench.history(store)
    runs = h.runs()
    assert [r["commit_sha"] for r in runs] == [shas[i] for i in range(1, 41)]
    assert len({r["machine"] for r in runs}) == 1 and all(r["speed_ns"] for r in runs)


def test_history_check_needs_history(pytester):
    pytester.makepyfile(test_w="def test_x():\n    pass\n")
    res = run(pytester, "--httpbench-history-check")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--httpbench-history-check needs --httpbench-history" in res.stderr.str()


def test_unreadable_store_is_a_usage_error_and_left_alone(pytester, tmp_path):
    pytester.makepyfile(test_w="def test_x(httpbench):\n    httpbench.measure(lambda: 1, n=10)\n")
    bad = tmp_path / "h.db"
    bad.write_bytes(b"not a database at all" * 100)
    res = run(pytester, f"--httpbench-history={bad}")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert str(bad) in res.stderr.str() and "not a readable SQLite history" in res.stderr.str()
    assert bad.read_bytes() == b"not a database at all" * 100


def test_failed_tests_are_not_recorded(pytester, tmp_path):
    pytester.makepyfile(test_w=(
        "def test_ok(httpbench):\n    httpbench.measure(lambda: 1, n=20)\n\n"
        "def test_bad(httpbench):\n    httpbench.measure(lambda: 1, n=20)\n    assert False\n"))
    store = str(tmp_path / "h.db")
    res = run(pytester, f"--httpbench-history={store}")
    assert res.ret == 1
    subjects = {s.subject for s in httpbench.history(store).series()}
    assert subjects == {"test_w.py::test_ok"}


@pytest.mark.slow
def test_xdist_workers_check_and_the_controller_records(pytester, tmp_path):
    pytester.makepyfile(test_w=(
        "import pytest\n\n@pytest.mark.parametrize('i', range(4))\n"
        "def test_m(httpbench, i):\n    httpbench.measure(lambda: [object()] * i, n=20)\n"))
    store = str(tmp_path / "h.db")
    for _ in range(2):
        res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2",
                                            f"--httpbench-history={store}",
                                            "--httpbench-history-check", timeout=120)
        assert res.ret == 0, res.stdout.str()
    h = httpbench.history(store)
    assert len(h.runs()) == 2
    assert {s.subject for s in h.series()} == {f"test_w.py::test_m[{i}]" for i in range(4)}
    assert all(len(s) == 2 for s in h.series())
