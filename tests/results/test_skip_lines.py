"""Skipped pairs are printed one line per reason, naming each client once."""

from httpbench import report
from httpbench._cmptables import skip_lines
from httpbench._results import ResultSet


def test_one_line_per_reason_and_scenario_set():
    why = "no HTTP/3: the adapter declares no HTTP/3 (h3)"
    skipped = {
        "urllib3/h3-get-150b": why, "requests/h3-get-150b": why,
        "urllib3/h3-download-7m": why, "requests/h3-download-7m": why,
        "aiohttp/h3-get-150b": why,
        "curl/h3-get-150b": "this curl is built without HTTP/3",
        "niquests": "not installed",
    }
    assert skip_lines(skipped) == [
        f"urllib3, requests (h3-get-150b, h3-download-7m): {why}",
        f"aiohttp (h3-get-150b): {why}",
        "curl/h3-get-150b: this curl is built without HTTP/3",
        "niquests: not installed",
    ]


def test_every_surface_uses_the_grouped_lines():
    why = "the adapter declares no HTTP/3"
    rs = ResultSet(metadata={}, results=[], skipped={"a/x": why, "b/x": why})
    line = f"a, b (x): {why}"
    assert f"  * {line}" in report.format_tables(rs)
    assert f"<li>{line}</li>" in report.html_tables(rs)
