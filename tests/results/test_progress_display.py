"""Progress people read: the terminal line says how long is left; in a notebook without
ipywidgets the bar falls back to text without tqdm's IProgress warning."""

from __future__ import annotations

import importlib.util
import sys
import types
import warnings

import pytest
from httpbench import _loadgen
from httpbench import report as RP


def _line(p: _loadgen.Progress, capsys) -> str:
    show = _loadgen._stderr_progress()
    show(p._replace(completed=0, elapsed_s=0.0))
    show(p)
    return capsys.readouterr().err.split("\r\x1b[2K")[-1]


def test_terminal_line_time_bound(capsys):
    p = _loadgen.Progress(completed=500, ok=490, failed=10, bytes_in=0, elapsed_s=2.5,
                        warming_up=False, total=None, duration_s=10.0)
    line = _line(p, capsys)
    assert "500 requests" in line and "10 failed" in line and "req/s" in line
    assert "2.5s/10s" in line and "8s left" in line


def test_terminal_line_count_bound(capsys):
    p = _loadgen.Progress(completed=250, ok=250, failed=0, bytes_in=0, elapsed_s=1.0,
                        warming_up=False, total=1000, duration_s=None)
    line = _line(p, capsys)
    assert "250/1000 requests (25%)" in line
    assert line.endswith("s left")


@pytest.fixture
def fake_notebook(monkeypatch):
    """An IPython kernel as httpbench and tqdm detect it."""
    pytest.importorskip("tqdm")
    shell = types.SimpleNamespace(config={"IPKernelApp": {}})
    ip = types.ModuleType("IPython")
    ip.get_ipython = lambda: shell  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", ip)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("HTTPBENCH_NO_PROGRESS", raising=False)
    return shell


def test_notebook_without_ipywidgets_has_no_warning(fake_notebook, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ipywidgets" else real(name, *a))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bar = RP.progress_bar("bench")
        assert bar.enabled
        bar(_loadgen.Progress(10, 10, 0, 0, 0.5, False, 100, None))
        bar.close()
    from tqdm.std import tqdm

    assert bar._tqdm is tqdm
    assert "10/100" in capsys.readouterr().err


def test_notebook_with_ipywidgets_uses_the_widget(fake_notebook):
    if importlib.util.find_spec("ipywidgets") is None:
        pytest.skip("ipywidgets not installed (the [notebook] extra)")
    from tqdm.auto import tqdm

    assert RP.progress_bar("bench")._tqdm is tqdm
