"""httpx2 and httpxyz: forks of httpx with its API, measured by the httpx adapters.

Each installs its own modules (``httpx2`` / ``httpcore2``, ``httpxyz`` /
``httpcorexyz``) beside httpx's; HTTP/2 uses the ``h2`` package like httpx.
httpxyz, imported before httpx, registers itself as ``httpx`` and
``httpcore`` in ``sys.modules`` (and its pytest plugin imports it in every
pytest run), so where it is installed ``import httpx`` in a test process can
be httpxyz: no extra installs it; the httpx adapters refuse to run on it.
"""

from __future__ import annotations

from .httpx_ import HttpxAdapter, HttpxAsyncAdapter

__all__ = ["Httpx2Adapter", "Httpx2AsyncAdapter", "HttpxyzAdapter", "HttpxyzAsyncAdapter"]


class Httpx2Adapter(HttpxAdapter):
    name = "httpx2"
    dist = pip_name = _lib = "httpx2"
    modules = ("httpx2",)
    h2_reason = HttpxAdapter.h2_reason.replace("httpx", "httpx2")


class Httpx2AsyncAdapter(HttpxAsyncAdapter):
    name = "httpx2-async"
    dist = pip_name = _lib = "httpx2"
    modules = ("httpx2",)


class HttpxyzAdapter(HttpxAdapter):
    name = "httpxyz"
    dist = pip_name = _lib = "httpxyz"
    modules = ("httpxyz",)
    h2_reason = HttpxAdapter.h2_reason.replace("httpx", "httpxyz")


class HttpxyzAsyncAdapter(HttpxAsyncAdapter):
    name = "httpxyz-async"
    dist = pip_name = _lib = "httpxyz"
    modules = ("httpxyz",)
