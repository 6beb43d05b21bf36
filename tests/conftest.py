"""Shared test configuration. Tests import the installed httpbench, never the source tree.

Fixtures shared by every folder:
  server, tls_server   the embedded server, plain and HTTPS, one each per session.
                       A module that counts the server's stats exactly marks itself
                       ``pytestmark = pytest.mark.own_server`` and gets servers of its
                       own (per module), so other modules' traffic never lands in its counts.
Raw-socket helpers (a scripted server, read-until-close, ...) are in tests/_raw.py:
``from _raw import ...`` works from every folder, this directory being on sys.path.
"""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Keep the source package off sys.path so tests exercise the installed build.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(ROOT, "python")]


def _serve(tls: bool):
    import httpbench

    with httpbench.Server(tls=tls) as s:
        yield s


@pytest.fixture(scope="session")
def _session_server():
    yield from _serve(tls=False)


@pytest.fixture(scope="session")
def _session_tls_server():
    yield from _serve(tls=True)


def _module_or_session(request, tls: bool):
    if request.node.get_closest_marker("own_server") is None:
        yield request.getfixturevalue("_session_tls_server" if tls else "_session_server")
    else:
        yield from _serve(tls)


@pytest.fixture(scope="module")
def server(request):
    """The embedded server (plain HTTP): the session's, or the module's own."""
    yield from _module_or_session(request, tls=False)


@pytest.fixture(scope="module")
def tls_server(request):
    """The embedded server over HTTPS (verify with .ca_file): the session's, or the module's own."""
    yield from _module_or_session(request, tls=True)
