"""Build the one extension, httpbench._core, from csrc/core (pure C) and csrc/module (bindings)."""

import glob
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def sources(sub: str) -> list[str]:
    return sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, sub, "*.c")))


extra = ["-std=c11", "-O2", "-Wall", "-Wextra", "-D_GNU_SOURCE", "-fvisibility=hidden"]
if os.environ.get("HTTPBENCH_WERROR"):
    extra.append("-Werror")

core = Extension(
    "httpbench._core",
    sources=sources("csrc/core") + sources("csrc/module"),
    include_dirs=["csrc/core", "csrc/module"],
    libraries=["ssl", "crypto", "pthread"],
    extra_compile_args=extra,
)

# A preloadable malloc counter (no Python), shipped inside the package; see measure().
mcount = Extension(
    "httpbench._mcount",
    sources=sources("csrc/preload"),
    extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-D_GNU_SOURCE"],
    libraries=["dl", "pthread"],
)

exts = [core]
if sources("csrc/preload"):
    exts.append(mcount)

setup(ext_modules=exts)
