"""``compare`` CLI arguments checked before anything runs: client names, the --out directory."""

from __future__ import annotations

import os
import time

import pytest
from httpbench import _compare
from httpbench._compare import cli_main, out_dir_error, unknown_client_error


@pytest.fixture
def no_run(monkeypatch):
    """compare() must not be reached: fail loudly if a worker would start."""
    def boom(*a, **k):
        raise AssertionError("compare() ran although the arguments were invalid")
    monkeypatch.setattr(_compare, "compare", boom)


def test_unknown_client_exits_2_with_suggestion(no_run, capsys):
    assert cli_main(["--clients", "native,reqests", "--no-out", "-q"]) == 2
    err = capsys.readouterr().err
    assert "unknown client 'reqests'" in err
    assert "did you mean 'requests'" in err


def test_unknown_client_without_close_match_lists_known(no_run, capsys):
    assert cli_main(["--clients", "zzzzzz", "--no-out", "-q"]) == 2
    err = capsys.readouterr().err
    assert "unknown client 'zzzzzz'" in err and "did you mean" not in err
    assert "known: native" in err


@pytest.mark.parametrize("name", ["requests", "httpx-async", "urllib3==1.26.20",
                                  "httpx[http2]==0.28.1", "requests@./somewhere",
                                  "mypkg.mod:MyAdapter", "mine"])
def test_known_specs_and_custom_names_pass(name):
    assert unknown_client_error([name], commands=["mine"]) is None


def test_misspelt_versioned_spec_is_caught():
    msg = unknown_client_error(["urlib3==2.2.3"])
    assert msg is not None and "did you mean 'urllib3'" in msg


def test_command_names_pass_the_cli_check(monkeypatch):
    seen = {}

    def fake(**kw):
        seen.update(kw)
        raise ValueError("stop here")
    monkeypatch.setattr(_compare, "compare", fake)
    assert cli_main(["--clients", "wget", "--command", "wget=wget -q -O {out} {url}",
                     "--no-out", "-q"]) == 2
    assert seen["clients"] == ["wget"]


def test_out_unwritable_fails_fast_before_the_run(no_run, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    t0 = time.monotonic()
    assert cli_main(["--clients", "native", "--out", str(blocker / "sub"), "-q"]) == 2
    assert time.monotonic() - t0 < 1.0
    assert "--out" in capsys.readouterr().err
    assert cli_main(["--clients", "native", "--out", str(blocker), "-q"]) == 2
    assert "not a directory" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through directory permissions")
def test_out_read_only_directory(no_run, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert out_dir_error(str(ro / "a" / "b")) is not None
    finally:
        ro.chmod(0o700)


def test_out_ok_paths_leave_nothing_behind(tmp_path):
    assert out_dir_error(str(tmp_path / "new" / "deeper")) is None
    assert out_dir_error(str(tmp_path)) is None
    assert list(tmp_path.iterdir()) == []


def test_read_only_filesystem_is_rejected():
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc")
    assert out_dir_error("/proc/self/httpbench-out") is not None
