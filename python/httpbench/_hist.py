"""Histogram helpers: statistics, the compact base64 encoding, the percentile spectrum.

Histograms are ``httpbench.Histogram`` objects, used duck-typed (``encode()``,
``Histogram.decode(bytes)``, ``percentile(p)``, ``count``, ``min``, ``max``,
``mean``, ``stddev``, ``buckets`` or iteration over ``(value, count)``), so an
HdrHistogram-like object works too. Values are nanoseconds.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "buckets",
    "decode_histogram",
    "encode_histogram",
    "hist_count",
    "hist_percentile",
    "hist_stat",
    "is_histogram",
    "percentile_spectrum",
    "percentiles",
]


def _histogram_type() -> Any:
    try:
        from . import _core
    except ImportError:  # pragma: no cover - the extension is always built
        return None
    return getattr(_core, "Histogram", None)


def is_histogram(obj: Any) -> bool:
    """True for anything with an ``encode()`` method (and not str/bytes)."""
    return obj is not None and callable(getattr(obj, "encode", None)) and not isinstance(
        obj, (str, bytes)
    )


def _hattr(h: Any, name: str) -> Any:
    """Read a histogram statistic that may be exposed as an attribute or a method."""
    v = getattr(h, name)
    return v() if callable(v) else v


def hist_count(h: Any) -> int:
    """Number of recorded values of a histogram (``count`` attribute, method or len())."""
    if hasattr(h, "count"):
        return int(_hattr(h, "count"))
    return int(sum(c for _, c in h))


def hist_percentile(h: Any, p: float) -> float:
    """Value (ns) at percentile ``p`` (0..100) of a histogram; NaN when it is empty."""
    if h is None or hist_count(h) == 0:
        return math.nan
    fn = getattr(h, "percentile", None) or h.value_at_percentile
    return float(fn(p))


def hist_stat(h: Any, name: str) -> float:
    """``min``/``max``/``mean``/``stddev`` of a histogram in ns; NaN when empty or absent."""
    if h is None or hist_count(h) == 0:
        return math.nan
    return float(_hattr(h, name))


def percentiles(h: Any, ps: Iterable[float]) -> dict[float, float]:
    """``{p: value_ns}`` for each percentile in ``ps``."""
    return {float(p): hist_percentile(h, p) for p in ps}


def buckets(h: Any) -> list[tuple[int, int, int]]:
    """Non-empty buckets as ``(lowest, highest equivalent value, count)``."""
    b = getattr(h, "buckets", None)
    if b is not None:
        return list(b() if callable(b) else b)
    return [(v, v, c) for v, c in h]


def encode_histogram(h: Any) -> str:
    """The compact encoding of a histogram as ASCII base64 (what the JSON files embed)."""
    data = h.encode()
    return base64.b64encode(bytes(data)).decode("ascii")


def decode_histogram(text: str | bytes) -> Any:
    """Inverse of :func:`encode_histogram`: a new ``httpbench.Histogram``.

    Raises ValueError on bad base64 or a blob the histogram decoder rejects.
    """
    try:
        raw = base64.b64decode(text, validate=True)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"histogram: invalid base64 ({exc})") from None
    tp = _histogram_type()
    if tp is None:
        raise ValueError("histogram: httpbench.Histogram is not available to decode it")
    try:
        return tp.decode(raw)
    except ValueError:
        raise
    except Exception as exc:  # decoder's own error type -> the documented ValueError
        raise ValueError(f"histogram: cannot decode ({exc})") from exc


def percentile_spectrum(h: Any, ticks_per_half: int = 5,
                        levels: Sequence[float] | None = None) -> list[tuple[float, float, int]]:
    """HdrHistogram-style percentile distribution: [(value_ns, percentile, count_le)].

    ``count_le`` is the number of recorded values at or below ``value_ns``. By
    default the percentile levels double their resolution every halving of the
    remaining distance to 100% (``ticks_per_half`` per halving), as
    HdrHistogram's outputPercentileDistribution does, and the last row is the
    max at 100%; ``levels`` gives a fixed ladder instead (100 means the max).
    """
    n = hist_count(h) if h is not None else 0
    if not n:
        return []
    cum: list[tuple[int, int]] = []  # (bucket hi, cumulative count)
    total = 0
    for _lo, hi, c in buckets(h):
        total += c
        cum.append((hi, total))

    def count_le(v: float) -> int:
        best = 0
        for hi, t in cum:
            if hi <= v:
                best = t
            else:
                break
        return best

    if levels is not None:
        return [(hist_stat(h, "max"), 100.0, n) if p >= 100
                else (hist_percentile(h, p), float(p), max(count_le(hist_percentile(h, p)), 1))
                for p in levels]
    out = []
    i = 0
    last_p = -1.0
    while True:
        p = 100.0 * (1.0 - 0.5 ** (i / ticks_per_half))
        if p >= 100.0 * (1.0 - 1.0 / n) or i > 60 * ticks_per_half:
            break
        v = hist_percentile(h, p)
        if p > last_p:
            out.append((v, p, max(count_le(v), 1)))
            last_p = p
        i += 1
    out.append((hist_stat(h, "max"), 100.0, n))
    return out
