"""httpbench: benchmark HTTP clients and servers.

A native load generator (``bench``), an embedded test server (``Server``), a
native client (``Client``) and per-call CPU/allocation/GC accounting of any
Python callable (``measure``), with ``httpbench compare`` to put HTTP client
libraries side by side.
"""

from ._bench import bench
from ._budget import BudgetExceeded
from ._client import Client, Headers, Response
from ._compare import compare
from ._core import (
    ConnectError,
    Histogram,
    HttpbenchError,
    ProtocolError,
    RemoteClosed,
    RequestTimeout,
    TLSError,
)
from ._measure import measure, measure_async, native_alloc_preload_path, native_allocs
from ._report import compare_results
from ._results import BenchResult, MeasureResult, ResultSet, load
from ._server import Server, ServerProcess, expected_bytes, start_process
from ._version import __version__

__all__ = [
    "__version__",
    "HttpbenchError",
    "ProtocolError",
    "ConnectError",
    "RequestTimeout",
    "TLSError",
    "RemoteClosed",
    "Histogram",
    "measure",
    "measure_async",
    "native_alloc_preload_path",
    "native_allocs",
    "bench",
    "compare",
    "BenchResult",
    "MeasureResult",
    "ResultSet",
    "load",
    "compare_results",
    "BudgetExceeded",
    "Client",
    "Response",
    "Headers",
    "Server",
    "ServerProcess",
    "start_process",
    "expected_bytes",
]
