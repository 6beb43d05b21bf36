"""Client specs: which client, and from which release or source tree.

A spec names an adapter (``urllib3``, ``httpx-async``, ``pkg.module:Class``)
and optionally where its library comes from:

* ``urllib3`` — the current environment (the meaning a plain name always had);
* ``urllib3==2.2.3``, ``httpx[http2]==0.28.1`` — a release from the index;
* ``requests@./checkout`` — a local source tree (or a ``.whl`` file);
* ``requests@git+https://host/repo@branch`` — anything pip accepts as a URL.

Parsing is pure syntax; which distribution a client name installs is decided
by the environment builder (it knows the adapters).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

__all__ = ["ClientSpec", "parse_spec", "parse_specs", "split_specs"]

_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.\-]*(?::[A-Za-z_][A-Za-z0-9_]*)?"
_SPEC = re.compile(
    rf"^(?P<name>{_NAME})"
    r"(?:\[(?P<extras>[^\[\]]*)\])?"
    r"(?:(?P<op>==|@)(?P<rest>.*))?$"
)
_VERSION = re.compile(r"^[A-Za-z0-9_.!+\-*]+$")
_EXTRA = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_URL_SCHEMES = ("git+", "hg+", "svn+", "bzr+", "http://", "https://", "file://")


@dataclass(frozen=True, slots=True)
class ClientSpec:
    """One parsed client spec.

    ``text``: the spec as written (the row's key); ``client``: the adapter
    name; ``extras``: extras of the distribution; ``version``: an exact
    release; ``source``: an absolute local path or a URL; ``kind``:
    ``"current"``, ``"release"``, ``"path"`` (a source tree), ``"wheel"`` or
    ``"url"``; ``python``: the interpreter its environment is made from
    (None: the one running httpbench).
    """

    text: str
    client: str
    extras: tuple[str, ...] = ()
    version: str | None = None
    source: str | None = None
    kind: str = "current"
    python: str | None = None  # the base interpreter of its environment (None: this one)

    @property
    def isolated(self) -> bool:
        """True when the spec runs in an environment of its own."""
        return self.kind != "current"


def parse_spec(text: str, base_dir: str | None = None) -> ClientSpec:
    """Parse one spec; relative paths are resolved against ``base_dir`` (default: cwd).

    ``ValueError`` with the reason for anything malformed.
    """
    raw = str(text).strip()
    if not raw:
        raise ValueError("empty client spec")
    m = _SPEC.match(raw)
    if m is None:
        raise ValueError(f"client spec {raw!r}: expected NAME, NAME==VERSION, "
                         "NAME[extra,...]==VERSION or NAME@PATH-OR-URL")
    name, extras_text, op, rest = m["name"], m["extras"], m["op"], m["rest"]
    extras: tuple[str, ...] = ()
    if extras_text is not None:
        extras = tuple(e.strip() for e in extras_text.split(",") if e.strip())
        bad = [e for e in extras if not _EXTRA.match(e)]
        if bad or not extras:
            raise ValueError(f"client spec {raw!r}: bad extras [{extras_text}]")
    if op is None:
        if extras:
            raise ValueError(f"client spec {raw!r}: extras need a version or a source "
                             "(NAME[extra]==VERSION or NAME[extra]@PATH)")
        return ClientSpec(raw, name)
    rest = rest.strip()
    if not rest:
        raise ValueError(f"client spec {raw!r}: nothing after {op!r}")
    if op == "==":
        if not _VERSION.match(rest):
            raise ValueError(f"client spec {raw!r}: {rest!r} is not a version")
        return ClientSpec(raw, name, extras, version=rest, kind="release")
    if rest.startswith(_URL_SCHEMES):
        return ClientSpec(raw, name, extras, source=rest, kind="url")
    path = os.path.abspath(os.path.join(base_dir or os.getcwd(), os.path.expanduser(rest)))
    if path.endswith(".whl"):
        if not os.path.isfile(path):
            raise ValueError(f"client spec {raw!r}: no wheel file at {path}")
        return ClientSpec(raw, name, extras, source=path, kind="wheel")
    if not os.path.isdir(path):
        raise ValueError(f"client spec {raw!r}: no directory at {path}")
    if not any(os.path.isfile(os.path.join(path, f)) for f in ("pyproject.toml", "setup.py",
                                                              "setup.cfg")):
        raise ValueError(f"client spec {raw!r}: {path} has no pyproject.toml or setup.py "
                         "(not a Python package)")
    return ClientSpec(raw, name, extras, source=path, kind="path")


def split_specs(text: str) -> list[str]:
    """Split a ``--clients`` value at commas outside ``[...]`` (extras keep theirs)."""
    out: list[str] = []
    depth, cur = 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]


def parse_specs(texts: list[str] | tuple[str, ...], base_dir: str | None = None) -> list[ClientSpec]:
    """Parse several specs; duplicates (same text) are an error."""
    specs = [parse_spec(t, base_dir) for t in texts]
    seen: set[str] = set()
    for s in specs:
        if s.text in seen:
            raise ValueError(f"client spec {s.text!r} given twice")
        seen.add(s.text)
    return specs
