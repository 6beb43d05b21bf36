"""Build the libFuzzer harness of the parser (csrc/fuzz/fuzz_parse.c) and run it
for HTTPBENCH_FUZZ_SECONDS (default 20; .ci/run sets 60). Any crash, sanitizer
report, leak, timeout or contract violation (the harness traps) fails the test.
The seed corpus is copied to a temporary directory so the repo never changes."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ = os.path.join(ROOT, "csrc", "fuzz")
CORE = os.path.join(ROOT, "csrc", "core")
SECONDS = int(os.environ.get("HTTPBENCH_FUZZ_SECONDS", "20"))


@pytest.mark.slow
def test_fuzz_parse(tmp_path):
    src = os.path.join(FUZZ, "fuzz_parse.c")
    if not os.path.exists(src):
        pytest.skip("fuzz sources not present (installed without the source tree)")
    clang = shutil.which("clang")
    if clang is None:
        pytest.skip("clang not installed: libFuzzer harness not built (apt-get install clang)")
    exe = str(tmp_path / "fuzz_parse")
    cmd = [clang, "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
           "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all",
           "-I", CORE, src, os.path.join(CORE, "hb_parse.c"), os.path.join(CORE, "hb_common.c"),
           "-o", exe]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if build.returncode != 0 and "clang_rt.fuzzer" in build.stderr:
        pytest.skip("clang has no libFuzzer runtime (install libclang-rt-<ver>-dev)")
    assert build.returncode == 0, f"fuzzer build failed:\n{' '.join(cmd)}\n{build.stderr}"

    corpus = tmp_path / "corpus"
    shutil.copytree(os.path.join(FUZZ, "corpus"), corpus)
    seeds = len(os.listdir(corpus))
    assert seeds >= 12
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    run = subprocess.run(
        [exe, f"-max_total_time={SECONDS}", "-timeout=10", "-rss_limit_mb=2048",
         "-print_final_stats=1", f"-dict={os.path.join(FUZZ, 'fuzz_parse.dict')}",
         f"-artifact_prefix={artifacts}/", str(corpus)],
        capture_output=True, text=True, timeout=SECONDS + 300,
        env=dict(os.environ, ASAN_OPTIONS="detect_leaks=1",
                 UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"),
    )
    found = sorted(glob.glob(str(artifacts / "*")))
    tail = run.stderr[-4000:]
    assert run.returncode == 0, f"fuzzer failed (rc={run.returncode}), artifacts {found}:\n{tail}"
    assert not found, f"fuzzer left crash/timeout/leak inputs {found}:\n{tail}"
    assert "Done " in run.stderr, tail
