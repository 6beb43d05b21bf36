"""A record's summary(), plot(), to_dataframe(), Jupyter display and assert_budget()
come from the presentation and policy layers, which register them: records never
import those layers, and nothing of them loads until a convenience is called."""

from __future__ import annotations

import subprocess
import sys

import pytest

PRESENTATION = ("httpbench.report", "httpbench._resulttables", "httpbench._abreport",
                "httpbench._htmlreport", "httpbench.plot", "httpbench._budget")


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True, timeout=120).stdout


def test_import_httpbench_loads_only_the_registry():
    out = _run("import sys, httpbench\n"
               "print(' '.join(sorted(m for m in sys.modules if m.startswith('httpbench'))))")
    assert out.split() == ["httpbench", "httpbench._conveniences", "httpbench._recordviews",
                           "httpbench._version"]


def test_a_record_loads_presentation_only_when_a_convenience_is_called():
    out = _run(
        "import sys, httpbench\n"
        f"pres = {PRESENTATION!r}\n"
        "r = httpbench.measure(lambda: None, n=200)\n"
        "print(sorted(m for m in pres if m in sys.modules))\n"
        "text = r.summary()\n"
        "print(sorted(m for m in pres if m in sys.modules))\n"
        "print(text == httpbench.report.format_result(r, 'text'))\n"
        "print(r.assert_budget(p50='10s')[0].ok)\n"
        "print(sorted(r._repr_mimebundle_()))\n")
    before, after, same, ok, bundle = out.splitlines()
    assert before == "[]"
    assert "'httpbench._resulttables'" in after and "'httpbench.plot'" not in after
    assert same == "True"
    assert ok == "True"
    assert bundle == "['text/html', 'text/plain']"


def test_assert_budget_through_the_registry_raises_budget_exceeded():
    import httpbench

    r = httpbench.measure(lambda: None, n=200)
    with pytest.raises(httpbench.BudgetExceeded):
        r.assert_budget(p50="1ns")


def test_an_unregistered_convenience_says_which_module_registers_it(monkeypatch):
    import httpbench
    from httpbench import _conveniences

    r = httpbench.measure(lambda: None, n=50)
    monkeypatch.delitem(_conveniences._registered, "summary")
    with pytest.raises(RuntimeError, match=r"MeasureResult\.summary\(\).*_recordviews"):
        r.summary()
    assert str(r) == repr(r)  # __str__ falls back rather than hide the object


def test_register_rejects_a_name_records_do_not_declare():
    from httpbench._conveniences import register

    with pytest.raises(ValueError, match="unknown record convenience 'sumary'"):
        register("sumary")


def test_every_declared_convenience_is_registered():
    import httpbench  # noqa: F401  (its import registers them)
    from httpbench import _conveniences

    assert sorted(_conveniences._registered) == sorted(_conveniences.CONVENIENCES)
