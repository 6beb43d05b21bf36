"""Docs and notebooks show the public face only: no private httpbench module or name."""

from __future__ import annotations

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [os.path.join(ROOT, "README.md")]
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))
PRIVATE = re.compile(r"httpbench\._[a-z]|from httpbench import [^\n]*\b_[a-z]\w*|from \._")


@pytest.mark.parametrize("path", DOCS + NOTEBOOKS, ids=os.path.basename)
def test_no_private_names(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip("docs not present (installed without the source tree)")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    hits = [m.group(0) for m in PRIVATE.finditer(text)]
    assert not hits, f"{os.path.relpath(path, ROOT)} uses private names: {hits}"


def test_documented_top_level_names_exist() -> None:
    import httpbench

    with open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8") as f:
        text = f.read()
    names = set(re.findall(r"`httpbench\.([A-Za-z]\w*)", text))
    assert names, "api.md names no httpbench.* attribute"
    missing = sorted(n for n in names if not hasattr(httpbench, n))
    assert not missing, f"docs/api.md documents names httpbench lacks: {missing}"
