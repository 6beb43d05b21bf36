"""History fixtures: a store per test, and a real PostgreSQL server for the session.

``postgres`` starts Debian's PostgreSQL (``/usr/lib/postgresql/*/bin``) in a temporary
directory on a free port with its own socket directory, as the ``postgres`` user when
the tests run as root (the server refuses root); it is skipped with the reason where
the binaries or psycopg are missing. ``store_target`` parametrizes a test over SQLite
and PostgreSQL (a fresh database each time).
"""

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile

import pytest

_BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
_counter = itertools.count()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def postgres():
    """The URL prefix (``postgresql://postgres@127.0.0.1:PORT/``) of a running server."""
    if not _BIN:
        pytest.skip("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    pytest.importorskip("psycopg", reason="pip install 'psycopg[binary]'")
    bindir = os.path.dirname(_BIN[-1])
    root = tempfile.mkdtemp(prefix="hb-pg-")
    prefix: list[str] = []
    if os.geteuid() == 0:  # postgres refuses to run as root
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(root, ignore_errors=True)
            pytest.skip("running as root and there is no 'postgres' user to run the server")
        os.chown(root, pw.pw_uid, pw.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    data, log = os.path.join(root, "data"), os.path.join(root, "log")
    port = _free_port()
    try:
        subprocess.run([*prefix, f"{bindir}/initdb", "-D", data, "-A", "trust", "-U",
                        "postgres", "--no-sync"], check=True, capture_output=True, timeout=120)
        subprocess.run([*prefix, f"{bindir}/pg_ctl", "-D", data, "-l", log, "-w", "-t", "60",
                        "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off",
                        "start"], check=True, capture_output=True, timeout=120)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        text = getattr(exc, "stderr", b"") or b""
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start PostgreSQL: {text.decode(errors='replace')[-500:]}")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/"
    finally:
        subprocess.run([*prefix, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"],
                       capture_output=True, timeout=60, check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(postgres):
    """A fresh, empty database on the session's server."""
    import psycopg

    name = f"hb_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(postgres + "postgres", autocommit=True) as db:
        db.execute(f"CREATE DATABASE {name}")
    return postgres + name


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request, tmp_path):
    """A store location: a new SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "history.db")
    return request.getfixturevalue("pg_url")
