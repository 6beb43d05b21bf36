"""The curl command-line tool, one process per request (or per download), as users run it.

HTTP/1.1 scenarios over TLS pass ``--http1.1`` (curl would take h2 by ALPN).
Over HTTP/2: ``--http2-prior-knowledge`` (h2c) or ``--http2`` (ALPN); the
scenario's requests in flight are one process per batch, ``--parallel`` with
one URL per request (curl multiplexes them on one connection). Over HTTP/3:
``--http3-only`` when ``curl -V`` lists the HTTP3 feature, skipped with that
reason otherwise.
"""

from __future__ import annotations

import shutil
import subprocess

from . import AdapterUnavailable
from ._process import ProcessAdapter

__all__ = ["CurlAdapter"]


def _curl_version() -> tuple[int, ...] | None:
    """curl's version as numbers, from ``curl --version`` (None: unknown)."""
    first = CurlAdapter.version() or ""
    parts = first.split()
    if len(parts) < 2 or parts[0] != "curl":
        return None
    try:
        return tuple(int(x) for x in parts[1].split(".")[:3])
    except ValueError:
        return None


def _curl_features() -> set[str]:
    """The feature names ``curl -V`` lists (empty when unknown)."""
    exe = shutil.which("curl")
    if exe is None:
        return set()
    try:
        out = subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return set()
    for line in out.stdout.splitlines():
        if line.startswith("Features:"):
            return set(line.split()[1:])
    return set()


class CurlAdapter(ProcessAdapter):
    """``curl -sS --fail -o OUT [--cacert CA] URL``; bodies with ``--data-binary @file``
    (read into memory, ``*-mem``) or ``-T file -X POST`` (streamed, ``*-file``)."""

    name = "curl"
    pip_name = None
    capture_body = True
    h2_mode = "batch"
    h3 = True

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

    def _setup(self) -> None:
        if self.http3 and "HTTP3" not in _curl_features():
            raise AdapterUnavailable(self.name, f"this curl is built without HTTP/3 "
                                     f"({self.version() or 'curl'}: no HTTP3 in curl -V)")
        if self.http2 and not self.tls and self.concurrency > 1:
            ver = _curl_version()
            if ver is not None and ver < (8, 0):
                # its prior-knowledge code breaks when a second transfer reuses the connection
                raise AdapterUnavailable(
                    self.name, f"curl {'.'.join(map(str, ver))}: --http2-prior-knowledge fails "
                    "on a reused connection (error 16; fixed in curl 8.0)")
        super()._setup()
        if self.http2 and self.concurrency > 1:
            self.batch_outs = [self._scratch_out() for _ in range(self.concurrency)]
            base = self._argv()[:-3]  # without "-o OUT URL"
            self.batch_cmd = [*base, "--parallel", "--parallel-max", str(self.concurrency)]
            for out in self.batch_outs:
                self.batch_cmd += ["-o", out, self.url]

    def request_batch(self, k: int) -> int:
        if k != self.concurrency or not hasattr(self, "batch_cmd"):
            raise ValueError(f"curl: a batch of {k} needs http2 and concurrency {k}")
        self._spawn(self.batch_cmd)
        with open(self.batch_outs[-1], "rb") as f:
            self.last_body = f.read()
        return 0

    def _argv(self) -> list[str]:
        argv = [shutil.which("curl") or "curl", "-sS", "--fail"]
        if self.http3:
            argv.append("--http3-only")
        elif self.http2:
            argv.append("--http2" if self.tls else "--http2-prior-knowledge")
        elif self.tls:
            argv.append("--http1.1")  # curl would take h2 by ALPN: not the scenario's protocol
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
        return argv + ["-o", self.out_path, self.url]
