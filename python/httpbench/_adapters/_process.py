"""Shared code of the process-level adapters (curl CLI, any command)."""

from __future__ import annotations

import os
import tempfile
from typing import ClassVar

from . import Adapter

__all__ = ["ProcessAdapter"]


class ProcessAdapter(Adapter):
    """Each request is one child process (spawned, waited for); exit code 0 means success.

    The runner measures these at process level: wall time per request, the
    children's CPU (``RUSAGE_CHILDREN``) and their peak RSS.
    """

    kind = "process"
    #: read the output file back as ``last_body`` (for verification) after each request
    capture_body: ClassVar[bool] = False

    def _argv(self) -> list[str]:
        raise NotImplementedError

    def _setup(self) -> None:
        self.out_path = self.download_path or self._scratch_out()
        self.cmd = self._argv()
        self.devnull = os.open(os.devnull, os.O_RDWR)
        # stdin/stdout from /dev/null, stderr kept so a failing child says why
        self.file_actions = [
            (os.POSIX_SPAWN_DUP2, self.devnull, 0),
            (os.POSIX_SPAWN_DUP2, self.devnull, 1),
        ]
        self.last_rc = 0
        # the children are measured as users run them: without our malloc counter
        self.env = dict(os.environ)
        pre = [p for p in self.env.get("LD_PRELOAD", "").split(":")
               if p and "_mcount" not in os.path.basename(p)]
        if pre:
            self.env["LD_PRELOAD"] = ":".join(pre)
        else:
            self.env.pop("LD_PRELOAD", None)

    def _scratch_out(self) -> str:
        fd, path = tempfile.mkstemp(prefix="httpbench-out-")
        os.close(fd)
        self._temps().append(path)
        return path

    def _body_path(self) -> str | None:
        """The request body as a file for the child: ``body_file``, else ``body`` written to
        a scratch file (removed on close), else None (no body)."""
        if self.body_file is not None:
            return self.body_file
        if self.body is None:
            return None
        with tempfile.NamedTemporaryFile(prefix="httpbench-body-", delete=False) as f:
            f.write(self.body)
        self._temps().append(f.name)
        return f.name

    def _temps(self) -> list[str]:
        if not hasattr(self, "_tmp_paths"):
            self._tmp_paths: list[str] = []
        return self._tmp_paths

    def _spawn(self, cmd: list[str]) -> None:
        """Run ``cmd`` to its end; a non-zero exit is a ``RuntimeError``."""
        pid = os.posix_spawnp(cmd[0], cmd, self.env, file_actions=self.file_actions)
        _, status = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        self.last_rc = rc
        if rc != 0:
            raise RuntimeError(f"{cmd[0]} exited with {rc}")
        self.last_status = 200

    def request(self) -> None:
        self._spawn(self.cmd)
        if self.download_path is None and self.capture_body:
            with open(self.out_path, "rb") as f:
                self.last_body = f.read()

    def close(self) -> None:
        os.close(self.devnull)
        for path in self._temps():
            try:
                os.unlink(path)
            except OSError:
                pass
