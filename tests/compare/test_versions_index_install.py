"""Versions side by side from an httpbench installed as a package index leaves it: from a
wheel, with no ``direct_url.json`` (so no source tree or local wheel to find). Environments
for this interpreter get this very installed httpbench (its files, no rebuild); those for
another interpreter ``httpbench==<version>`` from the index; failing both, one line that
names HTTPBENCH_WHEEL."""

from __future__ import annotations

import glob
import os
import pathlib
import subprocess
import sys
import urllib.request

import httpbench
import pytest
from httpbench import _envs


def _pypi_reachable() -> bool:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/urllib3/", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


needs_pypi = pytest.mark.skipif(not _pypi_reachable(),
                                reason="PyPI is unreachable: real releases cannot be installed")


def test_nothing_to_put_into_an_environment_is_one_line_naming_httpbench_wheel(monkeypatch,
                                                                               tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("HTTPBENCH_WHEEL", raising=False)
    monkeypatch.setattr(_envs, "_httpbench_source", lambda: (None, None))
    monkeypatch.setattr(_envs, "_installed_httpbench", lambda: None)
    with pytest.raises(_envs.EnvError) as ei:
        _envs.httpbench_install()
    msg = str(ei.value)
    assert "\n" not in msg and "HTTPBENCH_WHEEL=" in msg and "installed files" in msg
    # another interpreter asks the index for this very version
    monkeypatch.setattr(_envs, "_interp_tag", lambda python=None: python or "cpython-311-x")
    hb = _envs.httpbench_install(python="cpython-399-x")
    assert hb.requirement == f"httpbench=={httpbench.__version__}" and hb.wheel is None


@pytest.fixture(scope="module")
def index_install(wheel, tmp_path_factory) -> pathlib.Path:
    """A fresh venv with the wheel installed and its direct_url.json removed."""
    venv = tmp_path_factory.mktemp("index-install") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                          str(wheel)], capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr
    durls = glob.glob(str(venv / "lib" / "python3.*" / "site-packages" / "httpbench-*.dist-info"
                          / "direct_url.json"))
    assert len(durls) == 1, durls
    os.remove(durls[0])
    return venv


def _compare(venv: pathlib.Path, tmp_path: pathlib.Path, *args: str):
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}  # no HTTPBENCH_WHEEL, nothing inherited
    return subprocess.run([str(venv / "bin" / "httpbench"), "compare", *args, "--no-out"],
                          capture_output=True, text=True, timeout=1500, cwd=tmp_path, env=env)


@pytest.mark.slow
@needs_pypi
def test_two_urllib3_releases_from_an_index_install(index_install, tmp_path):
    p = _compare(index_install, tmp_path, "--clients", "urllib3==1.26.20,urllib3==2.2.3",
                 "--scenarios", "get-150b", "--quick")
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [ln.split("|")[0].strip() for ln in p.stdout.splitlines() if "|" in ln]
    assert "urllib3 1.26.20" in rows and "urllib3 2.2.3" in rows, p.stdout
    # no wheel was built: each environment holds the installed extension, byte for byte
    assert not glob.glob(str(tmp_path / "cache" / "httpbench" / "wheels" / "*" / "*.whl"))
    mine = glob.glob(str(index_install / "lib" / "python3.*" / "site-packages" / "httpbench"
                         / "_core*.so"))
    envs = glob.glob(str(tmp_path / "cache" / "httpbench" / "envs" / "*" / "lib" / "python3.*"
                         / "site-packages" / "httpbench" / "_core*.so"))
    assert len(mine) == 1 and len(envs) == 2, (mine, envs)
    for so in envs:
        assert pathlib.Path(so).read_bytes() == pathlib.Path(mine[0]).read_bytes()


def _other_cpython() -> str | None:
    mine = sys.version_info[:2]
    for p in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3"))):
        v = subprocess.run([p, "-c", "import sys; print(*sys.version_info[:2])"],
                           capture_output=True, text=True, timeout=60)
        got = tuple(int(x) for x in v.stdout.split()) if v.returncode == 0 else ()
        if len(got) == 2 and got >= (3, 10) and got != mine:
            return p
    return None


@pytest.mark.slow
@needs_pypi
def test_another_interpreter_gets_httpbench_from_the_index_or_one_line(index_install, tmp_path):
    other = _other_cpython()
    if other is None:
        pytest.skip("no second CPython >= 3.10 on this machine")
    p = _compare(index_install, tmp_path, "--clients", "urllib3==2.2.3", "--python", other,
                 "--scenarios", "get-150b", "--quick")
    if p.returncode == 0:  # the index has this version: its environment installed it
        assert "urllib3 2.2.3" in p.stdout
        return
    assert p.returncode == 2, p.stderr[-3000:]
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("httpbench compare: cannot make an environment for"), p.stderr[-3000:]
    assert f"httpbench=={httpbench.__version__} is not installable from the package index" in last
    assert "HTTPBENCH_WHEEL=" in last
