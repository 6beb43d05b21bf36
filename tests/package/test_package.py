import builtins
import os
import subprocess
import sys

import httpbench
import pytest


def test_version_and_import_from_anywhere(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", "import httpbench; print(httpbench.__version__)"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    )
    assert out.stdout.strip() == httpbench.__version__
    assert httpbench.__version__.count(".") == 2


def test_exception_hierarchy():
    assert issubclass(httpbench.ProtocolError, httpbench.HttpbenchError)
    assert issubclass(httpbench.ConnectError, ConnectionError)
    assert issubclass(httpbench.RequestTimeout, TimeoutError)
    assert issubclass(httpbench.TLSError, httpbench.HttpbenchError)
    assert issubclass(httpbench.RemoteClosed, httpbench.HttpbenchError)


@pytest.mark.parametrize(
    "code,exc",
    [
        (-5001, "ProtocolError"),
        (-5400, "ProtocolError"),  # an HTTP/2 connection error
        (-5401, "HTTP2NotSupported"),
        (-5101, "TLSError"),
        (-5200, "RequestTimeout"),
        (-5201, "RemoteClosed"),
        (-111, "ConnectError"),  # ECONNREFUSED
        (-5301, "ValueError"),
    ],
)
def test_error_mapping(code, exc):
    from httpbench import _core

    expected = getattr(httpbench, exc, None) or getattr(builtins, exc)
    with pytest.raises(expected) as ei:
        _core._raise_code(code)
    if issubclass(expected, httpbench.ProtocolError):
        assert ei.value.code == code
    if exc == "ProtocolError":
        assert not isinstance(ei.value, httpbench.HTTP2NotSupported)


def test_connect_error_keeps_errno():
    from httpbench import _core

    with pytest.raises(httpbench.ConnectError) as ei:
        _core._raise_code(-111)
    assert ei.value.errno == 111


def test_cli_help():
    out = subprocess.run([sys.executable, "-m", "httpbench", "--help"], capture_output=True,
                         text=True, cwd=os.path.dirname(__file__))
    assert out.returncode == 0
    assert "compare" in out.stdout
