"""What every result record shares: the constants of its fields, per-request
arithmetic that never invents a 0, and the base classes (equality through the
JSON form, save, latency percentiles, and the convenience methods the presentation
and policy layers register in ``_conveniences``)."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ._conveniences import call
from ._hist import hist_percentile
from ._jsonfields import as_dict
from ._resultfile import dumps, save

if TYPE_CHECKING:
    from ._core import Histogram

__all__ = ["ALLOC_DOMAINS", "DEFAULT_PERCENTILES", "ERROR_TYPES", "RecordBase", "ResultBase",
           "check_counts", "per_second", "ratio"]

# Typed transport errors a load-generator run counts.
ERROR_TYPES = ("connect", "tls", "write", "read", "timeout", "protocol", "closed")
# Python allocator domains (PyMem_SetAllocator).
ALLOC_DOMAINS = ("raw", "mem", "obj")
DEFAULT_PERCENTILES = (50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0)


def check_counts(rec: Any, names: Iterable[str]) -> None:
    """Counts, sizes and durations are never negative (None = not measured)."""
    for name in names:
        v = getattr(rec, name)
        if v is not None and v < 0:
            raise ValueError(f"{type(rec).__name__}.{name} must be >= 0, got {v!r}")


def ratio(total: float | None, n: int) -> float:
    """total / n, NaN when either is missing or n is 0 (never a fake 0 or inf)."""
    if total is None or not n:
        return math.nan
    return total / n


def per_second(count: int | float, duration_ns: int) -> float:
    return count * 1e9 / duration_ns if duration_ns > 0 else math.nan



class RecordBase:
    """Shared behaviour: equality through the JSON form, short repr, save, Jupyter."""

    __slots__ = ()
    KIND: str = ""

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError

    @classmethod
    def _from_dict_doc(cls, d: Any) -> dict[str, Any]:
        """``d`` as a dict whose ``kind`` tag, if any, is this class's; ValueError otherwise."""
        w = cls.KIND
        d = as_dict(d, w)
        if d.get("kind", w) != w:
            raise ValueError(f"expected kind {w!r}, got {d.get('kind')!r}")
        return d

    def __eq__(self, other: object) -> bool:
        # Histograms have no value equality of their own; their encodings do.
        if type(other) is not type(self):
            return NotImplemented
        return self.to_dict() == other.to_dict()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write this record to ``path`` as a versioned JSON file (gzip if ``.gz``)."""
        save(self, path)  # type: ignore[arg-type]

    def to_json(self, indent: int | None = None) -> str:
        """The file form (with schema version) as a JSON string."""
        return dumps(self, indent=indent)  # type: ignore[arg-type]

    def to_dataframe(self) -> Any:
        """A one-row pandas DataFrame (see ``httpbench.report.DATAFRAME_COLUMNS``)."""
        return call("to_dataframe", self)

    def summary(self, fmt: str = "text") -> str:
        """A readable table of this record (``fmt``: "text", "md" or "json")."""
        text: str = call("summary", self, fmt)
        return text

    def plot(self, kind: str = "percentiles", **kwargs: Any) -> Any:
        """A matplotlib Figure of this record; see ``httpbench.plot.plot`` for kinds."""
        return call("plot", self, kind, **kwargs)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        bundle: dict[str, str] = call("mimebundle", self)
        return bundle

    def __str__(self) -> str:
        try:
            return self.summary("text")
        except Exception:  # never let a formatting bug hide the object
            return repr(self)


class ResultBase(RecordBase):
    """What BenchResult and MeasureResult share: latency percentiles, budgets, to_dict."""

    __slots__ = ()

    latency: Histogram  # the main latency histogram (a dataclass field of each subclass)

    def _field_to_json(self, name: str, v: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def p50(self) -> float:
        """Median of the ``latency`` histogram, ns."""
        return hist_percentile(self.latency, 50)

    @property
    def p90(self) -> float:
        """90th percentile of the ``latency`` histogram, ns."""
        return hist_percentile(self.latency, 90)

    @property
    def p99(self) -> float:
        """99th percentile of the ``latency`` histogram, ns."""
        return hist_percentile(self.latency, 99)

    @property
    def p999(self) -> float:
        """99.9th percentile of the ``latency`` histogram, ns."""
        return hist_percentile(self.latency, 99.9)

    def assert_budget(self, **budget: Any) -> list[Any]:
        """Raise ``httpbench.BudgetExceeded`` unless every limit holds (see ``httpbench._budget``)."""
        rows: list[Any] = call("assert_budget", self, **budget)
        return rows

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``kind`` tag, histograms base64-encoded, times in ns)."""
        d: dict[str, Any] = {"kind": self.KIND}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            d[f.name] = self._field_to_json(f.name, getattr(self, f.name))
        return d


