"""httpbench: benchmark HTTP clients and servers.

A native load generator (``bench``), an embedded test server (``Server``), a
native client (``Client``) and per-call CPU/allocation/GC accounting of any
Python callable (``measure``), with ``httpbench compare`` to put HTTP client
libraries side by side, ``diff`` to compare two saved results, and the public
modules ``httpbench.report`` and ``httpbench.plot`` to present them.
"""

from . import plot, report
from ._adapters import Adapter, AdapterUnavailable
from ._baseline import BaselineRegression
from ._bench import Progress, bench
from ._budget import BudgetError, BudgetExceeded
from ._client import Client, Headers, Response
from ._compare import compare
from ._core import (
    BodyTooLarge,
    ConnectError,
    Histogram,
    HttpbenchError,
    ProtocolError,
    RemoteClosed,
    RequestTimeout,
    TLSError,
)
from ._measure import measure, measure_async, native_alloc_preload_path, native_allocs
from ._results import BenchResult, MeasureResult, ResultSet, load
from ._server import Server, ServerProcess, expected_bytes, start_process
from ._version import __version__
from .report import diff

# Kept for code written before diff() had its name; diff is the documented one.
compare_results = diff

__all__ = [
    "__version__",
    "HttpbenchError",
    "ProtocolError",
    "ConnectError",
    "RequestTimeout",
    "TLSError",
    "RemoteClosed",
    "BodyTooLarge",
    "Histogram",
    "measure",
    "measure_async",
    "native_alloc_preload_path",
    "native_allocs",
    "bench",
    "compare",
    "Adapter",
    "AdapterUnavailable",
    "BenchResult",
    "MeasureResult",
    "ResultSet",
    "load",
    "diff",
    "compare_results",
    "report",
    "plot",
    "Progress",
    "BudgetError",
    "BudgetExceeded",
    "BaselineRegression",
    "Client",
    "Response",
    "Headers",
    "Server",
    "ServerProcess",
    "start_process",
    "expected_bytes",
]
