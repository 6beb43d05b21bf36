"""How one set of per-round values differs from a baseline's.

Timed figures (CPU/request, p50) are noisy: :func:`ratio_delta` gives the
ratio of medians with a 95 % percentile-bootstrap confidence interval (both
samples resampled independently, a fixed seed so a report is reproducible)
and Welch's t-test on the logarithms of the per-round values (a ratio is a
difference of logs). Allocation and GC counts are deterministic for a given
code path: :func:`exact_delta` reports the difference of medians as it is.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from typing import Any

from ._stats import welch_t_test

__all__ = ["DELTA_METRICS", "BOOTSTRAP_RESAMPLES", "exact_delta", "format_delta", "ratio_delta"]

# (row column, label, kind) of a version delta line, in order: the columns are the
# DataFrame's (``_rows``), and so are the keys of the saved deltas
DELTA_METRICS = (
    ("cpu_ns_per_request", "CPU", "ratio"),
    ("p50_ns", "p50", "ratio"),
    ("rps", "req/s", "ratio"),
    ("allocs_per_request", "allocs", "exact"),
    ("native_allocs_per_request", "native allocs", "exact"),
    ("gc_per_10k", "GC/10k", "exact"),
    ("peak_rss_bytes", "peak RSS", "ratio"),
)

BOOTSTRAP_RESAMPLES = 2000
TEST = "Welch's t-test on log per-round values; 95% CI: percentile bootstrap of the ratio of medians"


def _clean(xs: Sequence[float]) -> list[float]:
    return [float(x) for x in xs if x is not None and not math.isnan(x)]


def ratio_delta(base: Sequence[float], cand: Sequence[float], seed: int = 0) -> dict[str, Any]:
    """``{"ratio", "lo", "hi", "p", "n_base", "n_cand"}``: cand/base of medians.

    ``lo``/``hi`` bound the ratio (95 %); ``p`` is None with fewer than two
    rounds on either side; NaNs when a median is not positive.
    """
    a, b = _clean(base), _clean(cand)
    out: dict[str, Any] = {"ratio": math.nan, "lo": math.nan, "hi": math.nan, "p": None,
                           "n_base": len(a), "n_cand": len(b)}
    if not a or not b:
        return out
    ma, mb = statistics.median(a), statistics.median(b)
    if ma <= 0 or mb < 0:
        return out
    out["ratio"] = mb / ma
    rng = random.Random(seed)
    ratios = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        ra = statistics.median(rng.choices(a, k=len(a)))
        rb = statistics.median(rng.choices(b, k=len(b)))
        if ra > 0:
            ratios.append(rb / ra)
    if ratios:
        ratios.sort()
        out["lo"] = ratios[int(0.025 * (len(ratios) - 1))]
        out["hi"] = ratios[int(math.ceil(0.975 * (len(ratios) - 1)))]
    if len(a) >= 2 and len(b) >= 2:
        if min(a) > 0 and min(b) > 0:
            out["p"] = welch_t_test([math.log(x) for x in a], [math.log(x) for x in b])
        else:
            out["p"] = welch_t_test(a, b)
    return out


def exact_delta(base: Sequence[float], cand: Sequence[float]) -> dict[str, Any]:
    """``{"delta", "ratio", "base", "cand"}``: difference (and ratio) of medians."""
    a, b = _clean(base), _clean(cand)
    if not a or not b:
        return {"delta": math.nan, "ratio": math.nan, "base": math.nan, "cand": math.nan}
    ma, mb = statistics.median(a), statistics.median(b)
    return {"delta": mb - ma, "ratio": mb / ma if ma else math.nan, "base": ma, "cand": mb}


def _pct(r: float) -> str:
    return f"{(r - 1) * 100:+.0f} %".replace("-", "\u2212")


def format_delta(kind: str, d: dict[str, Any], unit: str = "") -> str:
    """One metric's delta as text: ``CPU −18 % [−21, −15] p=0.004`` or ``allocs +5.0/req``."""
    if kind == "ratio":
        if math.isnan(d.get("ratio", math.nan)):
            return "n/a"
        s = _pct(d["ratio"])
        if not math.isnan(d.get("lo", math.nan)):
            lo = f"{(d['lo'] - 1) * 100:+.0f}".replace("-", "\u2212")
            hi = f"{(d['hi'] - 1) * 100:+.0f}".replace("-", "\u2212")
            s += f" [{lo}, {hi}]"
        if d.get("p") is not None:
            p = d["p"]
            s += f" p={p:.3f}" if p >= 0.001 else " p<0.001"
        return s
    delta = d.get("delta", math.nan)
    if math.isnan(delta):
        return "n/a"
    s = f"{delta:+.1f}{unit}".replace("-", "\u2212")
    if not math.isnan(d.get("ratio", math.nan)) and d["ratio"] != 1:
        s += f" ({_pct(d['ratio'])})"
    return s
