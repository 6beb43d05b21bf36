"""The git state of a directory: commit, branch and whether tracked files changed.

One ``git status --porcelain=v2 --branch --untracked-files=no`` call (a few ms)
gives all three; a directory outside any repository, or no git installed, is
``None`` (a history run then simply has no commit).
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

__all__ = ["git_state"]


def git_state(path: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """``{"commit", "branch", "dirty"}`` of the work tree holding ``path`` (default: cwd).

    ``commit`` is the full hash (None before the first commit), ``branch`` None when
    detached, ``dirty`` True when a tracked file differs from the commit."""
    where = os.fspath(path) if path is not None else os.getcwd()
    try:
        out = subprocess.run(
            ["git", "-C", where, "status", "--porcelain=v2", "--branch",
             "--untracked-files=no"],
            capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    commit = branch = None
    dirty = False
    for line in out.stdout.splitlines():
        if line.startswith("# branch.oid "):
            oid = line.split(" ", 2)[2].strip()
            commit = None if oid.startswith("(") else oid
        elif line.startswith("# branch.head "):
            head = line.split(" ", 2)[2].strip()
            branch = None if head.startswith("(") else head
        elif line and not line.startswith("#"):
            dirty = True
    return {"commit": commit, "branch": branch, "dirty": dirty}
