"""The package is layered: a module imports only from its own layer or lower ones,
and no two modules import each other, directly or around a loop.

Every import is checked (top-level and inside functions, relative and absolute
``httpbench.x``), so a helper can never again end up in a module above its users.
No upward import is allowed, not even a lazy one: a record's ``summary()``, ``plot()``
and the like reach the presentation layer through the registry in ``_conveniences``,
which that layer fills.

A module's ``_private`` names stay inside it: a name another module uses is public
within the package (no underscore, or it moves to the module that uses it).
"""

from __future__ import annotations

import ast
import pathlib

import httpbench

PKG = pathlib.Path(httpbench.__file__).parent

# module (dotted, relative to the package) -> layer
LAYERS: dict[str, int] = {
    # L0: pure helpers (and the compiled extensions and version constant they sit on)
    "_core": 0,
    "_mcount": 0,
    "_version": 0,
    "_units": 0,
    "_hist": 0,
    "_metadata": 0,
    "_stats": 0,
    "_tables": 0,
    "_specs": 0,
    "_delta": 0,
    "_noise": 0,
    "_features": 0,
    "_machine": 0,
    "_gitinfo": 0,
    "_colours": 0,
    "_stack": 0,
    # L1: plain records, versioned JSON, and their flattening into rows
    "_conveniences": 1,
    "_jsonfields": 1,
    "_resultfile": 1,
    "_record": 1,
    "_benchsummary": 1,
    "_benchresult": 1,
    "_measureresult": 1,
    "_results": 1,
    "_rows": 1,
    # L2: history: the store, runs made of records, series and their change points
    "_historystore": 2,
    "_historyrun": 2,
    "_changepoints": 2,
    "_history": 2,
    # L3: budgets and baselines
    "_budget": 3,
    "_baseline": 3,
    "_unlike": 3,
    # L4: presentation
    "report": 4,
    "_recordviews": 4,
    "_resulttables": 4,
    "_abreport": 4,
    "_htmlreport": 4,
    "_progress": 4,
    "_reportcli": 4,
    "_cmptables": 4,
    "plot": 4,
    "_hdrexport": 4,
    "_html": 4,
    "_historyplot": 4,
    "_verdict": 4,
    # L5: running things
    "_bench": 5,
    "_loadgen": 5,
    "_distributed": 5,
    "_measure": 5,
    "_deterministic": 5,
    "_compare": 5,
    "_runner": 5,
    "_workerproc": 5,
    "_roundnotes": 5,
    "_worker": 5,
    "_workerjob": 5,
    "_zygote": 5,
    "_scenarios": 5,
    "_adapters": 5,
    "_adapters._process": 5,
    "_adapters.aiohttp_": 5,
    "_adapters.aiosonic_": 5,
    "_adapters.aioquic_": 5,
    "_adapters.command": 5,
    "_adapters.curl": 5,
    "_adapters.curl_cffi_": 5,
    "_adapters.http_client": 5,
    "_adapters.httpx2_": 5,
    "_adapters.httpx_": 5,
    "_adapters.native": 5,
    "_adapters.niquests_": 5,
    "_adapters.primp_": 5,
    "_adapters.pycurl_": 5,
    "_adapters.pyreqwest_": 5,
    "_adapters.requests_": 5,
    "_adapters.sse_": 5,
    "_adapters.urllib3_": 5,
    "_adapters.wreq_": 5,
    "_adapters.ws_": 5,
    "plugin": 5,
    "_plugin_session": 5,
    "_plugin_fixture": 5,
    "_cli": 5,
    "_envs": 5,
    "_versions": 5,
    "_completion": 5,
    "_server": 5,
    "_client": 5,
    "_historycli": 5,
    "_historyplugin": 5,
    # the public face
    "__init__": 6,
    "__main__": 6,
}

# (module, function) allowed to import upward: none (see the module docstring).
ALLOWED_UPWARD: set[tuple[str, str]] = set()


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _package_of(mod: str, path: pathlib.Path) -> list[str]:
    """The package a module's relative imports start from, as name parts."""
    parts = mod.split(".") if mod != "__init__" else []
    return parts if path.name == "__init__.py" else parts[:-1]


def _resolve(target: str) -> str | None:
    """The LAYERS key a dotted name inside the package belongs to (longest match)."""
    parts = target.split(".") if target else []
    while parts:
        name = ".".join(parts)
        if name in LAYERS:
            return name
        parts.pop()
    return "__init__" if not target else None


def _imports(path: pathlib.Path, mod: str) -> list[tuple[str, str, int]]:
    """(imported module key, enclosing function or "", line) for every package import."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    pkg = _package_of(mod, path)
    out: list[tuple[str, str, int]] = []

    def add(target: str, func: str, line: int) -> None:
        key = _resolve(target)
        assert key is not None, f"{path.name}:{line} imports unknown module httpbench.{target}"
        out.append((key, func, line))

    def visit(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.Import):
                for a in child.names:
                    if a.name == "httpbench" or a.name.startswith("httpbench."):
                        add(a.name[len("httpbench."):] if "." in a.name else "", f, child.lineno)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = pkg[: len(pkg) - (child.level - 1)] if child.level > 1 else list(pkg)
                    stem = ".".join(base + ([child.module] if child.module else []))
                elif child.module and (child.module == "httpbench"
                                       or child.module.startswith("httpbench.")):
                    stem = child.module[len("httpbench."):] if "." in child.module else ""
                else:
                    continue
                for a in child.names:
                    # `from . import x` / `from .pkg import x`: x may be a submodule
                    sub = f"{stem}.{a.name}" if stem else a.name
                    add(sub if _resolve(sub) == sub else stem, f, child.lineno)
            visit(child, f)

    visit(tree, "")
    return out


def _modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def test_every_module_has_a_layer():
    missing = sorted(set(_modules()) - set(LAYERS))
    assert not missing, f"modules missing from the LAYERS table: {missing}"


def test_no_upward_imports():
    bad = []
    used_allowances = set()
    for mod, path in _modules().items():
        layer = LAYERS[mod]
        for target, func, line in _imports(path, mod):
            if LAYERS[target] <= layer:
                continue
            if (mod, func) in ALLOWED_UPWARD:
                used_allowances.add((mod, func))
                continue
            bad.append(f"{path.relative_to(PKG)}:{line} ({func or 'module level'}) "
                       f"L{layer} {mod} imports L{LAYERS[target]} {target}")
    assert not bad, "upward imports:\n" + "\n".join(bad)
    # an allowance nobody needs any more is dead weight
    assert used_allowances == ALLOWED_UPWARD, ALLOWED_UPWARD - used_allowances


def test_the_checker_sees_function_level_and_absolute_imports(tmp_path):
    fake = tmp_path / "m.py"
    fake.write_text("import httpbench._compare\n"
                    "def f():\n    from .report import diff\n    from httpbench import plot\n"
                    "    from ._adapters import curl\n")
    got = _imports(fake, "_units")
    assert ("_compare", "", 1) in got
    assert ("report", "f", 3) in got
    assert ("plot", "f", 4) in got
    assert ("_adapters.curl", "f", 5) in got


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_uses(path: pathlib.Path, mod: str, sources: set[str]) -> list[str]:
    """Every ``_private`` name ``path`` takes from another package module: imported
    (``from ._x import _y``) or read off an imported module (``_x._y``, ``U._y``).
    ``sources`` are the Python modules: a compiled extension's names are its own API."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    pkg = _package_of(mod, path)
    aliases: dict[str, str] = {}  # local name -> package module it is bound to
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("httpbench.") and a.asname:
                    aliases[a.asname] = a.name[len("httpbench."):]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else list(pkg)
                stem = ".".join(base + ([node.module] if node.module else []))
            elif node.module == "httpbench" or (node.module or "").startswith("httpbench."):
                stem = node.module[len("httpbench."):] if "." in node.module else ""
            else:
                continue
            for a in node.names:
                sub = f"{stem}.{a.name}" if stem else a.name
                if _resolve(sub) == sub:  # a module: `from . import _units as U`
                    aliases[a.asname or a.name] = sub
                elif _private(a.name) and (_resolve(stem) or "__init__") != mod:
                    out.append(f"{mod}:{node.lineno} imports {a.name} from {stem or 'httpbench'}")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and _private(node.attr)):
            target = aliases[node.value.id]
            if target != mod and target in sources:
                out.append(f"{mod}:{node.lineno} reads {target}.{node.attr}")
    return out


def test_no_private_names_across_modules():
    mods = _modules()
    bad = [use for mod, path in mods.items() for use in _private_uses(path, mod, set(mods))]
    assert not bad, ("private names used by another module (drop the underscore, or move "
                     "the name to the module that uses it):\n" + "\n".join(bad))


def test_the_private_name_check_sees_imports_and_module_attributes(tmp_path):
    fake = tmp_path / "m.py"
    fake.write_text("from . import _units as U\nfrom ._baseline import diff, _helper\n"
                    "import httpbench._stats as S\n"
                    "def f():\n    from httpbench._tables import _cell\n"
                    "    return U._sig(1) + S.median_ci + U.__name__ + _core_ok()\n"
                    "def g():\n    from . import _core\n    return _core._measure_loop\n")
    got = _private_uses(fake, "_units2", {"_units", "_baseline", "_stats", "_tables"})
    assert got == ["_units2:2 imports _helper from _baseline",
                   "_units2:5 imports _cell from _tables", "_units2:6 reads _units._sig"], got


def _graph() -> dict[str, set[str]]:
    """module -> the package modules it imports, minus the allowed lazy upward imports."""
    graph: dict[str, set[str]] = {}
    for mod, path in _modules().items():
        graph[mod] = {target for target, func, _ in _imports(path, mod)
                      if target != mod and (mod, func) not in ALLOWED_UPWARD}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_import_cycles():
    graph = _graph()
    found = _cycles(graph)
    detail = []
    for comp in found:
        members = set(comp)
        edges = [f"{a} -> {b}" for a in comp for b in sorted(graph[a] & members)]
        detail.append(", ".join(edges))
    assert not found, "import cycles (a lower-level function breaks them):\n" + "\n".join(detail)


def test_the_cycle_check_finds_loops_of_any_length():
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
