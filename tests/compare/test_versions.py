"""Versions side by side: client specs, per-spec environments, deltas against a baseline.

The slow tests make real environments (uv or venv + pip) in one XDG cache
shared by this module, so the httpbench wheel is built once per session.
"""

from __future__ import annotations

import math
import os
import textwrap
import time
import urllib.request

import httpbench
import pytest
from httpbench._delta import exact_delta, format_delta, ratio_delta
from httpbench._envs import EnvError, ensure_envs, list_envs
from httpbench._specs import ClientSpec, parse_spec, parse_specs, split_specs

# ---------------------------------------------------------------- parsing


def test_plain_name_is_current_env() -> None:
    s = parse_spec("urllib3")
    assert s == ClientSpec("urllib3", "urllib3") and not s.isolated
    assert parse_spec("pkg.mod:Cls").client == "pkg.mod:Cls"


def test_release_and_extras() -> None:
    s = parse_spec("urllib3==1.26.20")
    assert (s.client, s.version, s.kind, s.extras) == ("urllib3", "1.26.20", "release", ())
    s = parse_spec("httpx[http2, brotli]==0.28.1")
    assert (s.client, s.extras, s.version) == ("httpx", ("http2", "brotli"), "0.28.1")
    assert s.isolated


def test_local_path_url_and_wheel(tmp_path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "pyproject.toml").write_text("[project]\nname='x'\n")
    s = parse_spec("requests@./pkg", base_dir=str(tmp_path))
    assert (s.kind, s.source) == ("path", str(tmp_path / "pkg"))
    s = parse_spec("requests@git+https://example.invalid/r.git@main")
    assert (s.kind, s.source) == ("url", "git+https://example.invalid/r.git@main")
    whl = tmp_path / "x-1.0-py3-none-any.whl"
    whl.write_bytes(b"")
    assert parse_spec(f"requests@{whl}").kind == "wheel"


@pytest.mark.parametrize("text, words", [
    ("", "empty"),
    ("urllib3==", "nothing after"),
    ("urllib3==1 2", "not a version"),
    ("urllib3[]==1.0", "bad extras"),
    ("urllib3[a b]==1.0", "bad extras"),
    ("urllib3[http2]", "need a version or a source"),
    ("urllib3>=1.0", "expected NAME"),
    ("urllib3@/nonexistent/dir", "no directory"),
    ("urllib3@/nonexistent/x.whl", "no wheel file"),
])
def test_bad_specs(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_spec(text)


def test_path_without_package(tmp_path) -> None:
    with pytest.raises(ValueError, match="not a Python package"):
        parse_spec(f"requests@{tmp_path}")


def test_split_and_duplicates() -> None:
    assert split_specs("httpx[http2,brotli]==0.28.1, urllib3==2.2.3,requests") == [
        "httpx[http2,brotli]==0.28.1", "urllib3==2.2.3", "requests"]
    with pytest.raises(ValueError, match="twice"):
        parse_specs(["urllib3==2.2.3", "urllib3==2.2.3"])


# ---------------------------------------------------------------- deltas


def test_ratio_delta_detects_a_shift() -> None:
    base = [100.0, 102.0, 98.0, 101.0, 99.0]
    cand = [150.0, 149.0, 153.0, 151.0, 148.0]
    d = ratio_delta(base, cand)
    assert d["ratio"] == pytest.approx(1.5)
    assert d["lo"] <= d["ratio"] <= d["hi"] and d["lo"] > 1.4
    assert d["p"] < 0.001
    assert ratio_delta(base, cand) == d  # fixed seed: reproducible
    same = ratio_delta(base, list(reversed(base)))
    assert same["ratio"] == 1.0 and same["p"] > 0.5
    assert ratio_delta([1.0], [2.0])["p"] is None
    assert math.isnan(ratio_delta([], [1.0])["ratio"])


def test_exact_delta_and_format() -> None:
    d = exact_delta([300.0, 300.0, 301.0], [340.0, 340.0, 340.0])
    assert d["delta"] == 40.0 and d["ratio"] == pytest.approx(340 / 300)
    assert format_delta("exact", d, "/req") == "+40.0/req (+13 %)"
    r = {"ratio": 0.82, "lo": 0.79, "hi": 0.85, "p": 0.004}
    assert format_delta("ratio", r) == "\u221218 % [\u221221, \u221215] p=0.004"


# ---------------------------------------------------------------- environments


def test_unwritable_cache_is_one_clear_error(tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    with pytest.raises(EnvError, match="not writable") as ei:
        ensure_envs([parse_spec("urllib3==2.2.3")])
    assert "\n" not in str(ei.value)


def test_baseline_must_be_a_client() -> None:
    with pytest.raises(ValueError, match="baseline"):
        httpbench.compare(clients=["urllib3==2.2.3", "http.client"], baseline="nope",
                          scenarios=["get-150b"], n=10, repeat=1, plots=False)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One XDG cache for this module's environments (the wheel is built once)."""
    d = tmp_path_factory.mktemp("xdg-cache")
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(d)
    yield d
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


def _pypi_reachable() -> bool:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/urllib3/", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


needs_pypi = pytest.mark.skipif(not _pypi_reachable(),
                                reason="PyPI is unreachable: real releases cannot be installed")

K = 40  # extra allocations per request in version B

ADAPTER = '''
"""A test client: http.client plus a tunable extra cost per request."""
import http.client

from httpbench import Adapter

__version__ = "{version}"
_EXTRA = (0,) * {extra}      # one object() each: exactly {extra} allocations
_SPIN = (0,) * {spin}        # a busy loop on small ints: CPU without allocations


class SlowAdapter(Adapter):
    name = "slowpkg"
    dist = "slowpkg"
    modules = ("slowpkg",)

    def _setup(self):
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def request(self):
        for _ in _EXTRA:
            object()
        for _ in _SPIN:
            x = 0
            while x < 200:
                x += 1
        self.conn.request(self.method, self.path, body=self.body, headers=self.headers)
        r = self.conn.getresponse()
        self.last_body = r.read()
        self.last_status = r.status

    def close(self):
        self.conn.close()
'''


def _checkout(root, version: str, extra: int, spin: int) -> str:
    d = root / f"slowpkg-{version}"
    (d / "slowpkg").mkdir(parents=True, exist_ok=True)
    (d / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "slowpkg"
        version = "{version}"
        """))
    (d / "slowpkg" / "__init__.py").write_text(f'__version__ = "{version}"\n')
    (d / "slowpkg" / "adapter.py").write_text(
        ADAPTER.format(version=version, extra=extra, spin=spin))
    return str(d)


def _run(specs: list[str]) -> httpbench.ResultSet:
    return httpbench.compare(clients=specs, scenarios=["get-150b"], n=300, repeat=5,
                             plots=False, warmup=20)


@pytest.mark.slow
@needs_pypi
def test_local_checkouts_delta_cache_and_reinstall(cache, tmp_path) -> None:
    a = _checkout(tmp_path, "1.0", 0, 0)
    b = _checkout(tmp_path, "2.0", K, 60)  # CPU cost well above round-to-round noise
    specs = [f"slowpkg.adapter:SlowAdapter@{a}", f"slowpkg.adapter:SlowAdapter@{b}"]
    rs = _run(specs)
    v = rs.metadata["versions"]
    assert rs.clients == ["slowpkg 1.0", "slowpkg 2.0"] and v["baseline"] == "slowpkg 1.0"
    assert [s["env_created"] for s in v["specs"].values()] == [True, True]
    d = v["deltas"]["get-150b"]["slowpkg 2.0"]
    cpu = d["cpu_ns_per_request"]
    assert cpu["ratio"] > 1.1 and cpu["lo"] > 1.0 and cpu["p"] < 0.05
    assert round(d["allocs_per_request"]["delta"]) == K
    from httpbench.report import format_tables

    text = format_tables(rs)
    assert "slowpkg 2.0 vs slowpkg 1.0: CPU +" in text and f"allocs +{K}" in text

    # a second run reuses both environments
    t0 = time.monotonic()
    rs2 = _run(specs)
    assert [s["env_created"] for s in rs2.metadata["versions"]["specs"].values()] == [False, False]
    warm = sum(s["env_seconds"] for s in rs2.metadata["versions"]["specs"].values())
    cold = sum(s["env_seconds"] for s in v["specs"].values())
    assert warm < cold, (warm, cold)
    assert time.monotonic() - t0 > 0

    # a changed checkout is re-installed (and only that one)
    _checkout(tmp_path, "2.0", K + 10, 60)
    rs3 = _run(specs)
    s3 = rs3.metadata["versions"]
    assert [s["env_created"] for s in s3["specs"].values()] == [False, True]
    assert round(s3["deltas"]["get-150b"]["slowpkg 2.0"]["allocs_per_request"]["delta"]) == K + 10
    assert {e["spec"] for e in list_envs()} >= set(specs)


@pytest.mark.slow
@needs_pypi
def test_release_that_does_not_exist(cache) -> None:
    progress: list[str] = []
    with pytest.raises(ValueError, match=r"urllib3==0\.0\.0") as ei:
        httpbench.compare(clients=["urllib3==0.0.0", "http.client"], scenarios=["get-150b"],
                          n=10, repeat=1, plots=False, progress=progress.append)
    assert "\n" not in str(ei.value)
    assert not any("#1" in p for p in progress)  # nothing was measured
    assert not [e for e in list_envs() if e["spec"] == "urllib3==0.0.0"]
    envs = os.path.join(str(cache), "httpbench", "envs")
    assert not [n for n in os.listdir(envs) if n.startswith(".tmp-")]


@pytest.mark.slow
@needs_pypi
def test_two_urllib3_releases_interleaved(cache) -> None:
    progress: list[str] = []
    rs = httpbench.compare(clients=["urllib3==1.26.20", "urllib3==2.2.3", "http.client"],
                           scenarios=["get-150b"], n=300, repeat=2, plots=False,
                           progress=progress.append)
    assert rs.clients == ["urllib3 1.26.20", "urllib3 2.2.3", "http.client"]
    for label, ver in (("urllib3 1.26.20", "1.26.20"), ("urllib3 2.2.3", "2.2.3")):
        for r in rs.repeats(label, "get-150b"):
            assert r.metadata["client_version"] == ver
            assert r.metadata["worker"]["loaded_versions"]["urllib3"] == ver
    rounds = [p.split()[2] for p in progress if p.startswith("[") and "] get-150b" in p]
    assert rounds == ["urllib3==1.26.20", "urllib3==2.2.3", "http.client"] * 2  # interleaved
    d = rs.metadata["versions"]["deltas"]["get-150b"]
    assert set(d) == {"urllib3 2.2.3", "http.client"}
    assert d["urllib3 2.2.3"]["allocs_per_request"]["delta"] != 0  # the releases allocate differently


CRASH = '''
import os

from slowpkg.adapter import SlowAdapter

_seen = 0


class CrashAdapter(SlowAdapter):
    """Exits the worker process (no exception, no answer) after {after} requests."""

    def request(self):
        global _seen
        _seen += 1
        if _seen > {after}:
            os._exit(3)
        super().request()
'''


@pytest.mark.slow
@needs_pypi
def test_worker_crash_in_one_env(cache, tmp_path) -> None:
    ok = _checkout(tmp_path, "1.0", 0, 0)
    early = _checkout(tmp_path, "3.0", 0, 0)  # dies in its first request (the warm-up)
    late = _checkout(tmp_path, "4.0", 0, 0)  # dies during its second round
    (tmp_path / "slowpkg-3.0" / "slowpkg" / "crash.py").write_text(CRASH.format(after=0))
    (tmp_path / "slowpkg-4.0" / "slowpkg" / "crash.py").write_text(CRASH.format(after=200))
    specs = [f"slowpkg.adapter:SlowAdapter@{ok}", f"slowpkg.crash:CrashAdapter@{early}",
             f"slowpkg.crash:CrashAdapter@{late}"]
    rs = httpbench.compare(clients=specs, scenarios=["get-150b"], n=150, repeat=3,
                           plots=False, warmup=5)
    assert len(rs.repeats("slowpkg 1.0", "get-150b")) == 3  # the run went on
    crashed = {n.client: n.message for n in rs.notes if n.kind == "worker-crashed"}
    assert set(crashed) == {"slowpkg 3.0", "slowpkg 4.0"}, rs.notes
    assert all("exited with code 3" in m for m in crashed.values())
    assert rs.repeats("slowpkg 3.0", "get-150b") == []
    assert 1 <= len(rs.repeats("slowpkg 4.0", "get-150b")) < 3
    from httpbench.report import format_tables

    text = format_tables(rs)
    assert "slowpkg 3.0: not compared (worker-crashed: " in text
    assert "slowpkg 4.0 vs slowpkg 1.0: CPU " in text  # its rounds before the crash count
    assert "[worker-crashed] slowpkg 4.0/get-150b" in text


def test_pythons_need_versioned_specs_and_real_interpreters(tmp_path) -> None:
    with pytest.raises(ValueError, match="versioned client specs"):
        httpbench.compare(clients=["http.client"], pythons=["python3"], scenarios=["get-150b"],
                          n=10, repeat=1, plots=False)
    with pytest.raises(ValueError, match="no such executable"):
        httpbench.compare(clients=["urllib3==2.2.3"], pythons=[str(tmp_path / "nope")],
                          scenarios=["get-150b"], n=10, repeat=1, plots=False)
    from httpbench._compare import cli_main

    assert cli_main(["--clients", "urllib3==2.2.3", "--python", str(tmp_path / "nope"),
                     "--no-out", "-q"]) == 2


def _interpreters() -> list[str]:
    import shutil
    import sys

    found = [getattr(sys, "_base_executable", None) or sys.executable,
             "/usr/bin/python3", shutil.which("python3") or ""]
    out: dict[str, str] = {}
    for p in found:
        if p and os.path.isfile(p):
            out.setdefault(os.path.realpath(p), p)
    return list(out.values())[:2]


@pytest.mark.slow
@needs_pypi
def test_python_as_a_second_dimension(cache) -> None:
    import subprocess

    pys = _interpreters()
    vers = [subprocess.run([p, "-c", "import platform; print(platform.python_version())"],
                           capture_output=True, text=True, check=True).stdout.strip()
            for p in pys]
    rs = httpbench.compare(clients=["urllib3==2.2.3", "http.client"], pythons=pys,
                           baseline="urllib3==2.2.3", scenarios=["get-150b"], n=100, repeat=2,
                           plots=False)
    v = rs.metadata["versions"]
    iso = [label for label, s in v["specs"].items() if s["python"]]
    assert len(iso) == len(pys) and v["baseline"] == iso[0]  # the spec's first interpreter
    assert rs.clients == [*iso, "http.client"]
    for label, py, ver in zip(iso, pys, vers, strict=True):
        assert v["specs"][label]["python"] == os.path.abspath(py)
        for r in rs.repeats(label, "get-150b"):
            assert r.metadata["worker"]["python"] == ver
            assert r.metadata["worker"]["loaded_versions"]["urllib3"] == "2.2.3"
    if len(set(vers)) == len(vers):
        assert iso == [f"urllib3 2.2.3 (python {x})" for x in vers]
    assert set(v["deltas"]["get-150b"]) == {*iso[1:], "http.client"}
