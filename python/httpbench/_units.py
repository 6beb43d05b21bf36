"""Units: readable formatting and parsing of durations, sizes, rates and percentages.

Base units (as in the result records): durations in **nanoseconds**, sizes in
**bytes**, rates per second, ratios as fractions (0.05 == 5%).

Formatting picks the unit that keeps 3 significant digits readable
(``format_duration(12345) == "12.3 µs"``, ``format_bytes(1536) == "1.50 KiB"``);
tables use :func:`duration_unit` / :func:`size_unit` to give a whole column one
unit. Parsing accepts what people type: ``"2ms"``, ``"80 us"``, ``"80µs"``,
``"1.5s"``, ``"300KiB"``, ``"1MB"``, ``"5%"``, ``"12k"``.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "DURATION_UNITS",
    "SIZE_UNITS",
    "format_duration",
    "format_bytes",
    "format_count",
    "format_rate",
    "format_byte_rate",
    "format_percent",
    "format_change",
    "significant",
    "duration_unit",
    "size_unit",
    "scale_duration",
    "parse_duration",
    "parse_size",
    "parse_percent",
    "parse_count",
    "parse_quantity",
]

MISSING = "—"

# name -> nanoseconds. Spellings people type for micro: us, µs (micro sign), μs (Greek mu).
DURATION_UNITS: dict[str, float] = {
    "ns": 1.0, "nsec": 1.0,
    "us": 1e3, "µs": 1e3, "μs": 1e3, "usec": 1e3,
    "ms": 1e6, "msec": 1e6,
    "s": 1e9, "sec": 1e9, "secs": 1e9,
    "min": 60e9, "m": 60e9,
    "h": 3600e9,
}
# name (lower case) -> bytes. KiB & co are binary, kB & co decimal.
SIZE_UNITS: dict[str, float] = {
    "b": 1, "byte": 1, "bytes": 1,
    "kib": 1024, "k": 1024, "mib": 1024**2, "m": 1024**2, "gib": 1024**3, "g": 1024**3,
    "tib": 1024**4,
    "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
}
_COUNT_UNITS = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}

_DUR_STEPS = (("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9))
_SIZE_STEPS = (("B", 1), ("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3), ("TiB", 1024**4))


def _bad(v: float | int | None) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def significant(x: float, digits: int = 3) -> str:
    """x with ``digits`` significant digits, no exponent, no trailing garbage."""
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    if abs(round(x, max(0, digits - 1 - mag))) >= 10 ** (mag + 1):
        mag += 1  # 0.99996 rounds up to 1.00, not 1.000
    decimals = max(0, digits - 1 - mag)
    return f"{x:.{decimals}f}"


def duration_unit(ns: float) -> tuple[str, float]:
    """The readable unit for a duration of ``ns`` nanoseconds: (name, ns per unit)."""
    a = abs(ns) if not _bad(ns) else 0.0
    unit = _DUR_STEPS[0]
    for step in _DUR_STEPS:
        if a >= step[1] * 0.9995:  # 999.96 µs reads better as 1.00 ms
            unit = step
    return unit


def scale_duration(ns: float, unit: str) -> float:
    """``ns`` expressed in ``unit`` (any key of DURATION_UNITS)."""
    return ns / DURATION_UNITS[unit]


def format_duration(ns: float | int | None, digits: int = 3, unit: str | None = None) -> str:
    """``12345`` -> ``"12.3 µs"``; ``unit`` forces one (e.g. a table column's). NaN -> ``—``."""
    if _bad(ns):
        return MISSING
    if unit is None:
        unit, factor = duration_unit(ns)  # type: ignore[arg-type]
    else:
        factor = DURATION_UNITS[unit]
    v = ns / factor  # type: ignore[operator]
    if unit == "ns" and float(ns).is_integer():  # type: ignore[arg-type]
        return f"{int(ns)} ns"  # type: ignore[arg-type]
    return f"{significant(v, digits)} {unit}"


def size_unit(n: float) -> tuple[str, float]:
    """The readable binary unit for ``n`` bytes: (name, bytes per unit)."""
    a = abs(n) if not _bad(n) else 0.0
    unit = _SIZE_STEPS[0]
    for step in _SIZE_STEPS:
        if a >= step[1] * 0.9995:
            unit = step
    return unit


def format_bytes(n: float | int | None, digits: int = 3, unit: str | None = None) -> str:
    """``1536`` -> ``"1.50 KiB"``; whole bytes below 1 KiB print exactly (``"150 B"``)."""
    if _bad(n):
        return MISSING
    if unit is None:
        unit, factor = size_unit(n)  # type: ignore[arg-type]
    else:
        factor = SIZE_UNITS[unit.lower()]
    if unit == "B" and float(n).is_integer():  # type: ignore[arg-type]
        return f"{int(n)} B"  # type: ignore[arg-type]
    return f"{significant(n / factor, digits)} {unit}"  # type: ignore[operator]


def format_count(v: float | int | None, digits: int = 3) -> str:
    """Counts and per-request figures: ``812``, ``12.3k``, ``4.56M``, ``0.25``."""
    if _bad(v):
        return MISSING
    a = abs(v)  # type: ignore[arg-type]
    if a >= 1e9:
        return f"{significant(v / 1e9, digits)}G"  # type: ignore[operator]
    if a >= 1e6:
        return f"{significant(v / 1e6, digits)}M"  # type: ignore[operator]
    if a >= 1e4:
        return f"{significant(v / 1e3, digits)}k"  # type: ignore[operator]
    if float(v).is_integer():  # type: ignore[arg-type]
        return str(int(v))  # type: ignore[arg-type]
    return significant(v, digits)  # type: ignore[arg-type]


def format_rate(v: float | None, unit: str = "/s", digits: int = 3) -> str:
    """``12345.6`` -> ``"12.3k/s"``."""
    s = format_count(v, digits)
    return s if s == MISSING else f"{s}{unit}"


def format_byte_rate(v: float | None, digits: int = 3) -> str:
    """Bytes per second: ``"11.8 MiB/s"``."""
    s = format_bytes(v, digits)
    return s if s == MISSING else f"{s}/s"


def format_percent(frac: float | None, digits: int = 1, sign: bool = False) -> str:
    """A fraction as a percentage: ``0.1234`` -> ``"12.3%"`` (``"+12.3%"`` with sign)."""
    if _bad(frac):
        return MISSING
    return f"{frac * 100:{'+' if sign else ''}.{digits}f}%"  # type: ignore[operator]


def format_change(frac: float | None) -> str:
    """A relative change for comparison tables: ``+12.3%`` / ``-4.0%`` / ``±0.0%``."""
    if _bad(frac):
        return MISSING
    if round(frac * 100, 1) == 0:  # type: ignore[operator]
        return "±0.0%"
    return format_percent(frac, 1, sign=True)


# --------------------------------------------------------------------------
# parsing

_NUM = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([^\d\s].*?)?\s*$")


def _split(text: str, what: str) -> tuple[float, str]:
    if not isinstance(text, str):
        raise TypeError(f"{what}: expected a string, not {type(text).__name__}")
    m = _NUM.match(text)
    if not m:
        raise ValueError(f"{what} {text!r}: expected a number with an optional unit, e.g. '2ms'")
    num = float(m.group(1))
    if not math.isfinite(num):
        raise ValueError(f"{what} {text!r}: must be finite")
    return num, (m.group(2) or "")


def parse_duration(text: str | float | int, default_unit: str | None = None,
                   unit: str = "ns") -> float:
    """``"2ms"`` -> ``2e6`` (ns). Units: ns, us/µs/μs, ms, s, min, h.

    A bare number needs ``default_unit`` (a bare "2" is ambiguous); numbers
    (int/float) are taken in ``default_unit`` too. ``unit`` is the unit of the
    returned value (default ns; "s" for seconds). ValueError on anything else.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if default_unit is None:
            raise ValueError(f"duration {text!r}: a number needs a unit, e.g. '{text}ms'")
        num, u = float(text), default_unit
    else:
        num, u = _split(text, "duration")  # type: ignore[arg-type]
        if u == "":
            if default_unit is None:
                if num == 0:
                    return 0.0
                raise ValueError(f"duration {text!r}: missing unit; use ns, us, ms or s")
            u = default_unit
    key = u if u in DURATION_UNITS else u.lower()
    if key not in DURATION_UNITS:
        raise ValueError(f"duration {text!r}: unknown unit {u!r}; use ns, us/µs, ms, s, min or h")
    return num * DURATION_UNITS[key] / DURATION_UNITS[unit]


def parse_size(text: str | float | int) -> float:
    """``"300KiB"`` -> ``307200.0`` bytes. KiB/MiB/GiB (and K/M/G) binary; kB/MB/GB decimal.

    A bare number is bytes. ValueError on an unknown unit.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    num, u = _split(text, "size")  # type: ignore[arg-type]
    key = u.lower()
    if key == "":
        return num
    if key not in SIZE_UNITS:
        raise ValueError(f"size {text!r}: unknown unit {u!r}; use B, KiB, MiB, GiB, kB, MB or GB")
    return num * SIZE_UNITS[key]


def parse_percent(text: str | float | int) -> float:
    """``"5%"`` -> ``0.05``; a bare number is already a fraction (``"0.05"`` -> 0.05)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    num, u = _split(text, "percentage")  # type: ignore[arg-type]
    if u == "%":
        return num / 100.0
    if u == "":
        return num
    raise ValueError(f"percentage {text!r}: expected '5%' or a fraction like 0.05")


def parse_count(text: str | float | int) -> float:
    """``"12k"`` -> ``12000.0``; ``"1.5M"`` -> ``1.5e6``; optional ``/s`` suffix ignored."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    num, u = _split(text, "count")  # type: ignore[arg-type]
    key = u.lower().removesuffix("/s").strip()
    if key not in _COUNT_UNITS:
        raise ValueError(f"count {text!r}: unknown suffix {u!r}; use k, M or G")
    return num * _COUNT_UNITS[key]


def parse_quantity(text: str) -> tuple[float, str]:
    """Parse any quantity by its unit: returns ``(value_in_base_units, kind)``.

    kind is "duration" (ns), "size" (bytes), "byterate" (bytes/s), "ratio"
    (fraction) or "count" (plain number, k/M/G suffixes). ValueError when the
    unit is unknown.
    """
    num, u = _split(text, "quantity")
    if u == "%":
        return num / 100.0, "ratio"
    if u in DURATION_UNITS and u not in ("m",):
        return parse_duration(text), "duration"
    low = u.lower()
    if low.endswith("/s") and low[:-2] in SIZE_UNITS and low[:-2] not in ("k", "m", "g"):
        return num * SIZE_UNITS[low[:-2]], "byterate"
    if low in SIZE_UNITS and low not in ("k", "m", "g"):
        return num * SIZE_UNITS[low], "size"
    if low.removesuffix("/s") in _COUNT_UNITS:
        return parse_count(text), "count"
    raise ValueError(
        f"quantity {text!r}: unknown unit {u!r} (durations: ns us ms s; sizes: B KiB MiB; "
        f"ratios: %; counts: k M)"
    )
