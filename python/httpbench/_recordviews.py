"""The records' conveniences (``summary()``, ``plot()``, ``to_dataframe()``, Jupyter's
rich display, ``assert_budget()``), registered on them by the presentation and policy
layers that compute them.

``import httpbench`` imports this module, so every record has its conveniences; what
they need (tables, matplotlib, budgets) is imported on the first call only.
"""

from __future__ import annotations

from ._conveniences import register

TYPE_CHECKING = False  # typing costs more to import than this module (see __init__)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["assert_budget", "history_plot", "mimebundle", "plot", "summary", "to_dataframe"]


@register("to_dataframe")
def to_dataframe(record: Any) -> Any:
    from ._resulttables import to_dataframe

    return to_dataframe(record)


@register("summary")
def summary(record: Any, fmt: str = "text") -> str:
    from ._resulttables import format_result

    return format_result(record, fmt)


@register("plot")
def plot(record: Any, kind: str = "percentiles", **kwargs: Any) -> Any:
    from .plot import plot

    return plot(record, kind=kind, **kwargs)


@register("mimebundle")
def mimebundle(record: Any) -> dict[str, str]:
    from ._htmlreport import mimebundle

    return mimebundle(record)


@register("assert_budget")
def assert_budget(record: Any, **budget: Any) -> list[Any]:
    from ._budget import assert_budget

    return assert_budget(record, **budget)


@register("history_plot")
def history_plot(history: Any, series: Any, findings: Any, **kwargs: Any) -> Any:
    """``History.plot()``: the series' trends with their change points."""
    from ._historyplot import plot_series

    return plot_series(series, findings, **kwargs)

