"""httpbench.Histogram: accuracy, merge, corrected recording, encoding, pickle, edges."""

from __future__ import annotations

import inspect
import math
import pickle
import random
from decimal import Decimal

import httpbench
import pytest
from httpbench import Histogram

N = 1_000_000
PS = [0, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99, 100]


def exact_percentile(sorted_values: list[int], p: float) -> int:
    """The ceil(p/100 * n)-th smallest value (at least the first), with exact decimal rank."""
    n = len(sorted_values)
    rank = math.ceil(Decimal(str(p)) / 100 * n)
    return sorted_values[max(rank, 1) - 1]


def distributions() -> dict[str, list[int]]:
    rng = random.Random(1234)
    return {
        "uniform": [rng.randrange(0, 10_000_000) for _ in range(N)],
        "lognormal": [int(rng.lognormvariate(13.0, 1.5)) for _ in range(N)],
        "exponential": [int(rng.expovariate(1 / 50_000)) for _ in range(N)],
        "bimodal": [
            rng.randrange(1000, 1500) if rng.random() < 0.9 else rng.randrange(50_000_000, 51_000_000)
            for _ in range(N)
        ],
    }


@pytest.fixture(scope="module")
def samples() -> dict[str, list[int]]:
    return distributions()


@pytest.mark.slow  # the 4 x 1M-sample fixture takes seconds to build
@pytest.mark.parametrize("dist", ["uniform", "lognormal", "exponential", "bimodal"])
@pytest.mark.parametrize("sigfigs", [2, 3])
def test_percentiles_within_configured_precision(samples, dist: str, sigfigs: int) -> None:
    values = samples[dist]
    h = Histogram(sigfigs=sigfigs)
    h.record_many(values)
    s = sorted(values)
    assert len(h) == h.count == N
    assert h.min == s[0]
    assert h.max == s[-1]
    tol = 10.0**-sigfigs
    for p in PS:
        exact = exact_percentile(s, p)
        got = h.percentile(p)
        # Reported as the bucket's highest equivalent value: never below the exact one.
        assert exact <= got <= exact + exact * tol, (dist, p, got, exact)
    got = h.percentiles([50, 90, 99, 99.9])
    assert list(got) == [50, 90, 99, 99.9]
    assert got[99.9] == h.percentile(99.9)
    mean = sum(values) / N
    assert abs(h.mean - mean) <= mean * tol
    # stddev from bucket midpoints vs the exact one.
    exact_sd = math.sqrt(sum((v - mean) ** 2 for v in values) / N)
    assert abs(h.stddev - exact_sd) <= exact_sd * 5 * tol


def test_default_percentiles_and_empty() -> None:
    h = Histogram()
    assert len(h) == 0 and h.count == 0
    assert h.min == 0 and h.max == 0 and h.mean == 0.0 and h.stddev == 0.0
    assert h.percentile(50) == 0
    assert h.percentiles() == {50: 0, 90: 0, 99: 0, 99.9: 0}
    assert list(h) == []
    h.record(1000)
    assert h.percentiles() == {50: 1000, 90: 1000, 99: 1000, 99.9: 1000}


def test_configuration_properties_and_errors() -> None:
    h = Histogram(lowest=1000, highest=10**9, sigfigs=2)
    assert (h.lowest, h.highest, h.sigfigs) == (1000, 10**9, 2)
    d = Histogram()
    assert (d.lowest, d.highest, d.sigfigs) == (1, 3_600_000_000_000, 3)
    for kwargs in (
        {"lowest": 0},
        {"lowest": 10, "highest": 15},
        {"sigfigs": 0},
        {"sigfigs": 6},
        {"highest": 2**62 + 1},
    ):
        with pytest.raises(ValueError):
            Histogram(**kwargs)
    with pytest.raises(ValueError):
        Histogram(lowest=-1)
    with pytest.raises(TypeError):
        Histogram(lowest=1.5)


def test_edge_values() -> None:
    h = Histogram(lowest=1000, highest=1_000_000, sigfigs=2)
    h.record(0)
    h.record(5)  # below lowest: shares the first bucket with 0
    assert h.min == 0 and h.max == 5
    assert h.percentile(100) == 5
    assert h.percentile(0) == 0  # p0 is the exact minimum, not the bucket's top
    assert len(list(h)) == 1
    assert h.saturated == 0
    h.record(5_000_000)  # above highest: clamped AND counted
    h.record(2**70, 2)  # beyond 64 bits saturates too
    assert h.count == 5
    assert h.saturated == 3
    assert h.max == 1_000_000
    assert h.percentile(100) == 1_000_000
    with pytest.raises(ValueError):
        h.record(-1)
    with pytest.raises(TypeError):
        h.record(1.5)
    with pytest.raises(TypeError):
        h.record("10")
    with pytest.raises(ValueError):
        h.record_corrected(10, -1)
    with pytest.raises(ValueError):
        h.percentile(101)
    with pytest.raises(ValueError):
        h.percentile(float("nan"))
    assert h.count == 5  # failed calls recorded nothing
    h.record(7, 0)
    assert h.count == 5
    h.reset()
    assert h.count == 0 and h.saturated == 0 and h.max == 0 and list(h) == []


def test_iteration_matches_buckets_and_percentiles() -> None:
    rng = random.Random(7)
    h = Histogram()
    values = [int(rng.lognormvariate(10, 2)) for _ in range(20_000)]
    h.record_many(values)
    pairs = list(h)
    assert sum(c for _, c in pairs) == len(h) == 20_000
    vals = [v for v, _ in pairs]
    assert vals == sorted(set(vals))
    buckets = h.buckets()
    assert [c for *_, c in buckets] == [c for _, c in pairs]
    for (lo, hi, _), (v, _) in zip(buckets, pairs, strict=True):
        assert lo <= v <= hi
    # Percentile at each cumulative boundary is that pair's value.
    cum = 0
    for v, c in pairs[:50]:
        cum += c
        assert h.percentile(cum * 100 / len(h) * (1 - 1e-9)) == v
    assert pairs[-1][0] == h.max


@pytest.mark.slow  # the 4 x 1M-sample fixture takes seconds to build
def test_merge_equals_union(samples) -> None:
    values = samples["lognormal"][:200_000]
    a, b, u = Histogram(), Histogram(), Histogram()
    a.record_many(values[::2])
    b.record_many(values[1::2])
    b.record(10**15)
    u.record_many(values)
    u.record(10**15)
    assert a != u
    a.merge(b)
    assert a == u
    assert a.saturated == 1
    assert list(a) == list(u)
    assert a.percentiles([50, 99, 99.9]) == u.percentiles([50, 99, 99.9])
    assert a.mean == u.mean


def test_merge_mismatch_and_type() -> None:
    a = Histogram()
    a.record(5)
    with pytest.raises(ValueError, match="differ"):
        a.merge(Histogram(sigfigs=2))
    with pytest.raises(ValueError):
        a.merge(Histogram(highest=10**9))
    with pytest.raises(TypeError):
        a.merge([1, 2, 3])
    assert a.count == 1


def test_record_corrected_matches_manual_backfill() -> None:
    # HdrHistogram's canonical example: 10,000 x 1 ms, then one 100 s stall, 10 ms interval.
    h, ref = Histogram(), Histogram()
    for _ in range(10_000):
        h.record_corrected(1_000_000, 10_000_000)
        ref.record(1_000_000)
    h.record_corrected(100_000_000_000, 10_000_000)
    ref.record(100_000_000_000)
    m = 100_000_000_000 - 10_000_000
    while m >= 10_000_000:
        ref.record(m)
        m -= 10_000_000
    assert h == ref
    assert h.count == 20_000
    assert 49e9 < h.percentile(75) < 51e9
    assert h.percentile(50) < 1_002_000
    # No correction for values at or below the interval, or interval 0.
    c = Histogram()
    c.record_corrected(500, 0)
    c.record_corrected(500, 500)
    c.record_corrected(999, 500)
    assert c.count == 3
    # Huge value / interval ratio is bucket-wise, not a 3.6e12-step loop.
    big = Histogram()
    big.record_corrected(3_600_000_000_000, 1)
    assert big.count == 3_600_000_000_000
    assert big.saturated == 0


def test_record_corrected_random_against_reference() -> None:
    rng = random.Random(99)
    for _ in range(100):
        interval = rng.randrange(1, 100_000)
        value = rng.randrange(0, 20_000_000)
        h, ref = Histogram(), Histogram()
        h.record_corrected(value, interval)
        ref.record(value)
        m = value - interval
        while value > interval and m >= interval:
            ref.record(m)
            m -= interval
        assert h == ref, (value, interval)


@pytest.mark.slow  # the 4 x 1M-sample fixture takes seconds to build
def test_encode_decode_round_trip(samples) -> None:
    h = Histogram()
    h.record_many(samples["exponential"][:100_000])
    h.record(0)
    h.record(10**20)
    data = h.encode()
    assert isinstance(data, bytes)
    assert data[:4] == b"HBH\x01"
    assert len(data) < 20_000  # run-length varints, far below 8 bytes per bucket
    d = Histogram.decode(data)
    assert d == h
    assert (d.count, d.saturated, d.min, d.max) == (h.count, h.saturated, h.min, h.max)
    assert list(d) == list(h)
    assert Histogram.decode(bytearray(data)) == h
    assert Histogram.decode(memoryview(data)) == h
    e = Histogram(lowest=100, highest=10**8, sigfigs=1)
    assert Histogram.decode(e.encode()) == e
    assert Histogram.decode(e.encode()).sigfigs == 1


def test_decode_rejects_corrupted_input() -> None:
    h = Histogram()
    rng = random.Random(5)
    h.record_many(rng.randrange(1, 10**9) for _ in range(5000))
    data = h.encode()
    for k in range(len(data)):
        with pytest.raises(ValueError):
            Histogram.decode(data[:k])
    with pytest.raises(ValueError):
        Histogram.decode(data + b"\x02")
    with pytest.raises(ValueError, match="version"):
        Histogram.decode(data[:3] + b"\x02" + data[4:])
    accepted = 0
    for k in range(len(data)):
        bad = bytearray(data)
        bad[k] ^= 1 << (k % 8)
        try:
            d = Histogram.decode(bytes(bad))
        except ValueError:
            continue
        accepted += 1
        assert d != h  # a flip that still decodes must change the content
    assert accepted < len(data) // 10
    for _ in range(500):
        junk = data[:12] + bytes(rng.randrange(256) for _ in range(rng.randrange(0, 100)))
        try:
            Histogram.decode(junk)
        except ValueError:
            pass
    with pytest.raises(TypeError):
        Histogram.decode("HBH")
    with pytest.raises(ValueError):
        Histogram.decode(b"")


def test_pickle_and_copy() -> None:
    h = Histogram(lowest=10, highest=10**10, sigfigs=2)
    h.record_many(range(1, 100_000, 7))
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        r = pickle.loads(pickle.dumps(h, protocol=proto))
        assert type(r) is Histogram
        assert r == h and r is not h
        assert r.sigfigs == 2
    c = h.copy()
    assert c == h
    c.record(5)
    assert c != h
    assert h != "not a histogram"
    with pytest.raises(TypeError):
        hash(h)


def test_exported_and_documented() -> None:
    assert httpbench.Histogram is Histogram
    assert "Histogram" in httpbench.__all__
    assert "HDR" in (Histogram.__doc__ or "")
    assert list(inspect.signature(Histogram).parameters) == ["lowest", "highest", "sigfigs"]
    h = Histogram()
    h.record(1000)
    assert "count=1" in repr(h)
