"""Named workloads for ``httpbench compare`` — the seeds' experiments.

A :class:`Scenario` says what one request is (method, path, body, TLS,
keep-alive) and how many run at once; the runner turns it into primitive
arguments for a client adapter. The built-in scenarios reproduce what people
measured by hand:

* ``get-150b`` / ``get-12k`` / ``post-300k-*`` — HttpClient vs
  HttpURLConnection (2004): small GETs, a 12 KB page, a 300 KB POST streamed
  from a file (and, for contrast, from memory);
* ``get-100k`` — the ab runs against Tomcat's 100 KB changelog page;
* ``download-80k`` / ``download-7m`` / ``download-30m`` — "who downloads a
  file to disk fastest", body streamed to a file, never held in memory;
* ``https-get-150b`` — okhttp vs hutool vs RestTemplate over HTTPS (CPU and
  bytes allocated per request);
* ``get-150b-new-conn`` — keep-alive off (``Connection: close``), what a new
  connection per request costs;
* ``get-150b-concurrent`` — 16 requests in flight: async clients natively,
  sync clients with one thread (and one connection) each;
* ``h2-get-150b`` / ``h2-https-get-150b`` — the same 16 requests in flight over
  HTTP/2 on one connection (h2c with prior knowledge, h2 through ALPN), each
  client in its own idiom (see the adapters); ``h2-download-7m`` — the 7 MB
  download over h2c. The server's per-protocol counts prove the protocol.
* ``h3-get-150b`` / ``h3-get-12k`` / ``h3-download-7m`` — the same requests over
  HTTP/3 (QUIC, verified TLS), one at a time, to the server's HTTP/3 side (a build
  with ngtcp2 and GnuTLS); clients without HTTP/3 are skipped with the reason.
* ``sse-100x1k`` — a server-sent event stream of 100 events of 1 KiB read event by
  event with each client's own streaming API (the count checked every round);
  ``stream-10m-chunked`` — a 10 MB chunked body streamed to a file; ``ws-echo-1k`` /
  ``ws-push-100k`` — a WebSocket message echoed or received per request, by the
  WebSocket clients. Run when named.

User-defined scenarios: ``Scenario(name, method=..., path=..., body_size=...,
tls=..., concurrency=..., protocol="h2")`` or :func:`parse_scenario` for the CLI's
``name:KEY=VALUE,...`` form.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

__all__ = [
    "Scenario",
    "SCENARIOS",
    "DEFAULT_SCENARIOS",
    "H2_SCENARIOS",
    "H3_SCENARIOS",
    "STREAM_SCENARIOS",
    "PROTOCOLS",
    "QUICK_SCENARIOS",
    "get_scenario",
    "parse_scenario",
    "resolve_scenarios",
]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE")
PROTOCOLS = ("http/1.1", "h2", "h3")


@dataclass(frozen=True)
class Scenario:
    """One workload: the request every client repeats, and how many at once.

    ``body_size`` > 0 sends a deterministic body of that size (``body_from``
    ``"mem"``: a bytes object, ``"file"``: streamed from a file on disk);
    ``download`` streams the response body to a file; ``keep_alive=False``
    sends ``Connection: close`` so every request opens a connection;
    ``expect_bytes`` is the response body size checked after each round
    (``None``: not checked). ``duration`` is the default measuring time of one
    round in seconds (``n`` requests instead when given), ``min_n`` the fewest
    requests a round makes. ``protocol`` ``"h2"``: HTTP/2 (h2c with prior
    knowledge without TLS, ALPN with it), ``concurrency`` requests in flight
    on one connection; clients without HTTP/2 are skipped. ``"h3"``: HTTP/3
    (always TLS), one request at a time on one QUIC connection. ``events`` > 0:
    each request reads a server-sent event stream (``path`` an ``/sse`` route) of
    that many events with the client's streaming API and counts them; clients
    without such a reader are skipped with the reason; per-event cost is the
    request's divided by ``events`` (``metadata["events_per_call"]``). ``ws``
    ``"echo"`` / ``"push"``: a WebSocket scenario run by the WebSocket clients only
    (one connection each, set up before the rounds): a request is one message of
    ``ws_size`` bytes sent and its echo received, or the next message the server
    pushes (``path`` ``/ws?push=...``); the server's own message counts prove them.
    ``event_timing`` (with ``events``): each reader also timestamps every event, and
    a round reports the time to first event and the gaps between events
    (``metadata["event_timing"]``), beside the server's own ``interval`` (ms).
    """

    name: str
    description: str = ""
    method: str = "GET"
    path: str = "/bytes/150"
    body_size: int = 0
    body_from: str = "mem"
    download: bool = False
    tls: bool = False
    keep_alive: bool = True
    concurrency: int = 1
    n: int | None = None
    duration: float = 0.25
    min_n: int = 5
    expect_bytes: int | None = None
    protocol: str = "http/1.1"
    events: int = 0
    event_timing: bool = False
    ws: str = ""
    ws_size: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ValueError(f"bad scenario name {self.name!r}: letters, digits, '-', '_', '.'")
        if self.method.upper() not in _METHODS:
            raise ValueError(f"scenario {self.name}: method must be one of {', '.join(_METHODS)}")
        object.__setattr__(self, "method", self.method.upper())
        if not self.path.startswith("/"):
            raise ValueError(f"scenario {self.name}: path must start with '/'")
        if self.body_size < 0:
            raise ValueError(f"scenario {self.name}: body_size must be >= 0")
        if self.body_from not in ("mem", "file"):
            raise ValueError(f"scenario {self.name}: body_from must be 'mem' or 'file'")
        if self.body_size and self.method in ("GET", "HEAD"):
            raise ValueError(f"scenario {self.name}: {self.method} cannot carry a body")
        if not 1 <= self.concurrency <= 1024:
            raise ValueError(f"scenario {self.name}: concurrency must be 1..1024")
        if self.n is not None and self.n < 1:
            raise ValueError(f"scenario {self.name}: n must be >= 1")
        if not self.duration > 0:
            raise ValueError(f"scenario {self.name}: duration must be > 0")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"scenario {self.name}: protocol must be one of "
                             f"{', '.join(PROTOCOLS)}, got {self.protocol!r}")
        if self.protocol == "h2" and not self.keep_alive:
            raise ValueError(f"scenario {self.name}: keep_alive=False has no meaning over h2 "
                             "(Connection: close is not an HTTP/2 header)")
        if self.protocol == "h3" and not (self.tls and self.keep_alive
                                          and self.concurrency == 1):
            raise ValueError(f"scenario {self.name}: h3 needs tls=True, keep_alive=True and "
                             "concurrency 1 (one request at a time on one QUIC connection)")
        if self.events < 0:
            raise ValueError(f"scenario {self.name}: events must be >= 0")
        if self.events and not (self.method == "GET" and self.path.startswith("/sse")
                                and self.protocol == "http/1.1" and not self.download
                                and self.concurrency == 1):
            raise ValueError(f"scenario {self.name}: events needs a GET of an /sse route over "
                             "HTTP/1.1, one at a time, not a download")
        if self.event_timing and not self.events:
            raise ValueError(f"scenario {self.name}: event_timing needs events")
        if self.ws not in ("", "echo", "push"):
            raise ValueError(f"scenario {self.name}: ws must be 'echo' or 'push'")
        if self.ws and not (self.method == "GET" and self.path.startswith("/ws")
                            and self.protocol == "http/1.1" and not self.download
                            and self.concurrency == 1 and self.keep_alive
                            and not self.events and self.ws_size >= 0):
            raise ValueError(f"scenario {self.name}: ws needs a GET of a /ws route over "
                             "HTTP/1.1 on one kept connection, one message at a time")
        if self.protocol == "h2" and self.download and self.concurrency > 1:
            raise ValueError(f"scenario {self.name}: an h2 download runs one transfer at a time "
                             "(concurrency 1)")

    @property
    def is_h2(self) -> bool:
        """True for an HTTP/2 scenario."""
        return self.protocol == "h2"

    @property
    def is_h3(self) -> bool:
        """True for an HTTP/3 scenario."""
        return self.protocol == "h3"

    @property
    def is_post(self) -> bool:
        """True when the request carries a body."""
        return self.body_size > 0

    def replace(self, **changes: object) -> Scenario:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def to_dict(self) -> dict:
        """Plain-JSON form (stored with every result)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Scenario:
        """Inverse of :meth:`to_dict`; unknown keys are a ``ValueError``."""
        names = {f.name for f in dataclasses.fields(cls)}
        bad = set(d) - names
        if bad:
            raise ValueError(f"unknown scenario field(s): {', '.join(sorted(bad))}")
        return cls(**d)


def _builtin() -> dict[str, Scenario]:
    s = [
        Scenario("get-150b", "GET of a ~150-byte body on one kept-alive connection",
                 path="/bytes/150", expect_bytes=150),
        Scenario("get-12k", "GET of a 12 KB page on one kept-alive connection",
                 path="/bytes/12000", expect_bytes=12000),
        Scenario("get-100k", "GET of a 100 KB page on one kept-alive connection",
                 path="/bytes/100000", expect_bytes=100000),
        Scenario("post-300k-file", "POST of 300 KB streamed from a file to /sink",
                 method="POST", path="/sink", body_size=300_000, body_from="file"),
        Scenario("post-300k-mem", "POST of 300 KB from memory (bytes) to /sink",
                 method="POST", path="/sink", body_size=300_000, body_from="mem"),
        Scenario("download-80k", "download of an 80 KB file, streamed to disk",
                 path="/bytes/80000", download=True, expect_bytes=80_000),
        Scenario("download-7m", "download of a 7 MB file, streamed to disk",
                 path="/bytes/7000000", download=True, expect_bytes=7_000_000, min_n=3),
        Scenario("download-30m", "download of a 30 MB file, streamed to disk",
                 path="/bytes/30000000", download=True, expect_bytes=30_000_000,
                 min_n=2, duration=0.4),
        Scenario("https-get-150b", "GET of ~150 bytes over HTTPS (verified), kept alive",
                 path="/bytes/150", tls=True, expect_bytes=150),
        Scenario("get-150b-new-conn", "GET of ~150 bytes, keep-alive off (a connection per request)",
                 path="/bytes/150", keep_alive=False, expect_bytes=150),
        Scenario("get-150b-concurrent", "GET of ~150 bytes, 16 in flight (async natively, sync: threads)",
                 path="/bytes/150", concurrency=16, expect_bytes=150, min_n=32),
        Scenario("h2-get-150b", "GET of ~150 bytes over h2c (prior knowledge), 16 in flight "
                 "on one connection", path="/bytes/150", concurrency=16, expect_bytes=150,
                 min_n=64, protocol="h2"),
        Scenario("h2-https-get-150b", "GET of ~150 bytes over h2 (TLS, ALPN, verified), 16 in "
                 "flight on one connection", path="/bytes/150", tls=True, concurrency=16,
                 expect_bytes=150, min_n=64, protocol="h2"),
        Scenario("h2-download-7m", "download of a 7 MB file over h2c, streamed to disk",
                 path="/bytes/7000000", download=True, expect_bytes=7_000_000, min_n=3,
                 protocol="h2"),
        Scenario("h3-get-150b", "GET of ~150 bytes over HTTP/3 (QUIC, verified), one "
                 "connection", path="/bytes/150", tls=True, expect_bytes=150, protocol="h3"),
        Scenario("h3-get-12k", "GET of a 12 KB page over HTTP/3 (QUIC, verified), one "
                 "connection", path="/bytes/12000", tls=True, expect_bytes=12000, protocol="h3"),
        Scenario("h3-download-7m", "download of a 7 MB file over HTTP/3, streamed to disk",
                 path="/bytes/7000000", tls=True, download=True, expect_bytes=7_000_000,
                 min_n=2, duration=0.4, protocol="h3"),
        Scenario("sse-100x1k", "a server-sent event stream of 100 events of 1 KiB read event "
                 "by event (cost per request / 100 = per event)",
                 path="/sse?events=100&size=1024", events=100, min_n=5),
        Scenario("sse-ttfe", "server-sent events paced 10 ms apart: the time to the first "
                 "event and the gaps between events, minus the server's interval (the "
                 "client's added latency)", path="/sse?events=20&size=64&interval=10",
                 events=20, event_timing=True, min_n=3, duration=0.5),
        Scenario("ws-echo-1k", "WebSocket: a 1 KiB binary message sent and its echo received, "
                 "one at a time on one connection", path="/ws", ws="echo", ws_size=1024,
                 min_n=50),
        Scenario("ws-push-100k", "WebSocket: receiving the server's pushed 16-byte messages, "
                 "one per request (100,000 a round)", path="/ws?push=1000000000&size=16",
                 ws="push", ws_size=16, n=100_000),
        Scenario("stream-10m-chunked", "a 10 MB chunked body in 16 KiB chunks, streamed to a "
                 "file", path="/stream/10000000?chunk=16384", download=True,
                 expect_bytes=10_000_000, min_n=3),
    ]
    return {x.name: x for x in s}


SCENARIOS: dict[str, Scenario] = _builtin()
# HTTP/2 scenarios run when named (``--scenarios h2-get-150b``, or all of H2_SCENARIOS)
H2_SCENARIOS: tuple[str, ...] = tuple(n for n, s in SCENARIOS.items() if s.is_h2)
# HTTP/3 scenarios too (they need a build with HTTP/3: features()['http3-server'])
H3_SCENARIOS: tuple[str, ...] = tuple(n for n, s in SCENARIOS.items() if s.is_h3)
# streaming scenarios too
STREAM_SCENARIOS: tuple[str, ...] = ("sse-100x1k", "stream-10m-chunked", "ws-echo-1k",
                                     "ws-push-100k", "sse-ttfe")
DEFAULT_SCENARIOS: tuple[str, ...] = tuple(n for n in SCENARIOS
                                           if n not in H2_SCENARIOS + H3_SCENARIOS
                                           + STREAM_SCENARIOS)
QUICK_SCENARIOS: tuple[str, ...] = ("get-150b", "post-300k-file", "download-7m", "https-get-150b")


def get_scenario(name: str) -> Scenario:
    """The built-in scenario ``name``; ``KeyError`` with the known names otherwise."""
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None


_BOOL = {"1": True, "true": True, "yes": True, "on": True,
         "0": False, "false": False, "no": False, "off": False}


def parse_scenario(spec: str) -> Scenario:
    """A scenario from ``NAME`` (built-in) or ``NAME:key=value,...`` (user-defined).

    Keys: method, path, body (or body_size, bytes; suffix k/m), body_from
    (mem|file), download, tls, keep_alive, concurrency, n, duration,
    protocol (http/1.1|h2|h3). A
    built-in NAME with keys is that scenario modified, e.g.
    ``get-150b:tls=1,n=500``.
    """
    name, sep, rest = spec.partition(":")
    name = name.strip()
    base = SCENARIOS.get(name)
    if not sep:
        if base is None:
            raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}; "
                             "or define one as NAME:method=POST,path=/sink,body=300k")
        return base
    fields: dict[str, object] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, val = item.partition("=")
        key = key.strip().replace("-", "_")
        if not eq:
            raise ValueError(f"scenario {name}: expected key=value, got {item!r}")
        val = val.strip()
        if key in ("body", "body_size"):
            fields["body_size"] = _size(val)
        elif key in ("download", "tls", "keep_alive"):
            if val.lower() not in _BOOL:
                raise ValueError(f"scenario {name}: {key} must be a boolean, got {val!r}")
            fields[key] = _BOOL[val.lower()]
        elif key in ("concurrency", "n", "min_n", "events", "ws_size"):
            try:
                fields[key] = int(val)
            except ValueError:
                raise ValueError(f"scenario {name}: {key} must be an integer") from None
        elif key == "duration":
            try:
                fields[key] = float(val)
            except ValueError:
                raise ValueError(f"scenario {name}: duration must be a number") from None
        elif key in ("method", "path", "body_from", "description", "protocol", "ws"):
            fields[key] = val
        elif key == "expect_bytes":
            fields[key] = _size(val)
        else:
            raise ValueError(f"scenario {name}: unknown key {key!r}")
    if base is not None:
        return base.replace(**fields)
    if fields.get("body_size") and "method" not in fields:
        fields["method"] = "POST"
    return Scenario(name, description=str(fields.pop("description", "user-defined")), **fields)  # type: ignore[arg-type]


def _size(val: str) -> int:
    v = val.lower().strip()
    mult = 1
    for suf, m in (("kib", 1024), ("mib", 1 << 20), ("k", 1000), ("m", 1_000_000), ("b", 1)):
        if v.endswith(suf):
            v, mult = v[: -len(suf)], m
            break
    try:
        n = int(float(v) * mult)
    except ValueError:
        raise ValueError(f"bad size {val!r} (e.g. 300k, 7m, 150)") from None
    if n < 0:
        raise ValueError(f"bad size {val!r}")
    return n


def resolve_scenarios(specs: list[str | Scenario] | None, quick: bool = False) -> list[Scenario]:
    """Scenario objects from names/specs/objects; ``None`` → the default (or quick) set."""
    if specs is None:
        return [SCENARIOS[n] for n in (QUICK_SCENARIOS if quick else DEFAULT_SCENARIOS)]
    out: list[Scenario] = []
    for s in specs:
        sc = s if isinstance(s, Scenario) else parse_scenario(str(s))
        if any(o.name == sc.name for o in out):
            raise ValueError(f"scenario {sc.name!r} given twice")
        out.append(sc)
    if not out:
        raise ValueError("no scenarios given")
    return out
