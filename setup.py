"""Build the one extension, httpbench._core, from csrc/core (pure C) and csrc/module (bindings)."""

import glob
import os
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def sources(sub: str) -> list[str]:
    return sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, sub, "*.c")))


extra = ["-std=c11", "-O2", "-Wall", "-Wextra", "-D_GNU_SOURCE", "-fvisibility=hidden"]
if os.environ.get("HTTPBENCH_WERROR"):
    extra.append("-Werror")



def have_header(header: str) -> bool:
    """True when the C compiler finds `header` (preprocessor only)."""
    cc = os.environ.get("CC", "cc").split()
    try:
        p = subprocess.run([*cc, "-E", "-x", "c", "-"], input=f"#include <{header}>\n",
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return p.returncode == 0


# Callgrind client requests (header-only, no-ops outside valgrind) bound the
# window of measure(instructions=True); HTTPBENCH_CALLGRIND=0/1 overrides.
_cg = os.environ.get("HTTPBENCH_CALLGRIND")
macros = []
if _cg == "1" or (_cg != "0" and have_header("valgrind/callgrind.h")):
    macros.append(("HB_HAVE_CALLGRIND", "1"))

core = Extension(
    "httpbench._core",
    sources=sources("csrc/core") + sources("csrc/module"),
    include_dirs=["csrc/core", "csrc/module"],
    libraries=["ssl", "crypto", "pthread"],
    extra_compile_args=extra,
    define_macros=macros,
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
