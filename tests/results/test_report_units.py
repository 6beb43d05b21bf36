"""httpbench._units: readable formatting and parsing of durations, sizes, ratios."""

import math

import pytest
from httpbench import _units as U


@pytest.mark.parametrize(
    "ns,text",
    [
        (0, "0 ns"),
        (812, "812 ns"),
        (999, "999 ns"),
        (1000, "1.00 µs"),
        (12345, "12.3 µs"),
        (999_960, "1.00 ms"),
        (4_560_000, "4.56 ms"),
        (1_234_000_000, "1.23 s"),
        (125_000_000_000, "125 s"),
        (812.5, "812 ns"),
    ],
)
def test_format_duration(ns, text):
    assert U.format_duration(ns) == text


def test_format_duration_forced_unit_and_missing():
    assert U.format_duration(2_500_000, unit="ms") == "2.50 ms"
    assert U.format_duration(250_000, unit="ms") == "0.250 ms"
    assert U.format_duration(math.nan) == U.MISSING
    assert U.format_duration(None) == U.MISSING


@pytest.mark.parametrize(
    "n,text",
    [(0, "0 B"), (150, "150 B"), (1024, "1.00 KiB"), (1536, "1.50 KiB"),
     (12 * 1024, "12.0 KiB"), (7 * 1024**2, "7.00 MiB"), (3 * 1024**3, "3.00 GiB")],
)
def test_format_bytes(n, text):
    assert U.format_bytes(n) == text


def test_format_counts_rates_percent():
    assert U.format_count(812) == "812"
    assert U.format_count(12_345) == "12.3k"
    assert U.format_count(4_560_000) == "4.56M"
    assert U.format_count(0.25) == "0.250"
    assert U.format_rate(45_600.0) == "45.6k/s"
    assert U.format_byte_rate(11.8 * 1024**2) == "11.8 MiB/s"
    assert U.format_percent(0.1234) == "12.3%"
    assert U.format_change(0.1234) == "+12.3%"
    assert U.format_change(-0.04) == "-4.0%"
    assert U.format_change(0.0001) == "±0.0%"
    assert U.format_change(math.nan) == U.MISSING


@pytest.mark.parametrize(
    "text,ns",
    [("2ms", 2e6), ("2 ms", 2e6), ("80us", 80e3), ("80µs", 80e3), ("80μs", 80e3),
     ("1.5s", 1.5e9), ("150ns", 150.0), ("1e3ns", 1000.0), ("1min", 60e9), ("0", 0.0),
     (".5ms", 5e5)],
)
def test_parse_duration(text, ns):
    assert U.parse_duration(text) == pytest.approx(ns)


def test_parse_duration_units_and_errors():
    assert U.parse_duration("2ms", unit="s") == pytest.approx(0.002)
    assert U.parse_duration("5", default_unit="ms") == 5e6
    assert U.parse_duration(5, default_unit="s") == 5e9
    for bad in ("2", "2 parsecs", "ms", "", "fast", "1..2ms"):
        with pytest.raises(ValueError):
            U.parse_duration(bad)
    with pytest.raises(ValueError):
        U.parse_duration(3)  # a number without a unit is ambiguous
    with pytest.raises(TypeError):
        U.parse_duration(["2ms"])


def test_parse_size_percent_count():
    assert U.parse_size("300KiB") == 300 * 1024
    assert U.parse_size("300 kib") == 300 * 1024
    assert U.parse_size("1MB") == 1e6
    assert U.parse_size("1.5MiB") == 1.5 * 1024**2
    assert U.parse_size("150") == 150
    assert U.parse_size("7M") == 7 * 1024**2
    with pytest.raises(ValueError):
        U.parse_size("3 furlongs")
    assert U.parse_percent("5%") == pytest.approx(0.05)
    assert U.parse_percent("0.05") == pytest.approx(0.05)
    with pytest.raises(ValueError):
        U.parse_percent("5ms")
    assert U.parse_count("12k") == 12_000
    assert U.parse_count("1.5M/s") == 1.5e6
    with pytest.raises(ValueError):
        U.parse_count("12x")


def test_parse_quantity_kinds():
    assert U.parse_quantity("2ms") == (2e6, "duration")
    assert U.parse_quantity("80 µs") == (80e3, "duration")
    assert U.parse_quantity("64KiB") == (65536, "size")
    assert U.parse_quantity("10MiB/s") == (10 * 1024**2, "byterate")
    assert U.parse_quantity("5%") == (0.05, "ratio")
    assert U.parse_quantity("12k") == (12_000, "count")
    assert U.parse_quantity("80") == (80, "count")
    with pytest.raises(ValueError):
        U.parse_quantity("3 parsecs")


def test_format_parse_round_trip():
    for ns in (1, 999, 1234, 56_789, 1_234_567, 9_876_543_210):
        text = U.format_duration(ns)
        assert U.parse_duration(text) == pytest.approx(ns, rel=5e-3)
    for n in (1, 1023, 4096, 300 * 1024, 7 * 1024**2 + 5):
        assert U.parse_size(U.format_bytes(n)) == pytest.approx(n, rel=5e-3)
