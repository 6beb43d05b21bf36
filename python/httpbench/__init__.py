"""httpbench: benchmark HTTP clients and servers.

A native load generator (``bench``), an embedded test server (``Server``), a
native client (``Client``) and per-call CPU/allocation/GC accounting of any
Python callable (``measure``), with ``httpbench compare`` to put HTTP client
libraries side by side, ``diff`` to compare two saved results, and the public
modules ``httpbench.report`` and ``httpbench.plot`` to present them.
"""

import sys

from . import _recordviews  # noqa: F401  (registers the records' summary(), plot(), ...)
from ._version import __version__

TYPE_CHECKING = False  # typing costs more to import than the rest of this module

# The public names load on first use (PEP 562), so `import httpbench` stays cheap:
# asyncio, argparse, ssl and json only come in with the parts that need them.
# The same rule inside the package: an import written in a function is there for
# import time (only that path needs the module); any other reason is commented there.
_LAZY: dict[str, str] = {
    "plot": "",
    "report": "",
    "Adapter": "_adapters",
    "AdapterUnavailable": "_adapters",
    "BaselineRegression": "_baseline",
    "Progress": "_bench",
    "bench": "_bench",
    "BudgetError": "_budget",
    "BudgetExceeded": "_budget",
    "Client": "_client",
    "Headers": "_client",
    "Response": "_client",
    "ServerSentEvent": "_client",
    "Stream": "_client",
    "compare": "_compare",
    "BodyTooLarge": "_core",
    "ConnectError": "_core",
    "Histogram": "_core",
    "HttpbenchError": "_core",
    "HTTP2NotSupported": "_core",
    "FeatureUnavailable": "_core",
    "features": "_features",
    "ProtocolError": "_core",
    "RemoteClosed": "_core",
    "RequestTimeout": "_core",
    "TLSError": "_core",
    "measure": "_measure",
    "measure_async": "_measure",
    "native_alloc_preload_path": "_measure",
    "native_allocs": "_measure",
    "BenchResult": "_results",
    "MeasureResult": "_results",
    "ResultSet": "_results",
    "load": "_results",
    "WorkerResult": "_results",
    "Server": "_server",
    "ServerProcess": "_server",
    "expected_bytes": "_server",
    "start_process": "_server",
    "H3Unavailable": "_features",
    "history": "_history:open_history",
    "History": "_history",
    "HistoryError": "_historystore",
    "diff": "report",
    # Kept for code written before diff() had its name; diff is the documented one.
    "compare_results": "report:diff",
}

if TYPE_CHECKING:
    from . import plot, report
    from ._adapters import Adapter, AdapterUnavailable
    from ._baseline import BaselineRegression
    from ._bench import Progress, bench
    from ._budget import BudgetError, BudgetExceeded
    from ._client import Client, Headers, Response, ServerSentEvent, Stream
    from ._compare import compare
    from ._core import (
        BodyTooLarge,
        ConnectError,
        FeatureUnavailable,
        Histogram,
        HTTP2NotSupported,
        HttpbenchError,
        ProtocolError,
        RemoteClosed,
        RequestTimeout,
        TLSError,
    )
    from ._features import H3Unavailable, features
    from ._history import History
    from ._history import open_history as history
    from ._historystore import HistoryError
    from ._measure import measure, measure_async, native_alloc_preload_path, native_allocs
    from ._results import BenchResult, MeasureResult, ResultSet, WorkerResult, load
    from ._server import Server, ServerProcess, expected_bytes, start_process
    from .report import diff

    compare_results = diff


if not TYPE_CHECKING:  # hidden from type checkers, which see the imports above instead

    def __getattr__(name: str) -> object:
        where = _LAZY.get(name)
        if where is None:
            raise AttributeError(f"module 'httpbench' has no attribute {name!r}")
        mod, _, attr = where.partition(":")
        full = f"{__name__}.{mod or name}"
        __import__(full)  # the builtin: importing importlib itself costs more than all this
        value = sys.modules[full] if not mod else getattr(sys.modules[full], attr or name)
        globals()[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__))


__all__ = [
    "__version__",
    "HttpbenchError",
    "ProtocolError",
    "HTTP2NotSupported",
    "ConnectError",
    "RequestTimeout",
    "TLSError",
    "RemoteClosed",
    "BodyTooLarge",
    "FeatureUnavailable",
    "features",
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
    "WorkerResult",
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
    "Stream",
    "ServerSentEvent",
    "Server",
    "ServerProcess",
    "start_process",
    "H3Unavailable",
    "expected_bytes",
    "history",
    "History",
    "HistoryError",
]
