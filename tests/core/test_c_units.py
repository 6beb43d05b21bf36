"""Build every C unit test under tests/c with ASan/UBSan and -Werror, run it, and
fail on any C test failure. One pytest test per tests/c/test_*.c file."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORE = os.path.join(ROOT, "csrc", "core")
CDIR = os.path.join(ROOT, "tests", "c")
BUILD = os.path.join(CDIR, "build")
CC = os.environ.get("CC") or shutil.which("clang") or shutil.which("gcc") or "cc"
CFLAGS = [
    "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
    "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
]

TESTS = sorted(glob.glob(os.path.join(CDIR, "test_*.c")))


@pytest.mark.slow
@pytest.mark.parametrize("src", TESTS, ids=[os.path.basename(t)[:-2] for t in TESTS])
def test_c_unit(src: str) -> None:
    if not os.path.isdir(CORE):
        pytest.skip("C sources not present (installed without the source tree)")
    os.makedirs(BUILD, exist_ok=True)
    exe = os.path.join(BUILD, os.path.basename(src)[:-2])
    core_sources = sorted(glob.glob(os.path.join(CORE, "*.c")))
    cmd = [CC, *CFLAGS, "-I", CORE, "-I", CDIR, src, *core_sources, "-o", exe,
           "-lnghttp2", "-lssl", "-lcrypto", "-lpthread", "-lm"]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, f"build failed:\n{' '.join(cmd)}\n{build.stderr}"
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    run = subprocess.run([exe], capture_output=True, text=True, timeout=600, env=env, cwd=CDIR)
    assert run.returncode == 0, f"C tests failed (rc={run.returncode}):\n{run.stdout}\n{run.stderr}"
