"""niquests (a requests-compatible client): one ``Session``."""

from __future__ import annotations

from .requests_ import RequestsAdapter

__all__ = ["NiquestsAdapter"]


class NiquestsAdapter(RequestsAdapter):
    """Same calls as requests (niquests is API-compatible)."""

    name = "niquests"
    dist = "niquests"
    pip_name = "niquests"
    modules = ("niquests",)
    _lib = "niquests"
