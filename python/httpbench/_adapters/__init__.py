"""Client adapters: one module per HTTP client, one small interface.

Every adapter is set up with primitives only (base URL, CA file, method,
path, body bytes or a body file path, a download path, keep-alive) and then
performs exactly one request per :meth:`Adapter.request` call, reading the
body completely (or streaming it to the download file). The same rules hold
for every client so the numbers are comparable: one kept-alive connection
unless keep-alive is off, TLS verified against the server's CA (never
disabled), library defaults otherwise — libraries are measured as users get
them.

``kind`` tells the runner how to drive an adapter: ``"sync"`` (call
``request()``), ``"async"`` (``await request()`` on one persistent event
loop; ``asetup``/``aclose`` are coroutines) or ``"process"`` (each request is
a child process; cost is measured at process level from the children's
rusage).

Your own client: subclass :class:`Adapter` in an importable module and pass
``"package.module:ClassName"`` as the client name.

HTTP/2 scenarios (``protocol="h2"``): ``configure(http2=True)`` asks for
HTTP/2 (h2c with prior knowledge for ``http://``, ALPN for ``https://``);
``h2_mode`` says how a client keeps ``concurrency`` requests in flight on one
connection, in its own idiom: ``"async"`` (coroutines gathered on one
client), ``"shared"`` (one thread-safe client used from that many threads) or
``"batch"`` (:meth:`Adapter.request_batch` multiplexes that many requests and
returns when all are done); ``"single"``: HTTP/2 one request at a time only,
so scenarios with more in flight skip it with ``h2_reason``. ``h2_mode =
None``: the client has no HTTP/2 and is skipped with ``h2_reason``.

A client whose library is not installed raises :class:`AdapterUnavailable`
from :func:`load_adapter` carrying the pip name, and the runner reports it as
skipped.
"""

from __future__ import annotations

import importlib
import importlib.util
import time
from typing import ClassVar
from urllib.parse import urlsplit

__all__ = [
    "Adapter",
    "AdapterUnavailable",
    "ADAPTERS",
    "DEFAULT_CLIENTS",
    "WS_CLIENTS",
    "CHUNK",
    "load_adapter",
    "require_protocol",
    "is_custom",
    "adapter_status",
    "available_clients",
    "library_version",
]

# Read/write block for adapters whose API needs one (requests' iter_content
# defaults to 1 byte, which nobody uses for downloads).
CHUNK = 65536

# client name -> (module, class name)
ADAPTERS: dict[str, tuple[str, str]] = {
    "native": ("httpbench._adapters.native", "NativeAdapter"),
    "http.client": ("httpbench._adapters.http_client", "HttpClientAdapter"),
    "urllib3": ("httpbench._adapters.urllib3_", "Urllib3Adapter"),
    "requests": ("httpbench._adapters.requests_", "RequestsAdapter"),
    "httpx": ("httpbench._adapters.httpx_", "HttpxAdapter"),
    "httpx-async": ("httpbench._adapters.httpx_", "HttpxAsyncAdapter"),
    "aiohttp": ("httpbench._adapters.aiohttp_", "AiohttpAdapter"),
    "pycurl": ("httpbench._adapters.pycurl_", "PycurlAdapter"),
    "niquests": ("httpbench._adapters.niquests_", "NiquestsAdapter"),
    "curl_cffi": ("httpbench._adapters.curl_cffi_", "CurlCffiAdapter"),
    "curl_cffi-async": ("httpbench._adapters.curl_cffi_", "CurlCffiAsyncAdapter"),
    "pyreqwest": ("httpbench._adapters.pyreqwest_", "PyreqwestAdapter"),
    "pyreqwest-async": ("httpbench._adapters.pyreqwest_", "PyreqwestAsyncAdapter"),
    "wreq": ("httpbench._adapters.wreq_", "WreqAdapter"),
    "wreq-async": ("httpbench._adapters.wreq_", "WreqAsyncAdapter"),
    "primp": ("httpbench._adapters.primp_", "PrimpAdapter"),
    "primp-async": ("httpbench._adapters.primp_", "PrimpAsyncAdapter"),
    "httpx2": ("httpbench._adapters.httpx2_", "Httpx2Adapter"),
    "httpx2-async": ("httpbench._adapters.httpx2_", "Httpx2AsyncAdapter"),
    "httpxyz": ("httpbench._adapters.httpx2_", "HttpxyzAdapter"),
    "httpxyz-async": ("httpbench._adapters.httpx2_", "HttpxyzAsyncAdapter"),
    "aiosonic": ("httpbench._adapters.aiosonic_", "AiosonicAdapter"),
    "aioquic": ("httpbench._adapters.aioquic_", "AioquicAdapter"),
    "curl": ("httpbench._adapters.curl", "CurlAdapter"),
    "command": ("httpbench._adapters.command", "CommandAdapter"),
    # WebSocket clients: they run the ws- scenarios only
    "websockets": ("httpbench._adapters.ws_", "WebsocketsAdapter"),
    "websockets-async": ("httpbench._adapters.ws_", "WebsocketsAsyncAdapter"),
    "aiohttp-ws": ("httpbench._adapters.ws_", "AiohttpWsAdapter"),
    "picows": ("httpbench._adapters.ws_", "PicowsAdapter"),
    "wsproto": ("httpbench._adapters.ws_", "WsprotoAdapter"),
    "curl_cffi-ws": ("httpbench._adapters.ws_", "CurlCffiWsAdapter"),
}

# the WebSocket clients (``compare --scenarios ws-echo-1k --clients websockets,...``)
WS_CLIENTS: tuple[str, ...] = ("websockets", "websockets-async", "aiohttp-ws", "picows",
                               "wsproto", "curl_cffi-ws")

# `httpbench compare` with no --clients: every one of these that is installed
# ("command" needs an argv, aioquic speaks HTTP/3 only and the WebSocket clients WebSocket
# only: they run when asked for).
DEFAULT_CLIENTS: tuple[str, ...] = tuple(n for n in ADAPTERS
                                         if n not in ("command", "aioquic", *WS_CLIENTS))


class AdapterUnavailable(Exception):
    """The client cannot run here (library not installed, binary missing)."""

    def __init__(self, client: str, reason: str, pip_name: str | None = None) -> None:
        self.client = client
        self.reason = reason
        self.pip_name = pip_name
        hint = f" (pip install {pip_name})" if pip_name else ""
        super().__init__(f"{client}: {reason}{hint}")


class Adapter:
    """Base class: stores the primitives; subclasses implement the calls.

    Subclass contract: ``_setup()`` builds the client and its connection
    state; ``request()`` makes one request and sets ``last_status`` (and
    ``last_body`` for non-downloads) so the runner can verify results after a
    round; ``close()`` releases everything. Async adapters implement
    ``_asetup()``, ``async request()`` and ``aclose()`` instead.
    """

    name: ClassVar[str] = ""
    kind: ClassVar[str] = "sync"
    #: distribution to import/version-check; pip name shown when missing
    dist: ClassVar[str | None] = None
    pip_name: ClassVar[str | None] = None
    modules: ClassVar[tuple[str, ...]] = ()

    #: how the client runs an HTTP/2 scenario (see the module doc); None: it cannot
    h2_mode: ClassVar[str | None] = None
    h2_reason: ClassVar[str] = "the adapter declares no HTTP/2 mode (h2_mode)"
    #: the client can be told to use HTTP/3 only (``configure(http3=True)``), one request
    #: at a time; ``h3_reason`` says why not when False (checked at setup for builds
    #: whose library may lack it)
    h3: ClassVar[bool] = False
    h3_reason: ClassVar[str] = "the adapter declares no HTTP/3 (h3)"
    #: the client speaks HTTP/3 and nothing else (it runs only the h3 scenarios)
    h3_only: ClassVar[bool] = False
    #: the adapter reads server-sent event streams (``Scenario(events=N)``, see sse_.py)
    sse: ClassVar[bool] = False
    sse_reason: ClassVar[str] = "no server-sent event reader is wired for this client"
    #: a WebSocket client: it runs the WebSocket scenarios (``Scenario(ws=...)``) and only them
    ws_only: ClassVar[bool] = False

    last_status: int = 0
    last_body: bytes | None = None
    last_events: int = 0
    #: ``event_timing``: per stream read, [start, event 1, event 2, ...] in perf_counter_ns
    event_times: list[list[int]]

    def configure(
        self,
        base_url: str,
        ca_file: str | None = None,
        *,
        method: str = "GET",
        path: str = "/",
        body: bytes | None = None,
        body_file: str | None = None,
        body_size: int = 0,
        download_path: str | None = None,
        keep_alive: bool = True,
        concurrency: int = 1,
        timeout: float = 30.0,
        argv: list[str] | None = None,
        http2: bool = False,
        http3: bool = False,
        events: int = 0,
        event_timing: bool = False,
        ws_mode: str = "",
        ws_size: int = 0,
    ) -> None:
        """Store the request description (primitives only)."""
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be http(s)://..., got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + path
        parts = urlsplit(self.base_url)
        self.scheme = parts.scheme
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.tls = parts.scheme == "https"
        self.ca_file = ca_file
        self.method = method.upper()
        self.path = path
        self.body = body
        self.body_file = body_file
        self.body_size = len(body) if body is not None else body_size
        self.download_path = download_path
        self.keep_alive = keep_alive
        self.concurrency = concurrency
        self.timeout = timeout
        self.argv = list(argv) if argv else None
        self.http2 = http2
        self.http3 = http3
        self.events = events  # > 0: each request reads an event stream of that many events
        self.event_timing = event_timing  # timestamp every event (the sse-ttfe scenario)
        self.event_times = []
        self.ws_mode = ws_mode  # "echo" / "push": a request is one WebSocket message
        self.ws_size = ws_size
        # Keep-alive off is the same header for every client.
        self.headers: dict[str, str] = {} if keep_alive else {"Connection": "close"}

    def stream_times(self) -> list[int] | None:
        """With ``event_timing``: a new list holding the read's start (perf_counter_ns),
        kept in ``event_times``, for the reader to append each event's time to."""
        if not self.event_timing:
            return None
        t = [time.perf_counter_ns()]
        self.event_times.append(t)
        return t

    def setup(self, base_url: str, ca_file: str | None = None, **params: object) -> None:
        """Configure and build the client (sync and process adapters)."""
        self.configure(base_url, ca_file, **params)  # type: ignore[arg-type]
        self._setup()

    async def asetup(self, base_url: str, ca_file: str | None = None, **params: object) -> None:
        """Configure and build the client inside the running loop (async adapters)."""
        self.configure(base_url, ca_file, **params)  # type: ignore[arg-type]
        await self._asetup()

    def _setup(self) -> None:
        raise NotImplementedError

    async def _asetup(self) -> None:
        raise NotImplementedError

    def request(self):  # noqa: ANN201 - a coroutine function on async adapters
        """Perform one request, reading the whole body (or writing it to disk)."""
        raise NotImplementedError

    def request_batch(self, k: int) -> int:
        """``h2_mode == "batch"``: ``k`` requests in flight at once, multiplexed on one
        connection; returns when all have ended, with the number that failed (a
        failure of the whole batch raises). ``last_status`` is 200 only when all
        answered 200; ``last_body`` is one of their bodies."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the client (sync and process adapters)."""

    async def aclose(self) -> None:
        """Release the client (async adapters)."""

    def ssl_context(self):  # noqa: ANN201
        """A default verifying SSL context trusting the server's CA file."""
        import ssl

        return ssl.create_default_context(cafile=self.ca_file)

    @classmethod
    def check(cls) -> None:
        """Raise :class:`AdapterUnavailable` if this client cannot run here."""
        for mod in cls.modules:
            if importlib.util.find_spec(mod) is None:
                raise AdapterUnavailable(cls.name, f"module {mod!r} not installed", cls.pip_name)

    @classmethod
    def version(cls) -> str | None:
        """Version of the client library (``None`` if unknown).

        The imported module's ``__version__`` wins over the distribution's
        metadata: another package can replace a library's files (niquests'
        urllib3-future installs itself as ``urllib3``), and the table must say
        what actually ran. The module is not imported here (see the worker).
        """
        import sys

        mod = sys.modules.get(cls.modules[0]) if cls.modules else None
        modver = getattr(mod, "__version__", None) if mod is not None else None
        distver = library_version(cls.dist) if cls.dist else None
        if isinstance(modver, str) and distver and modver != distver:
            return (f"{modver} (the loaded module; the '{cls.dist}' distribution says "
                    f"{distver}: another package replaced its files)")
        return modver if isinstance(modver, str) else distver


def library_version(dist: str) -> str | None:
    """Installed version of distribution ``dist``, or ``None``."""
    import importlib.metadata  # slow to import: only when versions are asked for

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def load_adapter(name: str) -> type[Adapter]:
    """The adapter class of client ``name``.

    ``KeyError`` for an unknown name; :class:`AdapterUnavailable` when the
    client is not installed (checked without importing the library).
    """
    if name in ADAPTERS:
        modname, clsname = ADAPTERS[name]
    elif is_custom(name):
        modname, _, clsname = name.partition(":")
    else:
        raise KeyError(f"unknown client {name!r}; known: {', '.join(ADAPTERS)} "
                       "(or module:Class of your own Adapter subclass)")
    try:
        mod = importlib.import_module(modname)
    except ImportError as exc:
        if name in ADAPTERS:
            raise
        raise AdapterUnavailable(name, f"cannot import {modname!r}: {exc}") from None
    cls = getattr(mod, clsname, None)
    if not (isinstance(cls, type) and issubclass(cls, Adapter)):
        raise KeyError(f"{name!r}: {clsname!r} is not an httpbench Adapter subclass in {modname}")
    cls.check()
    return cls


def require_protocol(cls: type[Adapter], client: str, protocol: str) -> dict[str, bool]:
    """The ``configure()`` flags that ask adapter ``cls`` for ``protocol`` ("http/1.1",
    "h2", "h3"); :class:`AdapterUnavailable` when it declares no HTTP/3 for "h3", or speaks
    HTTP/3 only and was asked for another. HTTP/2's concurrency modes are the caller's."""
    if protocol == "h3" or cls.h3_only:
        if protocol != "h3":
            raise AdapterUnavailable(client, "speaks HTTP/3 only (the h3 scenarios)")
        if not cls.h3:
            raise AdapterUnavailable(client, f"no HTTP/3: {cls.h3_reason}")
        return {"http3": True}
    return {"http2": True} if protocol == "h2" else {}


def is_custom(name: str) -> bool:
    """True for a ``package.module:Class`` client name (a user's own adapter)."""
    mod, sep, cls = name.partition(":")
    return bool(sep and mod and cls.isidentifier()
                and all(p.isidentifier() for p in mod.split(".")))


def adapter_status(name: str) -> tuple[bool, str | None, str | None]:
    """``(available, reason, pip_name)`` for client ``name``."""
    try:
        load_adapter(name)
    except AdapterUnavailable as exc:
        return False, exc.reason, exc.pip_name
    except KeyError as exc:
        return False, str(exc.args[0]), None
    return True, None, None


def available_clients(names: tuple[str, ...] | list[str] = DEFAULT_CLIENTS) -> list[str]:
    """The clients of ``names`` that are installed here."""
    return [n for n in names if adapter_status(n)[0]]
