"""Build the one extension, httpbench._core, from csrc/core/** (pure C, folders by component)
and csrc/module (bindings)."""

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


def sources(sub: str, pattern: str = "*.c") -> list[str]:
    """The files matching pattern below csrc/<sub> (pattern may hold **/)."""
    return sorted(os.path.relpath(p, HERE)
                  for p in glob.glob(os.path.join(HERE, sub, pattern), recursive=True))


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

def pkg_config(pkg: str) -> tuple[list[str], list[str], list[str]] | None:
    """(include dirs, library dirs, libraries) of `pkg` from pkg-config; None when absent."""
    try:
        p = subprocess.run(["pkg-config", "--cflags", "--libs", pkg], capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if p.returncode != 0:
        return None
    flags = p.stdout.split()
    return ([f[2:] for f in flags if f.startswith("-I")],
            [f[2:] for f in flags if f.startswith("-L")],
            [f[2:] for f in flags if f.startswith("-l")])


# The embedded server's HTTP/2 side is nghttp2's (found by pkg-config, with a plain
# -lnghttp2 fallback); everything else, the HTTP/2 client included, is our own code.
# HTTPBENCH_NGHTTP2=0 builds without it, =1 requires it, unset: used when its headers are found.
NGHTTP2 = pkg_config("libnghttp2") or ([], [], ["nghttp2"])
NGHTTP2_SWITCH = os.environ.get("HTTPBENCH_NGHTTP2", "").strip()
NGHTTP2_HINT = ("install libnghttp2-dev (or the distribution's nghttp2 headers: "
                "libnghttp2-devel, nghttp2-dev) and reinstall")

# The HTTP/3 side (embedded server and load generator) is ngtcp2 over GnuTLS (OpenSSL 3.0
# has no QUIC TLS API), with our own HTTP/3 framing and QPACK (csrc/core/h3codec).
# HTTPBENCH_H3=0 builds without it, =1 requires it, unset: used when all three are found.
H3_PKGS = ("libngtcp2", "libngtcp2_crypto_gnutls", "gnutls")
H3 = pkg_config(" ".join(H3_PKGS)) or ([], [], ["ngtcp2", "ngtcp2_crypto_gnutls", "gnutls"])
H3_HEADERS = ("ngtcp2/ngtcp2.h", "ngtcp2/ngtcp2_crypto_gnutls.h", "gnutls/gnutls.h")
H3_SWITCH = os.environ.get("HTTPBENCH_H3", "").strip()
H3_HINT = ("install libngtcp2-dev libngtcp2-crypto-gnutls-dev libgnutls28-dev "
           "(Fedora: libngtcp2-devel gnutls-devel) and reinstall")

core = Extension(
    "httpbench._core",
    # the core in folders by component (csrc/core/<folder>/hb_*.c), included as
    # "folder/hb_x.h" relative to csrc/core
    sources=sources("csrc/core", "**/*.c") + sources("csrc/module"),
    include_dirs=["csrc/core", "csrc/module"],
    # a changed header rebuilds everything: setuptools tracks no header dependencies, and an
    # object compiled against an old struct layout would be silently reused
    depends=sources("csrc/core", "**/*.h") + sources("csrc/module", "*.h"),
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
  Debian/Ubuntu: sudo apt-get install build-essential python3-dev libssl-dev pkg-config
  Fedora/RHEL:   sudo dnf install gcc python3-devel openssl-devel pkgconf
  Alpine:        sudo apk add build-base python3-dev openssl-dev pkgconf
(plus libnghttp2-dev / libnghttp2-devel / nghttp2-dev for the embedded server's HTTP/2 side,
and libngtcp2-dev libngtcp2-crypto-gnutls-dev libgnutls28-dev for HTTP/3),
or install a prebuilt manylinux wheel (tools/build-wheel makes one)."""


def compiles(compiler, header: str, include_dirs: list[str]) -> bool:
    """True when a file including `header` compiles with the build's own compiler and flags."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.c")
        with open(src, "w") as f:
            f.write(f"#include <{header}>\nint main(void) {{ return 0; }}\n")
        try:
            compiler.compile([src], output_dir=tmp, include_dirs=include_dirs)
        except Exception:  # CompileError, or the compiler failing to start
            return False
    return True


def toolchain_problems(compiler) -> list[str]:
    """What the build needs and this machine lacks, checked before any real compile."""
    cc = (getattr(compiler, "compiler_so", None) or ["cc"])[0]
    if not shutil.which(cc):
        return [f"a C compiler ({cc!r} not found)"]
    missing = []
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        missing.append("the Python headers (Python.h)")
    if not compiles(compiler, "openssl/ssl.h", []):
        missing.append("the OpenSSL headers (openssl/ssl.h)")
    if NGHTTP2_SWITCH == "1" and not compiles(compiler, "nghttp2/nghttp2.h", NGHTTP2[0]):
        missing.append("the nghttp2 headers (nghttp2/nghttp2.h, package libnghttp2-dev), "
                       "which HTTPBENCH_NGHTTP2=1 requires")
    if H3_SWITCH == "1":
        absent = [h for h in H3_HEADERS if not compiles(compiler, h, H3[0])]
        if absent:
            missing.append(f"the HTTP/3 headers ({', '.join(absent)}), which HTTPBENCH_H3=1 "
                           "requires: " + H3_HINT)
    return missing


def use_nghttp2(compiler) -> str | None:
    """None when the HTTP/2 server is built with nghttp2, else why it is left out."""
    if NGHTTP2_SWITCH == "0":
        return "HTTPBENCH_NGHTTP2=0"
    if NGHTTP2_SWITCH not in ("", "1"):
        sys.exit(f"httpbench: HTTPBENCH_NGHTTP2 must be 0 or 1, not {NGHTTP2_SWITCH!r}")
    if compiles(compiler, "nghttp2/nghttp2.h", NGHTTP2[0]):
        return None
    return "the nghttp2 headers (nghttp2/nghttp2.h) were not found"


def use_h3(compiler) -> str | None:
    """None when HTTP/3 is built (ngtcp2, GnuTLS), else why it is left out."""
    if H3_SWITCH == "0":
        return "HTTPBENCH_H3=0"
    if H3_SWITCH not in ("", "1"):
        sys.exit(f"httpbench: HTTPBENCH_H3 must be 0 or 1, not {H3_SWITCH!r}")
    absent = [h for h in H3_HEADERS if not compiles(compiler, h, H3[0])]
    if not absent:
        return None
    return f"{', '.join(absent)} not found"


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
        why_not = use_nghttp2(cc)
        why_not_h3 = use_h3(cc)
        # permessage-deflate on the server's /ws needs zlib; without zlib.h it is not offered
        have_zlib = compiles(cc, "zlib.h", [])
        for ext in self.extensions:
            if ext.name != "httpbench._core":
                continue
            if why_not is None:
                ext.include_dirs += NGHTTP2[0]
                ext.library_dirs += NGHTTP2[1]
                ext.libraries[:0] = NGHTTP2[2]
            else:
                ext.define_macros.append(("HB_NO_NGHTTP2", "1"))
                # one line, in pip's output too (-v): what is left out and how to get it
                print(f"httpbench: building WITHOUT the embedded server's HTTP/2 side ({why_not}); "
                      f"everything else is built. For HTTP/2 serving, {NGHTTP2_HINT}.",
                      file=sys.stderr, flush=True)
            if have_zlib:
                ext.libraries.append("z")
            else:
                ext.define_macros.append(("HB_NO_ZLIB", "1"))
                print("httpbench: building WITHOUT permessage-deflate on /ws (zlib.h not found; "
                      "install zlib1g-dev)", file=sys.stderr, flush=True)
            if why_not_h3 is None:
                ext.include_dirs += H3[0]
                ext.library_dirs += H3[1]
                ext.libraries[:0] = H3[2]
            else:
                ext.define_macros.append(("HB_NO_H3", "1"))
                print(f"httpbench: building WITHOUT HTTP/3 ({why_not_h3}); everything else "
                      f"is built. For HTTP/3, {H3_HINT}.", file=sys.stderr, flush=True)
        # setuptools reuses up-to-date objects whatever the macros: never mix the two builds
        stamp = os.path.join(self.build_temp, "httpbench-nghttp2")
        choice = (("h2-no" if why_not else "h2-yes") + (" h3-no" if why_not_h3 else " h3-yes")
                  + (" z-yes" if have_zlib else " z-no"))
        try:
            with open(stamp) as f:
                if f.read() != choice:
                    self.force = True
        except OSError:
            self.force = True
        super().run()
        os.makedirs(self.build_temp, exist_ok=True)
        with open(stamp, "w") as f:
            f.write(choice)


setup(ext_modules=exts, cmdclass={"build_ext": CheckedBuildExt})
