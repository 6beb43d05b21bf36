"""Build the one extension, httpbench._core, from csrc/core (pure C) and csrc/module (bindings)."""

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

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

PACKAGES_HINT = """\
  Debian/Ubuntu: sudo apt-get install build-essential python3-dev libssl-dev
  Fedora/RHEL:   sudo dnf install gcc python3-devel openssl-devel
  Alpine:        sudo apk add build-base python3-dev openssl-dev
or install a prebuilt manylinux wheel (tools/build-wheel makes one)."""


def toolchain_problems(compiler) -> list[str]:
    """What the build needs and this machine lacks, checked before any real compile."""
    cc = (getattr(compiler, "compiler_so", None) or ["cc"])[0]
    if not shutil.which(cc):
        return [f"a C compiler ({cc!r} not found)"]
    missing = []
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        missing.append("the Python headers (Python.h)")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.c")
        with open(src, "w") as f:
            f.write("#include <openssl/ssl.h>\nint main(void) { return 0; }\n")
        try:
            compiler.compile([src], output_dir=tmp)
        except Exception:  # CompileError, or the compiler failing to start
            missing.append("the OpenSSL headers (openssl/ssl.h)")
    return missing


class CheckedBuildExt(build_ext):
    """build_ext that first names the missing packages instead of a compiler traceback."""

    def run(self) -> None:
        from setuptools._distutils.ccompiler import new_compiler
        from setuptools._distutils.sysconfig import customize_compiler

        cc = new_compiler(compiler=self.compiler)
        customize_compiler(cc)
        missing = toolchain_problems(cc)
        if missing:
            sys.exit("httpbench: cannot build the C extension: missing " + "; ".join(missing)
                     + ".\nInstall a C compiler, the Python headers and the OpenSSL headers:\n"
                     + PACKAGES_HINT)
        super().run()


setup(ext_modules=exts, cmdclass={"build_ext": CheckedBuildExt})
