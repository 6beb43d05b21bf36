"""Reading a server-sent event stream with each library's own streaming API.

A streaming scenario (``Scenario(events=N)``) makes each request read a whole
``text/event-stream`` response event by event, the way a user of that library
consumes one: httpx through ``httpx-sse`` when installed (else
``iter_lines``), requests ``iter_lines``, urllib3's line iteration, aiohttp's
``content`` lines, pycurl a write callback, http.client ``readline``, curl_cffi
``iter_lines`` of a ``stream=True`` response, the native client's
``Client.stream().iter_events()`` (parsed in C). Every
reader counts the events it saw by the WHATWG rule (a blank line ends a block;
the block is an event when it had a ``data`` field) into ``last_events``; the
runner checks the count against the scenario's. With the adapter's
``event_timing`` (the ``sse-ttfe`` scenario) each reader also timestamps the
read's start and every event as it is dispatched (``Adapter.stream_times``).
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["Dispatch", "read_requests", "read_httpx", "aread_httpx", "read_urllib3",
           "aread_aiohttp", "read_pycurl", "read_http_client", "read_curl_cffi", "read_native",
           "read_wreq", "read_pyreqwest", "Lines"]


class Dispatch:
    """Counts event dispatches over a stream's lines (line ends already removed)."""

    __slots__ = ("events", "data", "times")

    def __init__(self, times: list[int] | None = None) -> None:
        self.events = 0
        self.data = False
        self.times = times  # each dispatch's perf_counter_ns appended, when given

    def line(self, line: bytes) -> None:
        if not line:
            if self.data:
                self.events += 1
                self.data = False
                if self.times is not None:
                    self.times.append(time.perf_counter_ns())
        elif line[:4] == b"data" and line[4:5] in (b":", b""):
            self.data = True


def _dispatched(e: Any) -> bool:
    """httpx-sse also yields a block with only a ``retry`` (or ``id``) field, which the
    WHATWG rules do not dispatch (no data): such an item is not counted."""
    return bool(e.data) or e.event != "message"


def read_requests(a: Any) -> None:
    d = Dispatch(a.stream_times())
    with a.session.get(a.url, headers=a.hdrs, stream=True, timeout=a.timeout,
                       verify=a.verify) as r:
        for line in r.iter_lines():
            d.line(line)
    a.last_status, a.last_events = r.status_code, d.events


def read_httpx(a: Any) -> None:
    times = a.stream_times()
    with a.client.stream("GET", a.url, headers=a.hdrs) as r:
        if a.sse_lib is not None and times is None:
            n = sum(1 for e in a.sse_lib.EventSource(r).iter_sse() if _dispatched(e))
        elif a.sse_lib is not None:
            n = 0
            for e in a.sse_lib.EventSource(r).iter_sse():
                if _dispatched(e):
                    n += 1
                    times.append(time.perf_counter_ns())
        else:
            d = Dispatch(times)
            for line in r.iter_lines():
                d.line(line.encode())
            n = d.events
    a.last_status, a.last_events = r.status_code, n


async def aread_httpx(a: Any) -> None:
    times = a.stream_times()
    async with a.client.stream("GET", a.url, headers=a.hdrs) as r:
        if a.sse_lib is not None:
            n = 0
            async for e in a.sse_lib.EventSource(r).aiter_sse():
                if _dispatched(e):
                    n += 1
                    if times is not None:
                        times.append(time.perf_counter_ns())
        else:
            d = Dispatch(times)
            async for line in r.aiter_lines():
                d.line(line.encode())
            n = d.events
    a.last_status, a.last_events = r.status_code, n


def read_urllib3(a: Any) -> None:
    d = Dispatch(a.stream_times())
    r = a.pm.request("GET", a.url, headers=a.hdrs, preload_content=False)
    for line in r:
        d.line(line.rstrip(b"\r\n"))
    r.release_conn()
    a.last_status, a.last_events = r.status, d.events


async def aread_aiohttp(a: Any) -> None:
    d = Dispatch(a.stream_times())
    async with a.session.get(a.url, headers=a.hdrs) as r:
        async for line in r.content:
            d.line(line.rstrip(b"\r\n"))
    a.last_status, a.last_events = r.status, d.events


class Lines:
    """Feeds a stream's chunks, split anywhere, to a Dispatch line by line."""

    __slots__ = ("d", "tail")

    def __init__(self, d: Dispatch) -> None:
        self.d, self.tail = d, b""

    def feed(self, chunk: bytes) -> None:
        lines = (self.tail + chunk).split(b"\n")
        self.tail = lines.pop()
        for line in lines:
            self.d.line(line.rstrip(b"\r"))


def read_pycurl(a: Any) -> None:
    d = Dispatch(a.stream_times())
    tail = [b""]

    def write(chunk: bytes) -> None:
        lines = (tail[0] + chunk).split(b"\n")
        tail[0] = lines.pop()
        for line in lines:
            d.line(line.rstrip(b"\r"))

    c, pc = a.c, a.pc
    c.setopt(pc.WRITEFUNCTION, write)
    c.perform()
    a.last_status, a.last_events = c.getinfo(pc.RESPONSE_CODE), d.events


def read_http_client(a: Any) -> None:
    d = Dispatch(a.stream_times())
    a.conn.request("GET", a.path, headers=a.headers)
    r = a.conn.getresponse()
    while line := r.readline():
        d.line(line.rstrip(b"\r\n"))
    a.last_status, a.last_events = r.status, d.events


def read_curl_cffi(a: Any) -> None:
    d = Dispatch(a.stream_times())
    r = a.session.get(a.url, headers=a.hdrs, stream=True)
    try:
        for line in r.iter_lines():
            d.line(line.rstrip(b"\r"))
    finally:
        r.close()
    a.last_status, a.last_events = r.status_code, d.events


def read_native(a: Any) -> None:
    """``Client.stream()``: the events parsed in C, counted by the stream."""
    times = a.stream_times()
    with a.client.stream("GET", a.url, headers=a.hdrs) as r:
        if times is None:
            for _ in r.iter_events():
                pass
        else:
            for _ in r.iter_events():
                times.append(time.perf_counter_ns())
    a.last_status, a.last_events = r.status, r.events


def read_wreq(a: Any) -> None:
    """wreq's blocking client: ``Response.stream()`` chunks, split into lines."""
    d = Dispatch(a.stream_times())
    lines = Lines(d)
    with a.client.request(a.meth, a.url, **a.kw) as r:
        for chunk in r.stream():
            lines.feed(bytes(chunk))
        a.last_status = r.status.as_int()
    a.last_events = d.events


def read_pyreqwest(a: Any) -> None:
    """pyreqwest's SyncClient: a streamed response's ``body_reader`` chunks, split into lines."""
    d = Dispatch(a.stream_times())
    lines = Lines(d)
    with a._builder().build_streamed() as r:
        reader = r.body_reader
        while (chunk := reader.read_chunk()) is not None:
            lines.feed(bytes(chunk))
        a.last_status = r.status
    a.last_events = d.events
