"""HTML of results: tables, the one-file report and diff pages, Jupyter's rich display."""

from __future__ import annotations

import os
from typing import Any

from ._abreport import format_report
from ._baseline import Comparison, diff
from ._cmptables import caption, compare_table, skip_lines
from ._machine import placement_lines
from ._results import BenchResult, MeasureResult, ResultSet
from ._resulttables import (
    BENCH_COLS,
    MEASURE_COLS,
    format_result,
    group_table,
    measure_rows,
)
from ._rows import cell_rows, result_rows

__all__ = [
    "html_diff",
    "html_diff_fragment",
    "html_fragment",
    "html_report",
    "html_tables",
    "mimebundle",
    "write_html",
]


# --------------------------------------------------------------------------
# Jupyter


def html_tables(obj: Any) -> str:
    """The tables of a result as HTML: per scenario with their ± and notes, then notes
    and skipped clients; a measure record's metrics; a bench run's row and report."""
    from ._html import e, scroll, table

    parts: list[str] = []
    if isinstance(obj, ResultSet):
        rows = result_rows(obj)
        order = list(obj.metadata.get("scenario_order") or [])
        order += [s for s in obj.scenarios if s not in order]
        descs = obj.metadata.get("scenarios") or {}
        for sc in order:
            srows = [r for r in rows if r["scenario"] == sc]
            if not srows:
                continue
            nrep = max(r["repeat"] for r in srows) + 1
            desc = (descs.get(sc) or {}).get("description") or ""
            cells = cell_rows(obj, sc)  # measured cells: compare's own table, notes and all
            if cells:
                cap, grid = caption(cells, obj.metadata, sc), compare_table(cells, "html")
            else:
                cap = (f"medians of {nrep} repeats ± half the range" if nrep > 1
                       else "one repeat")
                grid = group_table(srows, "html", BENCH_COLS)
            name = sc if sc.strip("-") else str(obj.metadata.get("source") or "results")
            where = "".join(f'<p class="caption">{e(ln.strip())}</p>'
                            for ln in placement_lines(obj.metadata, sc))
            parts.append(f"<h3>{e(name)}</h3>"
                         + (f'<p class="caption">{e(desc)} ({e(cap)})</p>' if desc else
                            f'<p class="caption">{e(cap)}</p>')
                         + where + scroll(grid))
        if obj.notes:
            seen: dict[tuple[str, str, str], list[Any]] = {}
            for n in obj.notes:
                seen.setdefault((n.kind, n.client, n.scenario), []).append(n)
            items = []
            for (kind, client, sc), ns in seen.items():
                where = "/".join(x for x in (client, sc) if x)
                more = f" (in {len(ns)} rounds)" if len(ns) > 1 else ""
                items.append(f"<li>[{e(kind)}] {e(where + ': ' if where else '')}"
                             f"{e(ns[0].message)}{e(more)}</li>")
            parts.append('<h3>Notes</h3><ul class="notes">' + "".join(items) + "</ul>")
        if obj.skipped:
            parts.append('<h3>Skipped</h3><ul class="notes">' + "".join(
                f"<li>{e(line)}</li>" for line in skip_lines(obj.skipped)) + "</ul>")
    elif isinstance(obj, MeasureResult):
        parts.append(f"<h3>measure: {e(obj.label)}</h3>"
                     + table(["metric", "value"], measure_rows(obj)))
    elif isinstance(obj, BenchResult):
        rows = result_rows(obj)
        parts.append(scroll(group_table(rows, "html", BENCH_COLS)))
        parts.append("<h3>Load-test report</h3><pre>" + e(format_report(obj)) + "</pre>")
    else:
        rows = result_rows(obj)
        cols = BENCH_COLS if rows and rows[0]["kind"] == "bench" else MEASURE_COLS
        parts.append(scroll(group_table(rows, "html", cols)))
    return "\n".join(parts)


def html_fragment(obj: Any, *, plots: bool = True, prefix: str = "f") -> str:
    """The one-file report's content without the page around it (what Jupyter shows)."""
    from ._html import result_fragment

    return result_fragment(obj, html_tables(obj), plots=plots, prefix=prefix)


def html_report(obj: Any, *, plots: bool = True) -> str:
    """One self-contained HTML page of a result: tables, figures (inline SVG), machine
    and run; it loads nothing from anywhere."""
    from ._html import page, title

    return page(title(obj), html_fragment(obj, plots=plots))


def html_diff_fragment(baseline: Any, current: Any, cmp: Comparison | None = None, *,
                       names: tuple[str, str] = ("baseline", "current"), plots: bool = True,
                       prefix: str = "d") -> str:
    """Two runs side by side (settings, notes on how they are unlike, verdicts, each
    run's tables and figures), without the page around it."""
    from ._html import diff_fragment
    from ._rows import as_set

    base, cur = as_set(baseline), as_set(current)
    if cmp is None:
        cmp = diff(base, cur)
    return diff_fragment(base, cur, cmp, (html_tables(base), html_tables(cur)), names=names,
                         plots=plots, prefix=prefix)


def html_diff(baseline: Any, current: Any, cmp: Comparison | None = None, *,
              names: tuple[str, str] = ("baseline", "current"), plots: bool = True) -> str:
    """One self-contained HTML page comparing two runs."""
    from ._html import page

    return page(f"httpbench diff: {names[0]} → {names[1]}",
                html_diff_fragment(baseline, current, cmp, names=names, plots=plots))


def write_html(obj: Any, path: str | os.PathLike[str], *, plots: bool = True) -> str:
    """Write :func:`html_report` of ``obj`` to ``path``; returns the path written."""
    p = os.fspath(path)
    text = html_report(obj, plots=plots)
    with open(p, "w", encoding="utf-8") as f:
        f.write(text)
    return p


def mimebundle(obj: Any) -> dict[str, str]:
    """Jupyter rich display: the text table, and as HTML the content of the one-file
    report (``httpbench report --html``): tables, inline SVG figures, machine and run."""
    return {"text/plain": format_result(obj, "text"), "text/html": html_fragment(obj)}
