"""A user's script of the README's examples type-checks under mypy --strict, and the
types it sees from httpbench are concrete: every reveal_type below must match its
expected type exactly, so an ``Any`` leaking from the package (an untyped _core
member, a histogram field annotated Any) fails the test."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("mypy", reason="mypy is in the [test] extra")

pytestmark = pytest.mark.slow

# (expression, the type mypy must reveal)
REVEALS: list[tuple[str, str]] = [
    ("srv", "httpbench._server.Server"),
    ("srv.url", "builtins.str"),
    ("r", "httpbench._benchresult.BenchResult"),
    ("r.rps", "builtins.float"),
    ("r.p99", "builtins.float"),
    ("r.successes", "builtins.int"),
    ("r.latency", "httpbench._core.Histogram"),
    ("r.latency_uncorrected", "httpbench._core.Histogram | None"),
    ("r.latency.percentile(99.9)", "builtins.int"),
    ("r.latency.percentiles()", "builtins.dict[builtins.float, builtins.int]"),
    ("r.latency.mean", "builtins.float"),
    ("r.summary()", "builtins.str"),
    ("c", "httpbench._core.Client"),
    ("resp", "httpbench._core.Response"),
    ("resp.status", "builtins.int"),
    ("resp.body", "builtins.bytes"),
    ("resp.elapsed", "builtins.float"),
    ("resp.headers", "httpbench._client.Headers"),
    ("resp.headers.get('content-type')", "builtins.str | None"),
    ("m", "httpbench._measureresult.MeasureResult"),
    ("m.latency", "httpbench._core.Histogram"),
    ("m.p50", "builtins.float"),
    ("m.allocs_per_call", "builtins.float"),
    ("m.cpu_ns_per_call", "builtins.float"),
    ("h", "httpbench._core.Histogram"),
    ("h.copy()", "httpbench._core.Histogram"),
    ("httpbench.Histogram.decode(h.encode())", "httpbench._core.Histogram"),
    ("list(h)", "builtins.list[tuple[builtins.int, builtins.int]]"),
    ("httpbench.ConnectError('x')", "httpbench._core.ConnectError"),
    ("httpbench.RequestTimeout('x')", "httpbench._core.RequestTimeout"),
    ("httpbench.expected_bytes(10)", "builtins.bytes"),
    ("httpbench.__version__", "builtins.str"),
]

SCRIPT = '''
import httpbench

with httpbench.Server() as srv:
    r = httpbench.bench(srv.url + "/bytes/150", n=200, concurrency=4)
    print(r.successes, r.errors, r.rps, r.p99)
    print(r.summary())
    with httpbench.Client() as c:
        resp = c.get(srv.url + "/bytes/150")
        assert resp.status == 200 and resp.body == httpbench.expected_bytes(150)
        m = httpbench.measure(lambda: c.get(srv.url + "/bytes/150"), n=50)
        print(m.allocs_per_call, m.cpu_ns_per_call, m.p50)

h = httpbench.Histogram()
h.record(5)
h.merge(r.latency)
try:
    httpbench.Client(timeout=1.0).get("http://127.0.0.1:1/")
except httpbench.ConnectError as exc:
    print(exc.strerror)  # also a ConnectionError
except httpbench.HttpbenchError as exc2:
    print(exc2)
'''


def _script() -> str:
    return SCRIPT + "".join(f"reveal_type({expr})  # R{i}\n"
                            for i, (expr, _) in enumerate(REVEALS))


def _mypy(tmp_path, text: str) -> tuple[int, list[str]]:
    path = tmp_path / "user_script.py"
    path.write_text(textwrap.dedent(text))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--show-error-codes",
         "--cache-dir", str(tmp_path / ".mypy_cache"), str(path)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    return proc.returncode, proc.stdout.splitlines()


def _revealed(lines: list[str], source: str) -> dict[int, str]:
    """reveal index -> type, keyed through the '# R<i>' marker on the revealing line."""
    src = source.splitlines()
    out = {}
    for line in lines:
        m = re.match(r".*?:(\d+): note: Revealed type is \"(.*)\"$", line)
        if m:
            tag = re.search(r"# R(\d+)$", src[int(m.group(1)) - 1])
            assert tag, line
            # mypy versions differ in printing builtins' module
            out[int(tag.group(1))] = m.group(2).replace("builtins.", "")
    return out


def test_readme_examples_are_fully_typed(tmp_path):
    source = _script()
    _rc, lines = _mypy(tmp_path, source)
    errors = [ln for ln in lines if ": error:" in ln]
    assert not errors, "\n".join(errors)
    got = _revealed(lines, source)
    assert len(got) == len(REVEALS), lines
    wrong = [f"{expr}: {got[i]!r}, expected {want!r}"
             for i, (expr, want) in enumerate(REVEALS)
             if got[i] != want.replace("builtins.", "")]
    assert not wrong, "\n".join(wrong)
    anys = [f"{expr}: {got[i]}" for i, (expr, _) in enumerate(REVEALS) if "Any" in got[i]]
    assert not anys, anys


def test_the_check_sees_an_any(tmp_path):
    # the same machinery flags an untyped value, so the test above can fail
    source = "import json\nreveal_type(json.loads('1'))  # R0\n"
    _rc, lines = _mypy(tmp_path, source)
    assert _revealed(lines, source) == {0: "Any"}


def test_a_misuse_is_an_error(tmp_path):
    rc, lines = _mypy(tmp_path, "import httpbench\nhttpbench.Histogram().record('5')\n"
                                "httpbench.Clinet()\n")
    assert rc != 0
    assert any("arg-type" in ln for ln in lines), lines
    assert any("attr-defined" in ln for ln in lines), lines
