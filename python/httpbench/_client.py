"""The native HTTP/1.1 client: ``Client``, ``Response`` and ``Headers``.

``Client`` and ``Response`` are implemented in C (``csrc/module/client.c`` on
top of ``csrc/core/client/hb_client.c`` and ``hb_pool.c``); this module adds the
``Headers`` container that ``Response.headers`` builds on first access.

Example::

    with httpbench.Client(timeout=5.0) as c:
        r = c.get("http://127.0.0.1:8080/bytes/150")
        r.status, r.headers["content-type"], len(r.body)
        c.download("http://127.0.0.1:8080/bytes/31457280", "/tmp/30mb.bin")

Semantics: ``timeout`` is a deadline for the whole request (connect to last
byte, like ``curl --max-time``); keep-alive connections are pooled per
(scheme, host, port) and stale-checked before reuse; an idempotent request
whose reused connection turns out to be closed (no response byte received)
is retried once on a new connection; redirects are not followed. The head is
parsed as it arrives, so a peer that is not speaking HTTP (an SSH banner,
binary junk) fails at once, whatever the timeout. A body held in memory is
capped by ``max_body`` (default 1 GiB; per request too) and grown with the
bytes received, never reserved from the Content-Length alone.
``lenient=True`` accepts bare-LF line ends in responses (RFC 9112 2.2) and
counts them in ``Response.tolerated``. A Client is
safe to use from several threads (the pool is guarded by a mutex; each
request runs on its own connection); the GIL is released during network I/O.

``http2=True``: every request goes over HTTP/2 (h2c with prior knowledge for
``http://``, ALPN ``h2`` for ``https://``, verified as for HTTP/1.1), on one
connection per origin kept by the Client; ``get_many(urls)`` multiplexes a
batch of GETs on it and returns the responses in order. A server that does
not speak HTTP/2 raises ``HTTP2NotSupported`` (never a silent HTTP/1.1).

``c.stream(method, url)`` sends a request and returns a ``Stream`` once the
head is read; its body is read piece by piece in C, as bytes
(``iter_bytes(chunk_size=None)``, chunked framing removed) or as server-sent
events (``iter_events()``, each a ``ServerSentEvent(event, data, id, retry)``
tuple parsed by the WHATWG rules). ``timeout`` bounds each read of a stream;
``max_line`` (default 1 MiB) bounds an event stream's line and event data
(``ProtocolError`` beyond, memory bounded). The connection stays out of the
pool until the body ends; a stream closed earlier closes it. HTTP/1.1 (and
TLS) only: ``FeatureUnavailable`` on an ``http2``/``http3`` client::

    with c.stream("GET", url + "/sse?events=10") as s:
        for ev in s.iter_events():
            ev.event, ev.data, ev.id

Errors: ``ConnectError``, ``RequestTimeout``, ``TLSError``, ``ProtocolError``,
``RemoteClosed`` (a truncated body is always an error), ``BodyTooLarge`` and
``HTTP2NotSupported`` (a ``ProtocolError``),
all subclasses of ``HttpbenchError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ._core import Client, Response, ServerSentEvent, Stream

__all__ = ["Client", "Response", "Headers", "Stream", "ServerSentEvent"]


class Headers:
    """Response headers: ordered, case-insensitive lookup, duplicates kept.

    ``h["Content-Type"]`` and ``h.get(name)`` return the first value (or
    raise ``KeyError`` / return the default); ``h.get_all(name)`` returns every
    value in order; iteration, ``items()``, ``keys()`` and ``values()`` follow
    the order received, with names as sent.
    """

    __slots__ = ("_items", "_index")

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        self._items: list[tuple[str, str]] = list(items)
        index: dict[str, list[str]] = {}
        for name, value in self._items:
            index.setdefault(name.lower(), []).append(value)
        self._index = index

    def get(self, name: str, default: str | None = None) -> str | None:
        """First value of header ``name`` (any case), or ``default``."""
        values = self._index.get(name.lower())
        return values[0] if values else default

    def get_all(self, name: str) -> list[str]:
        """Every value of header ``name`` in the order received (``[]`` if absent)."""
        return list(self._index.get(name.lower(), ()))

    def items(self) -> list[tuple[str, str]]:
        """``(name, value)`` pairs in the order received, duplicates included."""
        return list(self._items)

    def keys(self) -> list[str]:
        """Header names in the order received (duplicates included)."""
        return [n for n, _ in self._items]

    def values(self) -> list[str]:
        """Header values in the order received."""
        return [v for _, v in self._items]

    def __getitem__(self, name: str) -> str:
        values = self._index.get(name.lower())
        if not values:
            raise KeyError(name)
        return values[0]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return self._items == other._items
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"
