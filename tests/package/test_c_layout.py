"""The C core's layout rules (docs/design.md, "Folders and naming"): folders by component
under csrc/core, none over 13 files, no file in its root; an internal header (*_int.h) is
included only from its own folder; includes name their folder ("net/hb_sock.h") and the
folders' include graph has no circle."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORE = ROOT / "csrc" / "core"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
MAX_FILES = 13


def _core_files() -> list[pathlib.Path]:
    if not CORE.is_dir():
        pytest.skip("C sources not present (installed without the source tree)")
    return sorted(p for p in CORE.rglob("*.[ch]"))


def _includes(path: pathlib.Path) -> list[str]:
    return INCLUDE.findall(path.read_text(errors="replace"))


def test_core_is_in_component_folders():
    files = _core_files()
    assert not [p.name for p in files if p.parent == CORE], "files in csrc/core's root"
    per_folder: dict[str, int] = {}
    for p in CORE.rglob("*"):
        if p.is_file():
            per_folder[p.parent.name] = per_folder.get(p.parent.name, 0) + 1
    assert {f: n for f, n in per_folder.items() if n > MAX_FILES} == {}
    assert all(p.name.startswith("hb_") for p in files)


def test_internal_headers_stay_in_their_folder():
    sources = [*_core_files(), *(ROOT / "csrc").glob("[!c]*/*.[ch]"),
               *(ROOT / "tests" / "c").glob("*.[ch]"), *(ROOT / "benchmarks").glob("*.[ch]")]
    bad = []
    for p in sources:
        for inc in _includes(p):
            if not inc.endswith("_int.h") or "/" not in inc:
                continue
            folder = inc.split("/")[0]
            if p.parent != CORE / folder:
                bad.append(f"{p.relative_to(ROOT)} includes {inc}")
    assert bad == []


def test_core_includes_name_their_folder_and_form_no_circle():
    graph: dict[str, set[str]] = {}
    unqualified = []
    for p in _core_files():
        me = p.parent.name
        for inc in _includes(p):
            if "/" not in inc:
                unqualified.append(f"{p.relative_to(ROOT)}: {inc}")
                continue
            dep = inc.split("/")[0]
            assert (CORE / inc).is_file(), f"{p.relative_to(ROOT)} includes missing {inc}"
            if dep != me:
                graph.setdefault(me, set()).add(dep)
    assert unqualified == []

    state: dict[str, int] = {}
    path: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                raise AssertionError("include circle: " + " -> ".join(path[path.index(m):] + [m]))
            if m not in state:
                visit(m)
        path.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
