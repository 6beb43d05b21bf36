"""The preloadable malloc counter (httpbench._mcount): counts mallocs made by C
code in a process started with LD_PRELOAD, and measure() reports them apart
from Python-heap allocations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import httpbench

CHILD = textwrap.dedent(
    """
    import ctypes, json, sys
    import httpbench
    K = int(sys.argv[1])
    g = ctypes.CDLL(None)          # global lookup: the interposed malloc/free
    libc = ctypes.CDLL("libc.so.6")
    libc.strdup.restype = ctypes.c_void_p
    libc.strdup.argtypes = [ctypes.c_char_p]
    g.free.argtypes = [ctypes.c_void_p]
    s = b"hello"

    def c_library_work():
        # strdup is libc code calling malloc internally: a "C library" allocation.
        for _ in range(K):
            g.free(libc.strdup(s))

    before = httpbench.native_allocs()
    c_library_work()
    after = httpbench.native_allocs()
    r = httpbench.measure(c_library_work, n=500, warmup=5)
    json.dump({
        "direct": after["count"] - before["count"],
        "direct_frees": after["frees"] - before["frees"],
        "calls": r.calls,
        "native_count": r.native_alloc_count,
        "native_bytes": r.native_alloc_bytes,
        "python_allocs": r.allocs,
        "total": r.metadata["native_malloc_total"],
        "scope": r.metadata["native_scope"],
    }, sys.stdout)
    """
)


def run_child(k: int, preload: bool) -> dict:
    env = dict(os.environ)
    if preload:
        env["LD_PRELOAD"] = httpbench.native_alloc_preload_path()
    else:
        env.pop("LD_PRELOAD", None)
    out = subprocess.run([sys.executable, "-c", CHILD, str(k)], capture_output=True, text=True,
                         timeout=60, env=env, cwd="/")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_preload_path_is_a_shared_library() -> None:
    path = httpbench.native_alloc_preload_path()
    assert os.path.isfile(path)
    assert os.path.basename(path).startswith("_mcount") and path.endswith(".so")
    with open(path, "rb") as f:
        assert f.read(4) == b"\x7fELF"


def test_not_preloaded_here() -> None:
    assert httpbench.native_allocs() is None
    r = httpbench.measure(lambda: None, n=100)
    assert r.native_alloc_count is None and r.native_alloc_bytes is None


def test_counts_c_library_mallocs_in_preloaded_process() -> None:
    k = 7
    d = run_child(k, preload=True)
    # Outside measure: at least k mallocs for k strdup calls (ctypes adds a few).
    assert k <= d["direct"] <= k + 5
    assert d["direct_frees"] >= k
    # Under measure: per call k mallocs of 6 bytes attributed to native code.
    calls = d["calls"]
    assert calls == 500
    assert d["native_count"] == k * calls
    assert d["native_bytes"] == 6 * k * calls  # strdup(b"hello"): 6 bytes each
    assert d["total"]["count"] >= d["native_count"]
    assert "native code" in d["scope"]


def test_child_without_preload_reports_none() -> None:
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    code = "import httpbench, json; print(json.dumps(httpbench.native_allocs()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=env, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "null"
