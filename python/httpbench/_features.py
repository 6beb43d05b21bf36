"""What this build of httpbench has: the parts that are optional when the C extension is built.

The embedded server's HTTP/2 side needs nghttp2's headers at build time; a build
without them has everything else (the HTTP/2 client side is httpbench's own code).
"""

from __future__ import annotations

import importlib.util

from . import _core

__all__ = ["features", "require_h2_server", "describe", "h3_missing", "H2_SERVER_MISSING"]

# "this build has no HTTP/2 server: install libnghttp2-dev (...) and reinstall"
H2_SERVER_MISSING: str = _core.H2_SERVER_MISSING

# feature -> what a build without it lacks and how to get it
_MISSING = {
    "http2-server": H2_SERVER_MISSING,
    "http3-client": _core.H3_CLIENT_MISSING,
    "callgrind": "measure(instructions=True) cannot bound its window: install valgrind's "
                 "headers (valgrind / valgrind-devel) and reinstall",
}


def h3_missing() -> str | None:
    """Why the server's HTTP/3 listener is unavailable here (an installed extra, not a
    build option), or ``None`` when it is available."""
    for mod in ("aioquic", "cryptography"):
        if importlib.util.find_spec(mod) is None:
            return f"HTTP/3 needs {mod} (pip install 'httpbench[h3]')"
    return None


def features() -> dict[str, bool]:
    """The build's features, each True when this installed build has it.

    ``http2-server``: the embedded server speaks HTTP/2 (h2 and h2c; built with
    nghttp2). ``http2-client``: ``Client(http2=True)``, ``bench(http2=True)`` and the
    h2 scenarios' client side. ``tls``: HTTPS (OpenSSL). ``callgrind``: callgrind
    client requests around ``measure(instructions=True)``'s window. ``http3-server``:
    ``start_process(h3=True)`` and the h3 scenarios (the ``[h3]`` extra installed).
    ``http3-client``: ``bench(http3=True)`` / ``httpbench bench --h3`` (built with
    ngtcp2, nghttp3 and GnuTLS).
    """
    return {
        "http2-server": bool(_core.HAVE_H2_SERVER),
        "http2-client": True,
        "tls": True,
        "callgrind": bool(_core.HAVE_CALLGRIND),
        "http3-server": h3_missing() is None,
        "http3-client": bool(_core.HAVE_H3_CLIENT),
    }


def require_h2_server(what: str = "") -> None:
    """Raise ``FeatureUnavailable`` (naming ``what``) when this build has no HTTP/2 server."""
    if not _core.HAVE_H2_SERVER:
        raise _core.FeatureUnavailable(f"{what}: {H2_SERVER_MISSING}" if what else H2_SERVER_MISSING)


def describe() -> str:
    """Lines for ``httpbench --version``: what the build has and what it lacks (and why)."""
    have = features()
    lines = ["built with: " + ", ".join(k for k, v in have.items() if v)]
    lines += [f"built without {k}: {h3_missing() if k == 'http3-server' else _MISSING[k]}"
              for k, v in have.items() if not v]
    return "\n".join(lines)
