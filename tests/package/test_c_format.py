"""Every C file follows .clang-format (clang-format --dry-run -Werror)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_c_sources_are_clang_formatted():
    exe = shutil.which("clang-format")
    if exe is None:
        pytest.skip("clang-format not installed (apt-get install clang-format)")
    files = sorted(str(p) for pattern in ("csrc/**/*.[ch]", "tests/c/*.[ch]", "benchmarks/*.[ch]")
                   for p in ROOT.glob(pattern))
    if not files:
        pytest.skip("C sources not present (installed without the source tree)")
    proc = subprocess.run([exe, "--dry-run", "-Werror", *files], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, ("not clang-formatted (run clang-format -i on them):\n"
                                  + proc.stderr[-3000:])
