"""The one table renderer (aligned text, Markdown, CSV, HTML) and the cell
formatting tables share: a median over repeats with its spread, in one unit
per column."""

from __future__ import annotations

import csv
import html
import io
import math
import statistics
from collections.abc import Iterable, Sequence

from . import _units as U
from ._stats import median, median_ci, spread

__all__ = ["ci_pm", "column_unit", "median_cell", "median_ci_cell", "number", "render_table"]

# Text styles: (column separator, separator of the rule under the header or None,
# header aligned like its column).
_STYLES = {
    "plain": ("  ", "  ", True),  # header, dashes, rows
    "grid": (" | ", "-+-", False),  # header left-aligned, "-+-" rule
    "bare": ("  ", None, True),  # no rule under the header
}


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]], fmt: str = "text",
                 *, align: str | None = None, style: str = "plain") -> str:
    """``rows`` under ``headers`` as a table; no trailing newline.

    ``fmt``: "text" (columns padded, trailing blanks stripped; ``style``
    "plain", "grid" or "bare"), "md" (a Markdown table), "csv" or "html".
    ``align``: one letter per column, "l" or "r" (default: all left).
    """
    ncol = len(headers)
    al = (align or "l" * ncol).ljust(ncol, "l")
    if fmt == "md":
        esc = [[c.replace("|", "\\|") for c in r] for r in rows]
        out = ["| " + " | ".join(headers) + " |",
               "|" + "|".join(":---" if a == "l" else "---:" for a in al[:ncol]) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in esc]
        return "\n".join(out)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(headers)
        w.writerows(rows)
        return buf.getvalue().rstrip("\n")
    if fmt == "html":
        def td(tag: str, j: int, c: str) -> str:
            side = "left" if al[j] == "l" else "right"
            return f'<{tag} style="text-align:{side};white-space:nowrap">{html.escape(c)}</{tag}>'

        out = ['<table class="httpbench">',
               "<tr>" + "".join(td("th", j, h) for j, h in enumerate(headers)) + "</tr>"]
        out += ["<tr>" + "".join(td("td", j, c) for j, c in enumerate(r)) + "</tr>"
                for r in rows]
        out.append("</table>")
        return "\n".join(out)
    if fmt != "text":
        raise ValueError(f"unknown table format {fmt!r}; use text, md, csv or html")
    sep, rule, header_aligned = _STYLES[style]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]

    def line(cells: Sequence[str], aligned: bool = True) -> str:
        return sep.join(c.rjust(w) if aligned and a == "r" else c.ljust(w)
                        for c, w, a in zip(cells, widths, al, strict=True)).rstrip()

    out = [line(headers, header_aligned)]
    if rule is not None:
        out.append(rule.join("-" * w for w in widths))
    out += [line(r) for r in rows]
    return "\n".join(out)


def number(v: float) -> str:
    """A bare number in a column whose unit is in the header."""
    if v is None or math.isnan(v):
        return U.MISSING
    return U.significant(v, 3) if abs(v) < 1e4 else f"{v:,.0f}"


def column_unit(values: Iterable[float], kind: str) -> str | None:
    """The one unit for a column of durations or sizes (None: each cell picks its own)."""
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return None
    m = statistics.median(vals)
    if kind == "duration":
        return U.duration_unit(m)[0]
    if kind == "size":
        return U.size_unit(m)[0]
    return None


def _value(m: float, kind: str, unit: str | None) -> str:
    if kind == "duration":
        return U.format_duration(m, unit=unit) if unit is None else number(m / U.DURATION_UNITS[unit])
    if kind == "size":
        return U.format_bytes(m) if unit is None else number(m / U.SIZE_UNITS[unit.lower()])
    if kind == "byterate":
        return U.format_byte_rate(m)
    return U.format_count(m)


def median_cell(values: Sequence[float], kind: str, unit: str | None = None) -> str:
    """Median of repeated values in readable units, with "±N%" half-range spread."""
    s = _value(median(values), kind, unit)
    sp = spread(values)
    if not math.isnan(sp) and s != U.MISSING:
        s += f" ±{sp * 100:.0f}%"
    return s


def ci_pm(low: float, high: float, med: float) -> str:
    """' ±N%': half the width of the median's confidence interval, relative to the
    median ('' when the interval or the median is unknown or zero)."""
    if any(x is None or math.isnan(x) for x in (low, high, med)) or not med:
        return ""
    return f" ±{(high - low) / abs(med) * 50:.0f}%"


def median_ci_cell(values: Sequence[float], kind: str, unit: str | None = None) -> str:
    """Median of repeated values in readable units, with "±N%" from the
    order-statistic confidence interval of the median (as compare's tables)."""
    s = _value(median(values), kind, unit)
    finite = [v for v in values if v is not None and not math.isnan(v)]
    if len(finite) < 2 or s == U.MISSING:
        return s
    low, high, _ = median_ci(finite)
    return s + ci_pm(low, high, median(finite))
