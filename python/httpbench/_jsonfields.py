"""JSON field codecs of the result records: histograms as base64 of their
encoding, and checked conversions that name the field in their ValueError."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

from ._hist import decode_histogram, encode_histogram, hist_count, hist_percentile, hist_stat

__all__ = ["as_dict", "as_float", "as_int", "hist_from_json", "hist_to_json", "int_map",
           "int_tuple", "jsonable", "num_json", "passthrough", "present_ints", "required"]


def hist_to_json(h: Any) -> dict[str, Any] | None:
    if h is None:
        return None
    out: dict[str, Any] = {"encoding": "hb-base64", "data": encode_histogram(h)}
    # Informative only (for jq/grep readers); ignored on load.
    n = hist_count(h)
    out["count"] = n
    if n:
        out["summary_ns"] = {
            "min": hist_stat(h, "min"),
            "p50": hist_percentile(h, 50),
            "p99": hist_percentile(h, 99),
            "max": hist_stat(h, "max"),
        }
    return out


def hist_from_json(obj: Any, where: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, str):
        return decode_histogram(obj)
    if not isinstance(obj, Mapping) or "data" not in obj:
        raise ValueError(f"{where}: expected an encoded histogram, got {type(obj).__name__}")
    if obj.get("encoding", "hb-base64") != "hb-base64":
        raise ValueError(f"{where}: unknown histogram encoding {obj.get('encoding')!r}")
    return decode_histogram(obj["data"])


# --------------------------------------------------------------------------
# small field codecs


def required(d: Mapping[str, Any], key: str, where: str) -> Any:
    try:
        return d[key]
    except KeyError:
        raise ValueError(f"{where}: missing required field {key!r}") from None


def as_int(v: Any, where: str, *, optional: bool = False) -> int | None:
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (
        isinstance(v, float) and not v.is_integer()
    ):
        raise ValueError(f"{where}: expected an integer, got {v!r}")
    return int(v)


def present_ints(d: Mapping[str, Any], names: Iterable[str], where: str) -> dict[str, int]:
    """The integer fields among ``names`` that ``d`` has; absent ones keep their defaults."""
    return {n: int(as_int(d[n], f"{where}.{n}")) for n in names if n in d}


def as_float(v: Any, where: str, *, optional: bool = False) -> float | None:
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{where}: expected a number, got {v!r}")
    return float(v)


def as_dict(v: Any, where: str) -> dict:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise ValueError(f"{where}: expected an object, got {type(v).__name__}")
    return dict(v)


def int_map(v: Any, where: str, *, int_keys: bool = False) -> dict:
    out = {}
    for k, n in as_dict(v, where).items():
        if int_keys:
            try:
                k = int(k)
            except (TypeError, ValueError):
                raise ValueError(f"{where}: key {k!r} is not an integer") from None
        out[k] = as_int(n, f"{where}[{k!r}]")
    return out


def int_tuple(v: Any, where: str) -> tuple[int, ...]:
    if v is None:
        return ()
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"{where}: expected a list, got {type(v).__name__}")
    return tuple(as_int(x, f"{where}[{i}]") for i, x in enumerate(v))


def jsonable(v: Any) -> Any:
    """Metadata values: keep JSON types, stringify anything else (never pickle)."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, Mapping):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    return str(v)


def num_json(v: float | None) -> float | None:
    return v if v is None or math.isfinite(v) else None


def passthrough(cls: Any, d: Mapping[str, Any], kw: dict[str, Any]) -> None:
    """Fields added later by other components (with defaults) round-trip as plain JSON."""
    for f in dataclasses.fields(cls):
        if f.name not in kw and f.name in d:
            v = d[f.name]
            kw[f.name] = tuple(v) if isinstance(v, list) else v

