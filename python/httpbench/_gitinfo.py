"""The git state of a directory: commit, branch and whether tracked files changed.

One ``git status --porcelain=v2 --branch --untracked-files=no`` call (a few ms)
gives all three; a directory outside any repository, or no git installed, is
``None`` (a history run then simply has no commit).
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

__all__ = ["git_state", "git_state_finish", "git_state_start"]


def git_state_start(path: str | os.PathLike[str] | None = None) -> subprocess.Popen[str] | None:
    """Start reading the git state of ``path`` (default: cwd); :func:`git_state_finish`
    collects it, so the few ms of git overlap the caller's own work."""
    where = os.fspath(path) if path is not None else os.getcwd()
    try:
        return subprocess.Popen(
            ["git", "-C", where, "status", "--porcelain=v2", "--branch",
             "--untracked-files=no"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return None


def git_state_finish(proc: subprocess.Popen[str] | None) -> dict[str, Any] | None:
    """The state :func:`git_state_start` began reading (None outside a repository)."""
    if proc is None:
        return None
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.SubprocessError:
        proc.kill()
        proc.communicate()
        return None
    if proc.returncode != 0:
        return None
    commit = branch = None
    dirty = False
    for line in out.splitlines():
        if line.startswith("# branch.oid "):
            oid = line.split(" ", 2)[2].strip()
            commit = None if oid.startswith("(") else oid
        elif line.startswith("# branch.head "):
            head = line.split(" ", 2)[2].strip()
            branch = None if head.startswith("(") else head
        elif line and not line.startswith("#"):
            dirty = True
    return {"commit": commit, "branch": branch, "dirty": dirty}


def git_state(path: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """``{"commit", "branch", "dirty"}`` of the work tree holding ``path`` (default: cwd).

    ``commit`` is the full hash (None before the first commit), ``branch`` None when
    detached, ``dirty`` True when a tracked file differs from the commit."""
    return git_state_finish(git_state_start(path))
