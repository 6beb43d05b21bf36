"""``pip install "httpbench[notebook]"`` brings what running the notebooks needs
(``jupyter nbconvert --execute``), and the docs count the notebooks there are."""

from __future__ import annotations

import glob
import json
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))
WORDS = {3: "three", 4: "four", 5: "five", 6: "six"}


def _extra(name: str) -> set[str]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        deps = tomllib.load(f)["project"]["optional-dependencies"][name]
    return {re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0].lower() for d in deps}


def _imports() -> set[str]:
    out = set()
    for path in NOTEBOOKS:
        with open(path, encoding="utf-8") as f:
            nb = json.load(f)
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            for line in "".join(cell["source"]).splitlines():
                m = re.match(r"\s*(?:import|from)\s+([A-Za-z_]\w*)", line)
                if m:
                    out.add(m.group(1))
    return out


def test_notebook_extra_runs_the_notebooks():
    extra = _extra("notebook")
    # nbconvert --execute: the command, the executor, the kernel; figures need matplotlib
    for need in ("nbconvert", "nbclient", "nbformat", "ipykernel", "matplotlib"):
        assert need in extra, need
    third_party = {m for m in _imports()
                   if m not in sys.stdlib_module_names and m != "httpbench"}
    assert third_party and third_party <= extra, third_party - extra


def test_docs_count_the_notebooks():
    word = WORDS[len(NOTEBOOKS)]
    for doc in ("README.md", os.path.join("docs", "api.md")):
        with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
            text = " ".join(f.read().split())
        m = re.search(r"`notebooks/` has (\w+) (?:Jupyter )?examples", text)
        assert m and m.group(1) == word, (doc, m and m.group(0))


def test_readme_quickstart_prints_what_its_comment_says(capsys):
    """The quickstart's measure() line: two Python allocations per GET, as docs/api.md says."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    block = text.split("## Quickstart (Python)", 1)[1].split("```python", 1)[1].split("```")[0]
    m = re.search(r"print\(m\.allocs_per_call.*#\s*([\d.]+) Python allocs", block)
    assert m, "the quickstart's comment names the allocations it prints"
    exec(compile(block.replace("n=20_000", "n=2_000"), "README.md", "exec"), {})
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert float(last.split()[0]) == float(m.group(1)), last
