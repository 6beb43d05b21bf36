"""A client's transport stack: the installed distributions it imports (its own and
its requirements, transitively), with versions, and any whose files another
distribution also installed.

Two environments with "requests 2.34.2" can still differ underneath: urllib3
2.8 in one, urllib3-future (which installs its files as ``urllib3/``) in the
other. Results record the stack so a diff can name that as the cause of a change.
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = ["stack_differences", "transport_stack"]

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _wanted(req: str) -> bool:
    """A requirement the installed distribution needs (not an extra's; its marker true)."""
    if ";" not in req:
        return True
    marker = req.split(";", 1)[1]
    if "extra" in marker:
        return False
    try:
        from packaging.markers import Marker
    except ImportError:  # no packaging: keep it when installed (checked by the caller)
        return True
    try:
        return bool(Marker(marker.strip()).evaluate())
    except Exception:  # an unparsable marker: keep it, the version lookup decides
        return True


def transport_stack(dist: str) -> dict[str, Any]:
    """``{"packages": {name: version}, "replaced": {import name: ["dist version", ...]}}``
    for distribution ``dist`` and its installed requirements; ``replaced`` lists the
    import names whose files more than one installed distribution claims (the last
    installed one's files are what runs). Empty when ``dist`` is not installed."""
    import importlib.metadata as md

    packages: dict[str, str] = {}
    todo = [dist]
    while todo:
        name = todo.pop()
        if _norm(name) in {_norm(k) for k in packages}:
            continue
        try:
            d = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        packages[d.metadata["Name"] or name] = d.version
        for req in d.requires or []:
            m = _NAME.match(req)
            if m and _wanted(req):
                todo.append(m.group(1))
    replaced: dict[str, list[str]] = {}
    if packages:
        owners = _owners()
        mine = {_norm(p) for p in packages}
        for mod, dists in sorted(owners.items()):
            uniq = sorted({_norm(x): x for x in dists}.values())
            if len(uniq) > 1 and any(_norm(x) in mine for x in uniq):
                replaced[mod] = [f"{x} {_version(x)}" for x in uniq]
    return {"packages": dict(sorted(packages.items(), key=lambda kv: _norm(kv[0]))),
            "replaced": replaced}


@functools.lru_cache(maxsize=1)
def _owners() -> dict[str, list[str]]:
    """Import name -> the installed distributions with files under it (read once)."""
    import importlib.metadata as md

    return dict(md.packages_distributions())


def _version(dist: str) -> str:
    import importlib.metadata as md

    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "?"


def stack_differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """What differs between two recorded stacks of one client: 'urllib3 2.8.0 vs 2.9.0',
    'urllib3-future 2.12.9 only in current', 'urllib3/ also installed by urllib3-future
    2.12.9 in current'. Empty when either side was not recorded."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return []
    pa, pb = dict(a.get("packages") or {}), dict(b.get("packages") or {})
    out = []
    na, nb = {_norm(k): k for k in pa}, {_norm(k): k for k in pb}
    for key in sorted(set(na) | set(nb)):
        if key in na and key in nb:
            va, vb = pa[na[key]], pb[nb[key]]
            if va != vb:
                out.append(f"{nb[key]} {va} vs {vb}")
        elif key in na:
            out.append(f"{na[key]} {pa[na[key]]} only in baseline")
        else:
            out.append(f"{nb[key]} {pb[nb[key]]} only in current")
    ra, rb = dict(a.get("replaced") or {}), dict(b.get("replaced") or {})
    for mod in sorted(set(ra) | set(rb)):
        if ra.get(mod) != rb.get(mod):
            side, owners = ("current", rb[mod]) if mod in rb else ("baseline", ra[mod])
            out.append(f"{mod}/ installed by {' and '.join(owners)} in {side} "
                       "(one replaced the other's files)")
    return out
