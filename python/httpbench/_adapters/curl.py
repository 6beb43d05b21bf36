"""The curl command-line tool, one process per request (or per download), as users run it."""

from __future__ import annotations

import shutil
import subprocess

from . import AdapterUnavailable
from ._process import ProcessAdapter

__all__ = ["CurlAdapter"]


class CurlAdapter(ProcessAdapter):
    """``curl -sS --fail -o OUT [--cacert CA] URL``; bodies with ``--data-binary @file``
    (read into memory, ``*-mem``) or ``-T file -X POST`` (streamed, ``*-file``)."""

    name = "curl"
    pip_name = None
    capture_body = True

    @classmethod
    def check(cls) -> None:
        if shutil.which("curl") is None:
            raise AdapterUnavailable(cls.name, "curl executable not found on PATH "
                                     "(apt-get install curl)")

    @classmethod
    def version(cls) -> str | None:
        exe = shutil.which("curl")
        if exe is None:
            return None
        try:
            out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            return None
        first = out.stdout.splitlines()[:1]
        return first[0] if first else None

    def _argv(self) -> list[str]:
        argv = [shutil.which("curl") or "curl", "-sS", "--fail", "-o", self.out_path]
        if self.tls and self.ca_file:
            argv += ["--cacert", self.ca_file]
        for k, v in self.headers.items():
            argv += ["-H", f"{k}: {v}"]
        src = self._body_path()
        if src is not None:
            if self.body_file is not None:
                argv += ["-T", src, "-X", self.method]
            else:
                argv += ["--data-binary", "@" + src, "-X", self.method,
                         "-H", "Content-Type: application/octet-stream"]
        elif self.method != "GET":
            argv += ["-X", self.method]
        return argv + [self.url]
