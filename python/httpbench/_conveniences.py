"""The records' convenience methods, filled in from above.

A record offers ``summary()``, ``plot()``, ``to_dataframe()``, Jupyter's
``_repr_mimebundle_`` and ``assert_budget()``, but records never import the
presentation or policy layers that compute them: those layers register the
functions here (``_recordviews``, which ``import httpbench`` loads), and the
record's method calls what is registered. Nothing is imported here, so the
registry costs ``import httpbench`` nothing.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs more to import than this module (see __init__)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["CONVENIENCES", "call", "register"]

# method name -> function(record, *args, **kwargs)
CONVENIENCES = ("summary", "plot", "to_dataframe", "mimebundle", "assert_budget",
                "history_plot")
_registered: dict[str, Callable[..., Any]] = {}


def register(name: str) -> Callable[[F], F]:
    """Decorator: ``fn`` computes the records' ``name`` convenience."""
    if name not in CONVENIENCES:
        raise ValueError(f"unknown record convenience {name!r}; one of {CONVENIENCES}")

    def deco(fn: F) -> F:
        _registered[name] = fn
        return fn

    return deco


def call(name: str, record: Any, *args: Any, **kwargs: Any) -> Any:
    """Run the registered ``name`` convenience on ``record``."""
    try:
        fn = _registered[name]
    except KeyError:
        raise RuntimeError(f"{type(record).__name__}.{name}() is not available: the module "
                           "that registers it (httpbench._recordviews) was not imported") from None
    return fn(record, *args, **kwargs)
