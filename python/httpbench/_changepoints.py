"""Change points of one series, found by Apache Otava (E-Divisive means with a t-test).

Otava (formerly DataStax's Hunter) splits a series where the distance between
the values before and after is largest, keeps a split when Student's t-test
between the two segments gives a p-value below ``max_pvalue`` and the relative
change exceeds ``min_change``, and merges back the weak ones. Unlike the
original E-Divisive permutation test it is deterministic: the same series gives
the same change points on every run.

This module adds what a reader of a regression needs: the relative change with
its 95 % confidence interval (Welch's interval of the difference of the segment
means, by the delta method for the ratio) and which way is worse for a metric.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_PVALUE", "DEFAULT_WINDOW", "ChangePoint", "DetectorUnavailable",
           "detect", "higher_is_better"]

# 0.001 per test is not 0.001 per series: Otava tries every split of every window, so on
# 200 runs of pure noise (3 % CV) it found 0.32 false changes per series at 0.001, 0.02 at
# 1e-4 (50 seeds); an 8 % step in 3 % noise over 40 runs still gives p ~ 1e-7
DEFAULT_MAX_PVALUE = 1e-4
DEFAULT_WINDOW = 50  # Otava's sliding window: a change is judged among this many runs

# metrics where a larger value is better; every other one is a cost
_HIGHER_BETTER = {"rps", "bytes_in_per_s", "calls_per_s"}


class DetectorUnavailable(ImportError):
    """The change-point library is not installed."""


def higher_is_better(metric: str) -> bool:
    base = metric.split("@", 1)[0]
    return base in _HIGHER_BETTER or base.endswith("_per_s")


@dataclass(frozen=True)
class ChangePoint:
    """A change between ``values[index - 1]`` and ``values[index]``."""

    index: int  # first value after the change
    before: int  # values in the segment before (back to the previous change point)
    after: int  # values in the segment after (up to the next one)
    mean_before: float
    mean_after: float
    change: float  # mean_after / mean_before - 1
    ci: tuple[float, float]  # 95 % confidence interval of change
    pvalue: float

    @property
    def ci_halfwidth(self) -> float:
        return (self.ci[1] - self.ci[0]) / 2


def _t975(df: float) -> float:
    from scipy.stats import t  # Otava's own dependency

    return float(t.ppf(0.975, df)) if df > 0 and math.isfinite(df) else 1.959964


def _interval(left: Sequence[float], right: Sequence[float]) -> tuple[float, float, float,
                                                                       float, float]:
    """(mean_before, mean_after, change, ci_low, ci_high) of right against left."""
    n1, n2 = len(left), len(right)
    m1, m2 = sum(left) / n1, sum(right) / n2
    v1 = sum((x - m1) ** 2 for x in left) / (n1 - 1) if n1 > 1 else 0.0
    v2 = sum((x - m2) ** 2 for x in right) / (n2 - 1) if n2 > 1 else 0.0
    if m1 == 0:
        return m1, m2, math.nan, math.nan, math.nan
    change = m2 / m1 - 1
    a, b = v1 / n1, v2 / n2
    # delta method for m2/m1: var ~ b/m1^2 + m2^2 a/m1^4
    se = math.sqrt(b / m1 ** 2 + m2 ** 2 * a / m1 ** 4)
    df = (a + b) ** 2 / ((a * a / (n1 - 1) if n1 > 1 else 0) + (b * b / (n2 - 1) if n2 > 1 else 0)
                         ) if (a + b) > 0 and n1 > 1 and n2 > 1 else math.inf
    h = _t975(df) * se
    return m1, m2, change, change - h, change + h


def detect(values: Sequence[float], *, max_pvalue: float = DEFAULT_MAX_PVALUE,
           min_change: float = 0.0, window: int = DEFAULT_WINDOW) -> list[ChangePoint]:
    """The change points of ``values`` (oldest first), each significant at ``max_pvalue``
    and larger than ``min_change`` (relative, e.g. 0.02) in magnitude."""
    if not 0 < max_pvalue < 1:
        raise ValueError(f"max_pvalue must be in (0, 1), not {max_pvalue!r}")
    if min_change < 0:
        raise ValueError(f"min_change must be >= 0, not {min_change!r}")
    if window < 4:
        raise ValueError(f"window must be at least 4 runs, not {window!r}")
    vals = [float(v) for v in values]
    if any(not math.isfinite(v) for v in vals):
        raise ValueError("a series value is not finite")
    if len(vals) < 4:
        return []
    try:
        from otava.analysis import compute_change_points
    except ImportError as exc:
        raise DetectorUnavailable(
            f"change-point detection needs Apache Otava (pip install 'httpbench[history]'): "
            f"{exc}") from None
    found, _ = compute_change_points(vals, window_len=window, max_pvalue=max_pvalue,
                                     min_magnitude=min_change)
    idx = sorted(int(cp.index) for cp in found)
    out = []
    for k, i in enumerate(idx):
        lo = idx[k - 1] if k else 0
        hi = idx[k + 1] if k + 1 < len(idx) else len(vals)
        cp = next(c for c in found if int(c.index) == i)
        m1, m2, change, c_lo, c_hi = _interval(vals[lo:i], vals[i:hi])
        p = float(cp.stats.pvalue)
        out.append(ChangePoint(index=i, before=i - lo, after=hi - i, mean_before=m1,
                               mean_after=m2, change=change, ci=(c_lo, c_hi),
                               pvalue=p if math.isfinite(p) else 0.0))
    return out
