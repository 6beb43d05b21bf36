"""Progress bars (tqdm.auto) for bench and compare, shown only when interactive."""

from __future__ import annotations

import os
import sys
from typing import Any

from . import _units as U
from ._results import BenchResult

__all__ = [
    "ProgressBar",
    "interactive",
    "progress_bar",
]


# --------------------------------------------------------------------------
# progress bars


def interactive() -> bool:
    """True in a Jupyter kernel or on a terminal, False under CI or with output redirected."""
    if os.environ.get("CI") or os.environ.get("HTTPBENCH_NO_PROGRESS"):
        return False
    ip_mod = sys.modules.get("IPython")
    if ip_mod is not None:
        try:
            ip = ip_mod.get_ipython()
        except AttributeError:
            ip = None
        if ip is not None and "IPKernelApp" in getattr(ip, "config", {}):
            return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _tqdm_class() -> Any:
    """tqdm.auto's bar, except in a notebook without ipywidgets: there tqdm.auto warns
    (TqdmWarning: IProgress not found) and the plain text bar is what shows anyway."""
    import importlib.util

    if importlib.util.find_spec("ipywidgets") is None:
        from tqdm.std import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm


class ProgressBar:
    """A tqdm.auto progress bar (a widget in Jupyter, a line on a terminal) usable
    as ``bench(..., progress=bar)`` (it takes bench's Progress snapshots) or as a
    message callback (``compare(progress=bar)``). Disabled - a no-op - when not
    interactive or when tqdm is not installed.
    """

    def __init__(self, desc: str = "", total: float | None = None,
                 enable: bool | None = None) -> None:
        self.desc = desc
        self._bar: Any = None
        self._total = total
        self.enabled = interactive() if enable is None else bool(enable)
        if self.enabled:
            try:
                self._tqdm = _tqdm_class()
            except ImportError:
                self.enabled = False

    def _ensure(self, total: float | None, unit: str) -> Any:
        if self._bar is None and self.enabled:
            self._bar = self._tqdm(total=total if total is not None else self._total,
                                   desc=self.desc, unit=unit, leave=True, dynamic_ncols=True)
        return self._bar

    def __call__(self, p: Any) -> None:
        if not self.enabled:
            return
        if isinstance(p, str):
            bar = self._ensure(None, "it")
            bar.set_postfix_str(p[-60:], refresh=True)
            return
        if getattr(p, "warming_up", False):
            bar = self._ensure(p.total or p.duration_s, "req" if p.total else "s")
            bar.set_postfix_str("warming up", refresh=True)
            return
        if getattr(p, "total", None):
            bar = self._ensure(p.total, "req")
            bar.n = min(p.completed, p.total)
        else:
            bar = self._ensure(getattr(p, "duration_s", None), "s")
            bar.n = round(p.elapsed_s, 1)
        extra = {}
        if getattr(p, "p50_ns", 0):
            extra = {"p50": U.format_duration(p.p50_ns), "p99": U.format_duration(p.p99_ns)}
        bar.set_postfix(ok=p.ok, failed=p.failed, **extra, refresh=False)
        bar.refresh()

    def close(self, result: Any = None) -> None:
        """Finish the bar (idempotent); given the run's BenchResult, show its final count."""
        if self._bar is not None:
            if isinstance(result, BenchResult):
                if result.config.n:
                    self._bar.n = result.responses + result.errors
                else:
                    self._bar.n = round(result.duration_ns / 1e9, 1)
                self._bar.set_postfix(ok=result.successes, failed=result.failures,
                                      refresh=False)
                self._bar.refresh()
            self._bar.close()
            self._bar = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def progress_bar(desc: str = "", total: float | None = None,
                 enable: bool | None = None) -> ProgressBar:
    """A :class:`ProgressBar` (tqdm.auto; off when not interactive)."""
    return ProgressBar(desc, total, enable)
