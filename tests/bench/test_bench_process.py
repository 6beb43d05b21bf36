"""bench() and the CLI in subprocesses: no heap allocation per request in steady
state (a malloc-counting LD_PRELOAD shim), Ctrl-C returns a partial result,
CLI exit codes and messages."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import httpbench
import pytest

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Counts heap allocations made by threads other than the main thread (the
 * load generator's threads), split into those OpenSSL makes (the caller is
 * libcrypto's CRYPTO_malloc family) and all others; then delegates. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static _Atomic long other, openssl;
static __thread int kind;  /* 0 unknown, 1 main, 2 other */
static __thread int inside; /* dladdr may allocate: do not recurse */

#define NC 512
static uintptr_t cache_addr[NC];
static char cache_ssl[NC];

static int from_openssl(void *caller)
{
    uintptr_t a = (uintptr_t)caller;
    unsigned h = (unsigned)((a >> 4) % NC);
    if (cache_addr[h] == a) return cache_ssl[h];
    Dl_info di;
    int r = 0;
    if (dladdr(caller, &di) && di.dli_fname)
        r = strstr(di.dli_fname, "libcrypto") != NULL || strstr(di.dli_fname, "libssl") != NULL;
    cache_ssl[h] = (char)r;
    cache_addr[h] = a;
    return r;
}

static void count(void *caller)
{
    if (!kind) kind = syscall(SYS_gettid) == getpid() ? 1 : 2;
    if (kind != 2 || inside) return;
    inside = 1;
    if (from_openssl(caller))
        atomic_fetch_add_explicit(&openssl, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&other, 1, memory_order_relaxed);
    inside = 0;
}
#define CALLER __builtin_return_address(0)
void *malloc(size_t n) { count(CALLER); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { count(CALLER); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { count(CALLER); return __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { count(CALLER); return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { count(CALLER); return __libc_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n)
{
    count(CALLER);
    void *p = __libc_memalign(a, n);
    if (!p) return 12;
    *out = p;
    return 0;
}
long hb_shim_other_allocs(void) { return atomic_load(&other); }
long hb_shim_openssl_allocs(void) { return atomic_load(&openssl); }
"""

RUNNER = textwrap.dedent(
    """
    import ctypes, json, sys
    import httpbench
    shim = ctypes.CDLL(None)
    url, n, conc, tls_ca = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    kw = {"ca_file": tls_ca} if tls_ca != "-" else {}
    r = httpbench.bench(url, n=n, concurrency=conc, threads=2, **kw)
    print(json.dumps({"ok": r.successes, "errors": r.errors,
                      "allocs": shim.hb_shim_other_allocs(),
                      "openssl": shim.hb_shim_openssl_allocs()}))
    """
)


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("shim")
    src = d / "shim.c"
    src.write_text(SHIM)
    so = d / "libshim.so"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(so), str(src)], check=True,
                   capture_output=True, timeout=60)
    return str(so)


def _run_counted(shim: str, url: str, n: int, ca: str = "-") -> dict:
    env = dict(os.environ, LD_PRELOAD=shim)
    p = subprocess.run([sys.executable, "-c", RUNNER, url, str(n), "4", ca], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_no_allocation_per_request_plain(shim, server):
    short = _run_counted(shim, server.url + "/bytes/200", 500)
    long = _run_counted(shim, server.url + "/bytes/200", 20000)
    assert short["ok"] == 500 and long["ok"] == 20000
    assert long["allocs"] == short["allocs"], (short, long)


@pytest.mark.slow
def test_no_allocation_per_request_tls(shim, tls_server):
    short = _run_counted(shim, tls_server.url + "/bytes/200", 300, tls_server.ca_file)
    long = _run_counted(shim, tls_server.url + "/bytes/200", 6000, tls_server.ca_file)
    assert short["ok"] == 300 and long["ok"] == 6000
    # httpbench's own code: nothing per request (per connection only)
    assert long["allocs"] == short["allocs"], (short, long)
    # OpenSSL 3.0's record layer allocates a small WPACKET_SUB per record
    # (2 per request with TLS 1.2, 4 with TLS 1.3); it is counted separately
    # and bounded, so a regression in how we drive it would still show.
    per_request = (long["openssl"] - short["openssl"]) / (6000 - 300)
    assert per_request <= 4.5, (short, long)


INTERRUPT = textwrap.dedent(
    """
    import json, sys
    import httpbench
    print("start", flush=True)
    r = httpbench.bench(sys.argv[1], duration=60, concurrency=2)
    print(json.dumps({"interrupted": r.interrupted, "ok": r.successes,
                      "duration_ns": r.duration_ns, "inflight": r.in_flight_at_stop}))
    """
)


def _wait_requests(server, base: int, deadline_s: float = 20) -> None:
    end = time.monotonic() + deadline_s
    while server.stats()["requests"] < base + 50 and time.monotonic() < end:
        time.sleep(0.02)


def test_ctrl_c_returns_partial_result(server):
    base = server.stats()["requests"]
    p = subprocess.Popen([sys.executable, "-c", INTERRUPT, server.url + "/"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "start"
        _wait_requests(server, base)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    d = json.loads(out.strip().splitlines()[-1])
    assert d["interrupted"] is True and d["ok"] > 0
    assert d["duration_ns"] < 30e9
    assert took < 10  # generous: the engine stops within ~100 ms of the signal


def test_cli_ctrl_c_prints_report(server):
    base = server.stats()["requests"]
    p = subprocess.Popen([sys.executable, "-m", "httpbench", server.url + "/", "-d", "60s",
                          "-c", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_requests(server, base)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "(INTERRUPTED)" in out and "Complete requests:" in out
    assert "Traceback" not in err


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "httpbench", *args], capture_output=True,
                          text=True, timeout=60)


def test_cli_report_and_json(server, tmp_path):
    j = tmp_path / "out.json"
    p = _cli(server.url + "/bytes/150", "-n", "200", "-c", "4", "-t", "2", "-H", "X-A: b",
             "--latency", "--json", str(j))
    assert p.returncode == 0, p.stderr
    assert "Complete requests:      200" in p.stdout
    assert "Document Length:        150 bytes" in p.stdout
    assert "Latency distribution" in p.stdout
    r = httpbench.load(j)
    assert r.successes == 200 and r.config.concurrency == 4


def test_cli_post_file(server, tmp_path):
    f = tmp_path / "b.txt"
    f.write_bytes(b"z" * 1234)
    before = server.stats()["body_bytes_in"]
    p = _cli(server.url + "/sink", "-n", "10", "-p", str(f), "-T", "text/plain")
    assert p.returncode == 0, p.stderr
    assert server.stats()["body_bytes_in"] - before == 12340


@pytest.mark.parametrize(
    "args,msg",
    [(["ftp://x/"], "scheme"), (["http://127.0.0.1:9/", "-c", "0"], "-c"),
     (["http://127.0.0.1:9/", "-n", "5", "-d", "1s"], "not both"),
     (["http://127.0.0.1:9/", "-d", "soon"], "-d"), (["http://127.0.0.1:9/", "--bogus"], "bogus"),
     (["http://127.0.0.1:9/", "-H", "novalue"], "Name: value"),
     (["http://127.0.0.1:9/", "-p", "/nonexistent/file"], "no such file")],
)
def test_cli_usage_errors(args, msg):
    p = _cli(*args)
    assert p.returncode == 2
    assert msg in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_cli_unreachable():
    p = _cli("http://127.0.0.1:9/", "-n", "3")
    assert p.returncode == 1
    assert "every request failed" in p.stderr and "Traceback" not in p.stderr
    assert "Failed connections:     3" in p.stdout
    p = _cli("http://no-such-host.invalid/", "-n", "1")
    assert p.returncode == 1 and "cannot resolve" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_cli_progress_line_on_a_tty(server):
    from _raw import run_with_tty_stderr

    p, err = run_with_tty_stderr([sys.executable, "-m", "httpbench", server.url + "/", "-d",
                                  "0.8s"])
    assert p.returncode == 0
    assert b"req/s" in err and b"failed" in err  # the \r-rewritten progress line
    assert "Complete requests:" in p.stdout
    # not a TTY: no progress line at all
    q = _cli(server.url + "/", "-d", "0.5s")
    assert q.returncode == 0 and "req/s" not in q.stderr
