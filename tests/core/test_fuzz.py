"""Build the libFuzzer harnesses (csrc/fuzz/fuzz_parse.c: the parser;
csrc/fuzz/fuzz_request.c: URL splitting and request-head building; csrc/fuzz/fuzz_h2_server.c:
the embedded server's HTTP/2 input path; csrc/fuzz/fuzz_h2_hpack.c: the HPACK decoder and
encoder; csrc/fuzz/fuzz_h2_client.c: the HTTP/2 client session's input path;
csrc/fuzz/fuzz_h3_server.c: the embedded server's HTTP/3 datagram input; csrc/fuzz/fuzz_h3_frame.c:
the HTTP/3 frame reader; csrc/fuzz/fuzz_qpack.c: the QPACK decoder and encoder; csrc/fuzz/fuzz_ws.c:
the WebSocket frame reader; csrc/fuzz/fuzz_sse.c: the server-sent events scanner;
csrc/fuzz/fuzz_sse_parse.c: the event stream parser) and run each
for HTTPBENCH_FUZZ_SECONDS (default 20 per harness, as in .ci/run). Any crash, sanitizer
report, leak, timeout or contract violation (the harness traps) fails the test.
Seed corpora are copied to a temporary directory so the repo never changes."""

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


def _fuzz(tmp_path, name: str, core: list[str], corpus_dir: str, min_seeds: int,
          dict_file: str | None, flags: tuple[str, ...] = (), libs: tuple[str, ...] = ()) -> None:
    src = os.path.join(FUZZ, f"{name}.c")
    if not os.path.exists(src):
        pytest.skip("fuzz sources not present (installed without the source tree)")
    clang = shutil.which("clang")
    if clang is None:
        pytest.skip("clang not installed: libFuzzer harness not built (apt-get install clang)")
    exe = str(tmp_path / name)
    cmd = [clang, "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
           "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all",
           "-I", CORE, src, *(os.path.join(CORE, c) for c in core), "-o", exe, *libs]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if build.returncode != 0 and "clang_rt.fuzzer" in build.stderr:
        pytest.skip("clang has no libFuzzer runtime (install libclang-rt-<ver>-dev)")
    assert build.returncode == 0, f"fuzzer build failed:\n{' '.join(cmd)}\n{build.stderr}"

    corpus = tmp_path / "corpus"
    shutil.copytree(os.path.join(FUZZ, corpus_dir), corpus)
    seeds = len(os.listdir(corpus))
    assert seeds >= min_seeds
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    run = subprocess.run(
        [exe, f"-max_total_time={SECONDS}", "-timeout=10", "-rss_limit_mb=2048",
         "-print_final_stats=1", *flags,
         *([f"-dict={os.path.join(FUZZ, dict_file)}"] if dict_file else []),
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


@pytest.mark.slow
def test_fuzz_parse(tmp_path):
    # max_len above the 64 KiB head and trailer bounds, so the limit paths are reachable
    _fuzz(tmp_path, "fuzz_parse", ["http/hb_parse.c", "base/hb_common.c"], "corpus", 12,
          "fuzz_parse.dict", ("-max_len=70000",))


@pytest.mark.slow
def test_fuzz_request(tmp_path):
    _fuzz(tmp_path, "fuzz_request", ["http/hb_request.c", "http/hb_parse.c", "base/hb_common.c"],
          "corpus_request", 8, None)


@pytest.mark.slow
@pytest.mark.h2_server
def test_fuzz_h2_server(tmp_path):
    _fuzz(tmp_path, "fuzz_h2_server", ["h2/hb_h2_server.c", "h2/hb_h2_server_stream.c",
                                       "h2/hb_h2_server_events.c", "http/hb_sse.c",
                                       "http/hb_route.c", "base/hb_content.c", "base/hb_common.c",
                                       "http/hb_parse.c"],
          "corpus_h2_server", 12, None, ("-max_len=70000",), ("-lnghttp2",))


@pytest.mark.slow
def test_fuzz_h2_client(tmp_path):
    _fuzz(tmp_path, "fuzz_h2_client", ["h2/hb_h2_client.c", "h2/hb_h2_client_read.c",
                                       "h2/hb_h2_hpack.c", "http/hb_huff.c", "net/hb_sock.c",
                                       "net/hb_tls.c",
                                       "base/hb_common.c", "http/hb_parse.c"],
          "corpus_h2_client", 12, None, ("-max_len=70000",), ("-lssl", "-lcrypto"))


@pytest.mark.slow
@pytest.mark.h2_server  # nghttp2's inflater is the reference
def test_fuzz_h2_hpack(tmp_path):
    _fuzz(tmp_path, "fuzz_h2_hpack", ["h2/hb_h2_hpack.c", "http/hb_huff.c", "base/hb_common.c",
                                      "http/hb_parse.c"],
          "corpus_h2_hpack", 8, None, ("-max_len=70000",), ("-lnghttp2",))


H3_CODEC = ["h3codec/hb_h3_frame.c", "h3codec/hb_qpack.c", "http/hb_huff.c", "base/hb_common.c"]


@pytest.mark.slow
def test_fuzz_h3_frame(tmp_path):
    _fuzz(tmp_path, "fuzz_h3_frame", H3_CODEC, "corpus_h3_frame", 8, None, ("-max_len=8192",))


@pytest.mark.slow
def test_fuzz_qpack(tmp_path):
    _fuzz(tmp_path, "fuzz_qpack", H3_CODEC, "corpus_qpack", 8, None, ("-max_len=8192",))


@pytest.mark.slow
def test_fuzz_h3_server(tmp_path):
    import httpbench

    if not httpbench.features()["http3-server"]:
        from httpbench._features import H3_MISSING

        pytest.skip(H3_MISSING)
    libs = subprocess.run(["pkg-config", "--libs", "libngtcp2_crypto_gnutls", "libngtcp2",
                           "gnutls"], capture_output=True, text=True, timeout=60)
    _fuzz(tmp_path, "fuzz_h3_server", ["h3server/hb_h3_server.c", "h3server/hb_h3_server_conn.c",
                                       "h3server/hb_h3_server_h3.c",
                                       "h3server/hb_h3_server_http.c", "h3server/hb_h3_server_mem.c",
                                       "h3/hb_h3_client_mem.c", "h3codec/hb_h3_frame.c",
                                       "h3codec/hb_qpack.c", "http/hb_huff.c",
                                       "http/hb_route.c", "http/hb_sse.c",
                                       "base/hb_content.c", "base/hb_common.c", "http/hb_parse.c",
                                       "net/hb_tls.c"],
          "corpus_h3_server", 12, None, ("-max_len=8192",),
          (*libs.stdout.split(), "-lssl", "-lcrypto"))


@pytest.mark.slow
def test_fuzz_ws(tmp_path):
    _fuzz(tmp_path, "fuzz_ws", ["ws/hb_ws.c", "base/hb_common.c", "http/hb_parse.c"], "corpus_ws", 12, None,
          ("-max_len=70000",), ("-lcrypto",))


@pytest.mark.slow
def test_fuzz_sse(tmp_path):
    _fuzz(tmp_path, "fuzz_sse", ["http/hb_sse.c"], "corpus_sse", 8, None, ("-max_len=70000",))


@pytest.mark.slow
def test_fuzz_sse_parse(tmp_path):
    _fuzz(tmp_path, "fuzz_sse_parse", ["http/hb_sse_parse.c", "http/hb_sse.c"], "corpus_sse", 8,
          None, ("-max_len=70000",))
