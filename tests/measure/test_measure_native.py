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
import pytest

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


@pytest.mark.slow
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


MIXED_CHILD = textwrap.dedent(
    """
    import ctypes, json
    import httpbench
    api = ctypes.pythonapi
    for f in ("PyMem_Malloc", "PyMem_RawMalloc", "PyObject_Malloc"):
        getattr(api, f).restype = ctypes.c_void_p
        getattr(api, f).argtypes = [ctypes.c_size_t]
    for f in ("PyMem_Free", "PyMem_RawFree", "PyObject_Free"):
        getattr(api, f).argtypes = [ctypes.c_void_p]
    api.PyMem_Realloc.restype = ctypes.c_void_p
    api.PyMem_Realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    g = ctypes.CDLL(None)
    libc = ctypes.CDLL("libc.so.6")
    libc.strdup.restype = ctypes.c_void_p
    libc.strdup.argtypes = [ctypes.c_char_p]
    g.free.argtypes = [ctypes.c_void_p]

    def zero_sized():      # CPython asks malloc for 1 byte for each of these
        api.PyMem_Free(api.PyMem_Malloc(0))
        api.PyMem_RawFree(api.PyMem_RawMalloc(0))
        api.PyObject_Free(api.PyObject_Malloc(0))

    def python_only():     # small (pymalloc), large (RAW fallback), growing realloc
        x = [bytearray(100), bytearray(5000), "a" * 3000, {i: i for i in range(40)}]
        p = api.PyMem_Malloc(100)
        p = api.PyMem_Realloc(p, 2000)
        p = api.PyMem_Realloc(p, 9000)
        api.PyMem_Free(p)
        return x

    def mixed():           # the two above plus 3 C-library mallocs of 6 bytes
        zero_sized()
        python_only()
        for _ in range(3):
            g.free(libc.strdup(b"hello"))

    out = {}
    for fn in (zero_sized, python_only, mixed):
        r = httpbench.measure(fn, n=400, warmup=10)
        out[fn.__name__] = [r.calls, r.native_alloc_count, r.native_alloc_bytes,
                            r.metadata.get("native_alloc_unclamped")]
    print(json.dumps(out))
    """
)


def test_native_count_and_bytes_agree_with_python_allocations() -> None:
    # Python's own allocations - zero-sized ones, which CPython turns into
    # 1-byte mallocs, pymalloc fallbacks and reallocs included - are not
    # native: count AND bytes are exactly those of the C library calls.
    env = dict(os.environ, LD_PRELOAD=httpbench.native_alloc_preload_path())
    out = subprocess.run([sys.executable, "-c", MIXED_CHILD], capture_output=True, text=True,
                         timeout=60, env=env, cwd="/")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["zero_sized"] == [400, 0, 0, None]
    assert d["python_only"] == [400, 0, 0, None]
    assert d["mixed"] == [400, 3 * 400, 6 * 3 * 400, None]
