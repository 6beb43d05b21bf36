"""Statistics on repeated measurements (no scipy): medians, spread, and the two
significance tests baseline comparisons use (Welch's t-test, Mann–Whitney U)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["mann_whitney_u", "median", "median_ci", "median_spread", "spread", "welch_t_test"]


def _finite(xs: Sequence[float]) -> list[float]:
    return [x for x in xs if x is not None and not math.isnan(x)]


def median(xs: Sequence[float]) -> float:
    """Median of the finite values; NaN when there are none."""
    v = _finite(xs)
    return statistics.median(v) if v else math.nan


def median_spread(values: Sequence[float]) -> tuple[float, float]:
    """(median, relative spread (max-min)/median) of finite values; NaNs when none."""
    v = _finite(values)
    if not v:
        return math.nan, math.nan
    med = statistics.median(v)
    if len(v) < 2 or med == 0:
        return med, 0.0
    return med, (max(v) - min(v)) / abs(med)


def median_ci(xs: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """(low, high, coverage): distribution-free order-statistic CI of the median.

    The narrowest symmetric pair of order statistics whose coverage is at least
    ``level``; with too few values for that, min..max and its (lower) coverage,
    1 - 2**(1-n) (75 % for 3 values, 94 % for 5). NaNs when there are none.
    """
    v = sorted(_finite(xs))
    n = len(v)
    if n == 0:
        return math.nan, math.nan, math.nan
    if n == 1:
        return v[0], v[0], 0.0

    def coverage(k: int) -> float:  # P(x_(k) <= median <= x_(n-k+1)), 1-based k
        return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n

    k = 1
    while k + 1 <= n // 2 and coverage(k + 1) >= level:
        k += 1
    return v[k - 1], v[n - k], coverage(k)


def spread(xs: Sequence[float]) -> float:
    """Half the range relative to the median (0.05 == ±5%); NaN for < 2 values."""
    v = _finite(xs)
    if len(v) < 2 or statistics.median(v) == 0:
        return math.nan
    return median_spread(v)[1] / 2


def _betacf(a: float, b: float, x: float) -> float:
    # Continued fraction of the incomplete beta function (modified Lentz).
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's unequal-variance t-test (needs >= 2 values each).

    Both samples constant: p = 1 when their values are equal, 0 when they differ
    (deterministic figures such as allocation counts).
    """
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        raise ValueError("welch_t_test needs at least 2 values per sample")
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va, vb = statistics.variance(a), statistics.variance(b)
    se2 = va / na + vb / nb
    if se2 == 0.0:
        return 1.0 if ma == mb else 0.0
    t = (ma - mb) / math.sqrt(se2)
    df = se2**2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    return _betainc(df / 2.0, 0.5, df / (df + t * t))


def _mwu_exact_cdf(m: int, n: int) -> list[float]:
    """P(U <= u) for u = 0..m*n under H0, no ties (counts arrangements by DP)."""
    # f[j][u]: number of arrangements of i x's and j y's with U == u, built over i.
    prev = [[1] + [0] * (m * n) for _ in range(n + 1)]  # i = 0: U = 0 for any j
    for i in range(1, m + 1):
        cur = [[0] * (m * n + 1) for _ in range(n + 1)]
        cur[0][0] = 1
        for j in range(1, n + 1):
            for u in range(i * j + 1):
                # last element is an x (it beats all j y's) or a y (adds nothing)
                v = cur[j - 1][u]
                if u >= j:
                    v += prev[j][u - j]
                cur[j][u] = v
        prev = cur
    counts = prev[n]
    total = math.comb(m + n, m)
    cdf, acc = [], 0
    for c in counts:
        acc += c
        cdf.append(acc / total)
    return cdf


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann–Whitney U test: (U of ``a``, p-value).

    Exact distribution for small samples without ties (m, n <= 20); otherwise
    the normal approximation with tie correction and continuity correction.
    """
    m, n = len(a), len(b)
    if m == 0 or n == 0:
        raise ValueError("mann_whitney_u needs non-empty samples")
    allv = sorted([(x, 0) for x in a] + [(y, 1) for y in b])
    ranks = [0.0] * len(allv)
    ties = []
    i = 0
    while i < len(allv):
        j = i
        while j + 1 < len(allv) and allv[j + 1][0] == allv[i][0]:
            j += 1
        r = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[k] = r
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    ra = sum(r for r, (_, g) in zip(ranks, allv, strict=True) if g == 0)
    u = ra - m * (m + 1) / 2.0
    if not ties and m <= 20 and n <= 20:
        cdf = _mwu_exact_cdf(m, n)
        lo = min(u, m * n - u)
        p = min(1.0, 2.0 * cdf[int(round(lo))])
        return u, p
    mu = m * n / 2.0
    tie_term = sum(t**3 - t for t in ties) / ((m + n) * (m + n - 1)) if ties else 0.0
    var = m * n / 12.0 * ((m + n + 1) - tie_term)
    if var <= 0:
        return u, 1.0
    z = (abs(u - mu) - 0.5) / math.sqrt(var)
    p = math.erfc(max(z, 0.0) / math.sqrt(2.0))
    return u, min(1.0, p)

