"""Any executable given as an argv list, one process per request, measured at process level.

Placeholders in the argv strings are filled from the scenario: ``{url}``,
``{method}``, ``{ca_file}``, ``{out}`` (the download path, or a scratch file),
``{body_file}`` (the request body as a file), ``{body_size}``. Example:
``["wget", "-q", "--ca-certificate={ca_file}", "-O", "{out}", "{url}"]``.
"""

from __future__ import annotations

import shutil

from . import AdapterUnavailable
from ._process import ProcessAdapter

__all__ = ["CommandAdapter"]


class CommandAdapter(ProcessAdapter):
    """Runs ``argv`` (with placeholders filled) per request; exit code 0 is success."""

    name = "command"
    h2_reason = ("a command's protocol is its own argv's; run it in an HTTP/1.1 scenario or a "
                 "scenario of your own")

    def _argv(self) -> list[str]:
        if not self.argv:
            raise ValueError("the command client needs an argv (e.g. commands={'wget': [...]})")
        exe = shutil.which(self.argv[0])
        if exe is None:
            raise AdapterUnavailable(self.name, f"executable {self.argv[0]!r} not found")
        body_file = self._body_path()
        fields = {
            "url": self.url, "method": self.method, "ca_file": self.ca_file or "",
            "out": self.out_path, "body_file": body_file or "", "body_size": str(self.body_size),
        }
        try:
            return [exe] + [a.format(**fields) for a in self.argv[1:]]
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"bad placeholder in command argv {self.argv!r}: {exc}") from None
