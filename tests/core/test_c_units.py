"""Build every C unit test under tests/c with ASan/UBSan and -Werror, run it, and
fail on any C test failure. One pytest test per tests/c/test_*.c file.

The tests build like the installed extension: when it was built without nghttp2
(no HTTP/2 server), so are they (-DHB_NO_NGHTTP2, no -lnghttp2), and the tests
that need nghttp2 or the embedded HTTP/2 server skip; likewise without the HTTP/3
libraries (-DHB_NO_H3, and the tests that need the HTTP/3 server skip)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORE = os.path.join(ROOT, "csrc", "core")
CDIR = os.path.join(ROOT, "tests", "c")
# permessage-deflate links zlib when its header is there (else the core builds without it)
ZLIB = ["-lz"] if os.path.exists("/usr/include/zlib.h") else []
BUILD = os.path.join(CDIR, "build")
CC = os.environ.get("CC") or shutil.which("clang") or shutil.which("gcc") or "cc"
CFLAGS = [
    "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
    "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
]

TESTS = sorted(glob.glob(os.path.join(CDIR, "test_*.c")))
# nghttp2 as a reference peer (test_h2_client, test_h2_hpack_encode) or the embedded HTTP/2 server
NEED_NGHTTP2 = {"test_h2_client", "test_h2_hpack_encode", "test_h2_server", "test_client_h2",
                "test_engine_h2"}

# the embedded HTTP/3 server (ngtcp2, GnuTLS)
NEED_H3 = {"test_h3_server"}
H3_PKGS = ["libngtcp2", "libngtcp2_crypto_gnutls", "gnutls"]

PARAMS = [pytest.param(t, id=os.path.basename(t)[:-2],
                       marks=[pytest.mark.h2_server] if os.path.basename(t)[:-2] in NEED_NGHTTP2
                       else []) for t in TESTS]


def _h3_flags(h3: bool, what: str) -> list[str]:
    """pkg-config's --cflags / --libs for the HTTP/3 libraries (with h3), else the define."""
    if not h3:
        return ["-DHB_NO_H3"] if what == "--cflags" else []
    out = subprocess.run(["pkg-config", what, *H3_PKGS], capture_output=True, text=True,
                         timeout=60)
    if out.returncode == 0:
        return out.stdout.split()
    return [] if what == "--cflags" else ["-lngtcp2_crypto_gnutls", "-lngtcp2", "-lgnutls"]


def _core_sources() -> list[str]:
    """Every core .c file, in the component folders below csrc/core."""
    return sorted(glob.glob(os.path.join(CORE, "**", "*.c"), recursive=True))


_OBJECTS: dict[tuple[bool, bool], list[str]] = {}


def _core_objects(h2: bool, h3: bool) -> list[str]:
    """The core compiled once per session (with these flags), shared by every test's link:
    one compile of the core per test made this file a third of the slow suite's time."""
    if (h2, h3) not in _OBJECTS:
        out = os.path.join(BUILD, "core" + ("" if h2 else "-no-nghttp2") + ("" if h3 else "-no-h3"))
        os.makedirs(out, exist_ok=True)

        def compile_one(c: str) -> str:
            obj = os.path.join(out, os.path.relpath(c, CORE)[:-2].replace(os.sep, "-") + ".o")
            cmd = [CC, *CFLAGS, *([] if h2 else ["-DHB_NO_NGHTTP2"]), *_h3_flags(h3, "--cflags"),
           *([] if ZLIB else ["-DHB_NO_ZLIB"]),
                   "-I", CORE, "-c", c, "-o", obj]
            build = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            assert build.returncode == 0, f"build failed:\n{' '.join(cmd)}\n{build.stderr}"
            return obj

        with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
            _OBJECTS[(h2, h3)] = list(pool.map(compile_one,
                                               _core_sources()))
    return _OBJECTS[(h2, h3)]


@pytest.mark.slow
@pytest.mark.parametrize("src", PARAMS)
def test_c_unit(src: str) -> None:
    if not os.path.isdir(CORE):
        pytest.skip("C sources not present (installed without the source tree)")
    import httpbench

    name = os.path.basename(src)[:-2]
    h2 = httpbench.features()["http2-server"]  # the h2_server mark skipped the rest already
    h3 = httpbench.features()["http3-server"]
    if name in NEED_H3 and not h3:
        from httpbench._features import H3_MISSING

        pytest.skip(H3_MISSING)
    os.makedirs(BUILD, exist_ok=True)
    exe = os.path.join(BUILD, name + ("" if h2 else "-no-nghttp2") + ("" if h3 else "-no-h3"))
    cmd = [CC, *CFLAGS, *([] if h2 else ["-DHB_NO_NGHTTP2"]), *_h3_flags(h3, "--cflags"),
           *([] if ZLIB else ["-DHB_NO_ZLIB"]),
           "-I", CORE, "-I", CDIR, src, *_core_objects(h2, h3), "-o", exe,
           *(["-lnghttp2"] if h2 else []), *_h3_flags(h3, "--libs"),
           *ZLIB, "-lssl", "-lcrypto", "-lpthread", "-lm"]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, f"build failed:\n{' '.join(cmd)}\n{build.stderr}"
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    run = subprocess.run([exe], capture_output=True, text=True, timeout=600, env=env, cwd=CDIR)
    assert run.returncode == 0, f"C tests failed (rc={run.returncode}):\n{run.stdout}\n{run.stderr}"


@pytest.mark.slow
def test_core_links_without_nghttp2(tmp_path) -> None:
    # Every function the core calls exists in a build without nghttp2 (and without the
    # HTTP/3 libraries) too: a function added to h2/hb_h2_server.h or h3server/hb_h3_server.h needs
    # its stand-in in h2/hb_h2_server_none.c / h3server/hb_h3_server_none.c.
    if not os.path.isdir(CORE):
        pytest.skip("C sources not present (installed without the source tree)")
    core_sources = _core_sources()
    cmd = [CC, "-std=c11", "-O0", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE", "-fPIC",
           "-shared", "-DHB_NO_NGHTTP2", "-DHB_NO_H3", "-DHB_NO_ZLIB", "-I", CORE, *core_sources, "-o",
           str(tmp_path / "core.so"), "-Wl,--no-undefined", "-lssl", "-lcrypto", "-lpthread",
           "-lm"]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-4000:]
    nm = subprocess.run(["nm", "-D", "--undefined-only", str(tmp_path / "core.so")],
                        capture_output=True, text=True, timeout=60)
    assert "nghttp2_" not in nm.stdout
    assert "ngtcp2_" not in nm.stdout and "nghttp3_" not in nm.stdout
    assert "gnutls_" not in nm.stdout
