"""What this build of httpbench has: the parts that are optional when the C extension is built.

The embedded server's HTTP/2 side needs nghttp2's headers at build time, its
HTTP/3 side ngtcp2's and GnuTLS's; a build without them has everything
else (the HTTP/2 client side is httpbench's own code).
"""

from __future__ import annotations

from . import _core

__all__ = ["features", "require_h2_server", "require_h3_server", "describe", "h3_missing",
           "H2_SERVER_MISSING", "H3_MISSING", "H3_CLIENT_MISSING", "H3Unavailable"]

# "this build has no HTTP/2 server: install libnghttp2-dev (...) and reinstall"
H2_SERVER_MISSING: str = _core.H2_SERVER_MISSING
# "this build has no HTTP/3 server: install libngtcp2-dev (...) and reinstall"
H3_MISSING: str = _core.H3_MISSING
# The HTTP/3 client (bench(http3=True), Client(http3=True)) comes with the server: one
# build switch (HAVE_H3), the same packages to install.
H3_CLIENT_MISSING: str = H3_MISSING.replace("HTTP/3 server", "HTTP/3 client", 1)


class H3Unavailable(_core.FeatureUnavailable, RuntimeError):
    """HTTP/3 cannot be served: this build has no HTTP/3 server (a ``FeatureUnavailable``)."""

# feature -> what a build without it lacks and how to get it
_MISSING = {
    "http2-server": H2_SERVER_MISSING,
    "http3-client": H3_CLIENT_MISSING,
    "callgrind": "measure(instructions=True) cannot bound its window: install valgrind's "
                 "headers (valgrind / valgrind-devel) and reinstall",
    "http3-server": H3_MISSING,
}


def h3_missing() -> str | None:
    """Why the embedded server cannot serve HTTP/3 in this build, or ``None`` when it can."""
    return None if _core.HAVE_H3 else H3_MISSING


def features() -> dict[str, bool]:
    """The build's features, each True when this installed build has it.

    ``http2-server``: the embedded server speaks HTTP/2 (h2 and h2c; built with
    nghttp2). ``http2-client``: ``Client(http2=True)``, ``bench(http2=True)`` and the
    h2 scenarios' client side. ``tls``: HTTPS (OpenSSL). ``callgrind``: callgrind
    client requests around ``measure(instructions=True)``'s window. ``http3-server``:
    the embedded server speaks HTTP/3 (``Server(tls=True, h3=True)``,
    ``start_process(h3=True)``, the h3 scenarios; built with ngtcp2 and GnuTLS).
    ``http3-client``: the load generator and the native client over HTTP/3
    (``bench(http3=True)``, ``httpbench URL --h3``, ``Client(http3=True)``; the same
    libraries and build switch as ``http3-server``).
    """
    return {
        "http2-server": bool(_core.HAVE_H2_SERVER),
        "http2-client": True,
        "tls": True,
        "callgrind": bool(_core.HAVE_CALLGRIND),
        "http3-server": bool(_core.HAVE_H3),
        "http3-client": bool(_core.HAVE_H3),
    }


def require_h2_server(what: str = "") -> None:
    """Raise ``FeatureUnavailable`` (naming ``what``) when this build has no HTTP/2 server."""
    if not _core.HAVE_H2_SERVER:
        raise _core.FeatureUnavailable(f"{what}: {H2_SERVER_MISSING}" if what else H2_SERVER_MISSING)


def require_h3_server(what: str = "") -> None:
    """Raise ``H3Unavailable`` (a ``FeatureUnavailable``, naming ``what``) when this build
    has no HTTP/3 server."""
    if not _core.HAVE_H3:
        raise H3Unavailable(f"{what}: {H3_MISSING}" if what else H3_MISSING)


def describe() -> str:
    """Lines for ``httpbench --version``: what the build has and what it lacks (and why)."""
    have = features()
    lines = ["built with: " + ", ".join(k for k, v in have.items() if v)]
    lines += [f"built without {k}: {_MISSING[k]}" for k, v in have.items() if not v]
    return "\n".join(lines)
