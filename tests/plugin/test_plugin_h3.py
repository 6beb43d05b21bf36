"""HTTP/3 through the pytest plugin: ``httpbench.client(name, path, protocol="h3")`` against
the session's HTTPS server, which serves HTTP/3 on the same port number when the build has
it. pytester runs, like the rest of the plugin's tests."""

import re
from pathlib import Path

import httpbench
import pytest
from httpbench import _features
from httpbench._features import H3_CLIENT_MISSING, h3_missing

pytest_plugins = ["pytester"]

# public names resolved before any in-process run (see test_plugin.py)
for _name in httpbench.__all__:
    getattr(httpbench, _name)


def run(pytester, *args):
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


def summary_lines(result):
    """The measurement lines of the httpbench terminal-summary section."""
    out = result.stdout.lines
    start = next(i for i, ln in enumerate(out) if re.match(r"^=+ httpbench =+$", ln))
    lines = []
    for ln in out[start + 1:]:
        if ln.startswith("=="):
            break
        lines.append(ln)
    return lines

needs_h3 = pytest.mark.skipif(h3_missing() is not None, reason=str(h3_missing()))


def _pycurl_h3() -> bool:
    try:
        import pycurl
    except ImportError:
        return False
    return bool(pycurl.version_info()[4] & pycurl.VERSION_HTTP3)


H3_BUDGET = '''
import pytest


@pytest.mark.httpbench(budget={"allocs_per_request": 100, "p99": "5s", "errors": 0})
@pytest.mark.parametrize("name", ["native", "pycurl"])
def test_h3_budget(httpbench, httpbench_server, name):
    c = httpbench.client(name, "/bytes/150", protocol="h3")
    assert httpbench_server.h3
    before = httpbench_server.stats(tls=True)["by_protocol"]
    r = httpbench.measure(c.request, n=50, warmup=5)
    after = httpbench_server.stats(tls=True)["by_protocol"]
    # every call, warm-up included, reached the server over HTTP/3 and nothing else
    assert r.calls == 50
    assert after["h3"] - before["h3"] == 55
    assert after["http/1.1"] == before["http/1.1"] and after["h2"] == before["h2"]
    assert c.last_status == 200 and c.last_body == bytes(c.last_body) and len(c.last_body) == 150


@pytest.mark.httpbench(budget={"allocs_per_request": 1})
def test_h3_budget_exceeded(httpbench):
    c = httpbench.client("pycurl", "/bytes/150", protocol="h3")
    httpbench.measure(c.request, n=20, warmup=2)
'''


@needs_h3
@pytest.mark.skipif(not _pycurl_h3(), reason="pycurl with an HTTP/3 libcurl is not installed")
def test_h3_budget_with_native_and_pycurl(pytester):
    pytester.makepyfile(test_h3=H3_BUDGET)
    res = run(pytester)
    res.assert_outcomes(passed=2, failed=1)
    lines = summary_lines(res)
    for name in ("native", "pycurl"):
        line = next(ln for ln in lines if ln.startswith(f"test_h3.py::test_h3_budget[{name}] "))
        assert line.rstrip().endswith("PASS"), line
    bad = next(ln for ln in lines if ln.startswith("test_h3.py::test_h3_budget_exceeded "))
    assert "budget exceeded: allocs_per_request" in bad
    res.stdout.fnmatch_lines(["*allocs_per_request*<= 1*"])


NO_H3_ADAPTER = '''
import pytest


def test_no_h3_adapter(httpbench):
    httpbench.client("http.client", "/bytes/150", protocol="h3")


def test_h3_is_tls(httpbench):
    with pytest.raises(ValueError, match="protocol='h3' needs TLS"):
        httpbench.client("native", "/", protocol="h3", tls=False)


def test_unknown_protocol(httpbench):
    with pytest.raises(ValueError, match="protocol must be 'http/1.1' or 'h3', got 'h9'"):
        httpbench.client("native", "/", protocol="h9")
'''


def test_adapter_without_h3_skips_saying_so(pytester):
    pytester.makepyfile(test_noh3=NO_H3_ADAPTER)
    res = run(pytester, "-rs")
    res.assert_outcomes(passed=2, skipped=1)
    res.stdout.fnmatch_lines(["*httpbench client http.client: no HTTP/3: "
                              "the adapter declares no HTTP/3 (h3)*"])


NO_H3_BUILD = '''
import pytest


def test_native_h3(httpbench):
    httpbench.client("native", "/bytes/150", protocol="h3")


def test_tls_still_served(httpbench, httpbench_server):
    assert not httpbench_server.h3
    c = httpbench.client("http.client", "/bytes/150", tls=True)
    before = httpbench_server.stats(tls=True)["requests"]
    httpbench.measure(c.request, n=10, warmup=0)
    assert httpbench_server.stats(tls=True)["requests"] - before == 10
    assert len(c.last_body) == 150
'''


def test_build_without_h3_skips_with_the_build_message(pytester, monkeypatch):
    monkeypatch.setattr(_features._core, "HAVE_H3", 0)
    pytester.makepyfile(test_nobuild=NO_H3_BUILD)
    res = run(pytester, "-rs")
    res.assert_outcomes(passed=1, skipped=1)
    assert H3_CLIENT_MISSING.startswith("this build has no HTTP/3 client: install")
    res.stdout.fnmatch_lines([f"*httpbench client native over HTTP/3: {H3_CLIENT_MISSING[:60]}*"])
    assert httpbench.features()["http3-client"] is False


@needs_h3
@pytest.mark.skipif(not _pycurl_h3(), reason="pycurl with an HTTP/3 libcurl is not installed")
def test_docs_h3_example_runs(pytester):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "pytest.md").read_text(encoding="utf-8")
    start = doc.index("```python\n# test_h3_perf.py") + 10
    pytester.makepyfile(test_h3_perf=doc[start:doc.index("\n```\n", start)])
    res = run(pytester)
    res.assert_outcomes(passed=2)
    assert all(ln.rstrip().endswith("PASS") for ln in summary_lines(res))
