"""The compare worker's job: set up one client adapter for one scenario, check and warm
it, measure rounds on command, and the command loop (``serve``) that answers over the
result pipe. The process entry point is ``_worker``; see its docstring for the protocol.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import json
import os
import random
import resource
import ssl
import sys
import threading
import time
import traceback
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from . import _machine, _noise
from ._metadata import system_metadata

__all__ = ["AdapterCall", "Worker", "payload", "serve"]

_MAX_N = 200_000
_MAX_ROUND_S = 30.0
# allocations are counted in separate calls before each timed slice: ~this many seconds
# of calls, within these bounds
ACCOUNT_S = 0.003
ACCOUNT_MIN = 3
ACCOUNT_MAX = 100
_ERR_SAMPLES = 5


def payload(size: int, seed: int = 7) -> bytes:
    """The deterministic request body of ``size`` bytes (same in every worker)."""
    return random.Random(seed).randbytes(size)


class _Errors:
    """Counts failed requests (the round goes on) and keeps a few samples."""

    def __init__(self) -> None:
        self.count = 0
        self.samples: list[str] = []
        self.lock = threading.Lock()

    def add(self, exc: BaseException, count: int = 1) -> None:
        with self.lock:
            self.count += count
            if len(self.samples) < _ERR_SAMPLES:
                self.samples.append(f"{type(exc).__name__}: {exc}"[:300])


def _noop() -> None:
    pass


def _safe_sync(req, errs: _Errors):  # noqa: ANN001, ANN202
    def call() -> None:
        try:
            req()
        except Exception as exc:  # an error is a counted result, never the end of the round
            errs.add(exc)

    return call


def _safe_async(req, errs: _Errors):  # noqa: ANN001, ANN202
    async def call() -> None:
        try:
            await req()
        except Exception as exc:
            errs.add(exc)

    return call


def _request_batch(a: Any, k: int, errs: _Errors) -> None:
    """k requests in one call of a batch adapter; failures counted per request in errs."""
    try:
        bad = a.request_batch(k)
    except Exception as exc:
        errs.add(exc, k)
        return
    if bad:
        errs.add(RuntimeError(f"{bad} of {k} requests of a batch failed "
                              f"(status {a.last_status})"), bad)


def _children_usage() -> tuple[int, int, int]:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return int(ru.ru_utime * 1e9), int(ru.ru_stime * 1e9), int(ru.ru_maxrss) * 1024


class AdapterCall:
    """One request of a client, picklable: the counting child sets up its own
    adapter from these primitives on the first call (its warm-up), then each
    call makes one request (async adapters: on one event loop made there)."""

    def __init__(self, client: str, kind: str, base_url: str, ca_file: str | None,
                 params: dict[str, Any]) -> None:
        self.client, self.kind = client, kind
        self.base_url, self.ca_file, self.params = base_url, ca_file, params
        self._adapter: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("client", "kind", "base_url", "ca_file", "params")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __call__(self) -> None:
        a = self._adapter
        if a is None:
            from ._adapters import load_adapter

            a = load_adapter(self.client)()
            if self.kind == "async":
                self._loop = asyncio.new_event_loop()
                self._loop.run_until_complete(a.asetup(self.base_url, self.ca_file,
                                                       **self.params))
            else:
                a.setup(self.base_url, self.ca_file, **self.params)
            self._adapter = a
        if self._loop is not None:
            self._loop.run_until_complete(a.request())
        else:
            a.request()
        if a.last_status != 200:
            raise RuntimeError(f"{self.client}: status {a.last_status} in a counted request")


class Worker:
    """Holds the adapter instances and runs measured rounds."""

    def __init__(self, job: dict[str, Any]) -> None:
        from ._adapters import load_adapter, require_protocol
        from ._scenarios import Scenario

        self.job = job
        self.client = job["client"]
        self.sc = Scenario.from_dict(job["scenario"])
        self.cls = load_adapter(self.client)
        self.kind = self.cls.kind
        # how `concurrency` requests are in flight: "async" (coroutines on one adapter),
        # "threads" (one adapter per thread), "shared" (one adapter, many threads),
        # "batch" (request_batch on one adapter), "single" (concurrency 1)
        self.protocol_flags = require_protocol(self.cls, self.client, self.sc.protocol)
        if bool(self.sc.ws) != self.cls.ws_only:
            from ._adapters import AdapterUnavailable

            raise AdapterUnavailable(self.client, "speaks WebSocket only (the ws- scenarios)"
                                     if self.cls.ws_only else "no WebSocket client (a "
                                     "WebSocket scenario: the ws clients run it)")
        if self.sc.events and not self.cls.sse:
            from ._adapters import AdapterUnavailable

            raise AdapterUnavailable(self.client, f"no server-sent event reader: "
                                     f"{self.cls.sse_reason}")
        if self.sc.protocol == "h2":
            from ._adapters import AdapterUnavailable

            if self.cls.h2_mode not in ("async", "shared", "batch", "single"):
                raise AdapterUnavailable(self.client, f"no HTTP/2: {self.cls.h2_reason}")
            if self.cls.h2_mode == "single" and self.sc.concurrency > 1:
                raise AdapterUnavailable(self.client, f"one stream at a time over HTTP/2: "
                                         f"{self.cls.h2_reason}")
            if (self.cls.h2_mode == "async") != (self.kind == "async"):
                raise AdapterUnavailable(self.client, f"h2_mode {self.cls.h2_mode!r} does not "
                                         f"fit a {self.kind} adapter")
            self.mode = self.cls.h2_mode if self.sc.concurrency > 1 else "single"
        elif self.kind == "async":
            self.mode = "async"
        else:
            self.mode = "threads" if self.sc.concurrency > 1 else "single"
        self.loop: asyncio.AbstractEventLoop | None = None
        self.requests = 0  # every request this worker made (server stats check)
        self.per_req_ns = 1e6  # running estimate, for duration-based rounds
        self._acct: Any = None  # allocations counted before the next round (see _account)
        self.adapters: list[Any] = []
        self.ref_crc: int | None = None
        self.ref_len: int | None = None
        self.workdir = job["workdir"]
        self._thread_overhead: tuple[dict[str, float], dict[str, float]] | None = None

    # ------------------------------------------------------------ setup
    def _params(self, i: int) -> dict[str, Any]:
        sc = self.sc
        p: dict[str, Any] = {
            "method": sc.method, "path": sc.path, "keep_alive": sc.keep_alive,
            "concurrency": sc.concurrency, "timeout": float(self.job.get("timeout", 10.0)),
            "argv": self.job.get("argv"),
        }
        p.update(self.protocol_flags)
        if sc.events:
            p["events"] = sc.events
            p["event_timing"] = sc.event_timing
        if sc.ws:
            p["ws_mode"], p["ws_size"] = sc.ws, sc.ws_size
        if sc.body_size:
            if sc.body_from == "file":
                p["body_file"] = self.body_file
                p["body_size"] = sc.body_size
            else:
                p["body"] = self.body
        if sc.download:
            p["download_path"] = os.path.join(self.workdir, f"download-{i}.bin")
        return p

    def setup(self) -> dict[str, Any]:
        sc = self.sc
        if sc.body_size:
            self.body = payload(sc.body_size)
            self.body_crc = zlib.crc32(self.body)
            self.body_file = os.path.join(self.workdir, "body.bin")
            with open(self.body_file, "wb") as f:
                f.write(self.body)
        else:
            self.body = None
        if sc.method == "GET" and not sc.body_size and not sc.ws:  # (a plain GET /ws is a 400)
            try:
                self._reference()
            except (OSError, http.client.HTTPException):
                if sc.protocol != "h2":
                    raise
                # a server speaking only h2 on this port: bodies are checked by status
                # and size only
                self.ref_crc = self.ref_len = None
        base, ca = self.job["base_url"], self.job.get("ca_file")
        instances = sc.concurrency if self.mode == "threads" else 1
        if self.kind == "async":
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
            a = self.cls()
            self.loop.run_until_complete(a.asetup(base, ca, **self._params(0)))
            self.adapters = [a]
        else:
            for i in range(instances):
                a = self.cls()
                a.setup(base, ca, **self._params(i))
                self.adapters.append(a)
        from . import _measure

        # many short spans of one shape: calibrate the harness once, not per slice
        _measure.REUSE_CALIBRATION = True
        # Pin only now: imports and set-up of all workers may use every core, the
        # warm-up and the measured rounds run where the runner wants the client.
        cpu = self.job.get("cpu")
        if cpu is not None and hasattr(os, "sched_setaffinity"):
            try:
                os.sched_setaffinity(0, {int(cpu)})
            except OSError:
                pass
        warm = max(int(self.job.get("warmup", 3)), 1)
        if (sc.expect_bytes or 0) + sc.body_size >= 5_000_000:
            warm = 1  # a multi-megabyte transfer warms everything up in one go
        t0 = time.perf_counter_ns()
        errs = _Errors()
        for _ in range(warm):
            self._warm_pass(errs)
        dt = time.perf_counter_ns() - t0
        self.per_req_ns = max(dt / (warm * max(len(self.adapters), sc.concurrency)), 1000.0)
        if errs.count:
            raise RuntimeError(f"warm-up failed: {errs.samples[0]}")
        ver = self.verify()
        if not ver["ok"]:
            raise RuntimeError(f"warm-up response wrong: {ver['detail']}")
        return {"status": "ready", "client": self.client, "scenario": sc.name,
                "requests": self.requests, "metadata": self.metadata()}

    def _one(self, a: Any, errs: _Errors) -> None:
        self.requests += 1
        try:
            if self.kind == "async":
                assert self.loop is not None
                self.loop.run_until_complete(a.request())
            else:
                a.request()
        except Exception as exc:
            errs.add(exc)

    def _batch(self, a: Any, k: int, errs: _Errors) -> None:
        self.requests += k
        _request_batch(a, k, errs)

    def _async_batch(self, a: Any, k: int, errs: _Errors) -> None:
        assert self.loop is not None
        call = _safe_async(a.request, errs)

        async def batch() -> None:
            await asyncio.gather(*(call() for _ in range(k)))

        self.requests += k
        self.loop.run_until_complete(batch())

    def _warm_pass(self, errs: _Errors) -> None:
        """One unmeasured request per connection (async: all the connections the measured
        rounds will keep alive are opened)."""
        sc = self.sc
        if self.kind == "async" and sc.concurrency > 1:
            self._async_batch(self.adapters[0], sc.concurrency, errs)
        elif self.mode == "batch":
            self._batch(self.adapters[0], sc.concurrency, errs)
        else:
            for a in self.adapters:
                self._one(a, errs)

    def _reference(self) -> None:
        """Read the expected response once with http.client (counted in setup requests)."""
        from urllib.parse import urlsplit

        u = urlsplit(self.job["base_url"])
        if u.scheme == "https":
            ctx = ssl.create_default_context(cafile=self.job.get("ca_file"))
            conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=30, context=ctx)
        else:
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        try:
            conn.request("GET", self.sc.path)
            r = conn.getresponse()
            crc, n = 0, 0
            while chunk := r.read(1 << 20):
                crc = zlib.crc32(chunk, crc)
                n += len(chunk)
            self.requests += 1
            if r.status != 200:
                raise RuntimeError(f"reference GET {self.sc.path} answered {r.status}")
            self.ref_crc, self.ref_len = crc, n
        finally:
            conn.close()

    # ------------------------------------------------------------ verify
    def verify(self) -> dict[str, Any]:
        """Check every instance's last response: status, size, CRC (or the sink's CRC)."""
        sc = self.sc
        problems: list[str] = []
        for i, a in enumerate(self.adapters):
            where = f"instance {i}: " if len(self.adapters) > 1 else ""
            if a.last_status != 200:
                problems.append(f"{where}status {a.last_status}")
                continue
            if sc.events:
                if a.last_events != sc.events:
                    problems.append(f"{where}read {a.last_events} events of {sc.events}")
                continue
            if sc.ws:
                from ._server import expected_bytes

                want = b"x" * sc.ws_size if sc.ws == "echo" else expected_bytes(sc.ws_size)
                if a.last_body != want:
                    problems.append(f"{where}message of {len(a.last_body or b'')} bytes is not "
                                    f"the {sc.ws_size} expected")
                continue
            if self.kind == "process" and not getattr(self.cls, "capture_body", False):
                continue  # an arbitrary command: exit code 0 is all we can check
            if sc.body_size and sc.path.startswith("/echo"):
                body = a.last_body or b""
                if body != self.body:
                    problems.append(f"{where}echo returned {len(body)} bytes crc32 "
                                    f"{zlib.crc32(body):08x}, sent {sc.body_size} bytes "
                                    f"crc32 {self.body_crc:08x}")
                continue
            if sc.body_size and not sc.path.startswith("/sink"):
                continue  # another route: the status is what we can check
            if sc.body_size:
                try:
                    got = json.loads(a.last_body)
                    want_crc = f"{self.body_crc:08x}"
                    if int(got["bytes"]) != sc.body_size or str(got["crc32"]).lower() != want_crc:
                        problems.append(f"{where}sink got {got} for {sc.body_size} bytes "
                                        f"crc32 {want_crc}")
                except (ValueError, KeyError, TypeError) as exc:
                    problems.append(f"{where}sink answer unreadable ({exc}): "
                                    f"{(a.last_body or b'')[:80]!r}")
                continue
            if self.ref_crc is None and sc.expect_bytes is None:
                continue
            if sc.download:
                path = a.download_path
                crc, n = 0, 0
                with open(path, "rb") as f:
                    while chunk := f.read(1 << 20):
                        crc = zlib.crc32(chunk, crc)
                        n += len(chunk)
            else:
                body = a.last_body or b""
                crc, n = zlib.crc32(body), len(body)
            if self.ref_crc is not None and (n != self.ref_len or crc != self.ref_crc):
                problems.append(f"{where}body {n} bytes crc32 {crc:08x}, expected "
                                f"{self.ref_len} bytes crc32 {self.ref_crc:08x}")
            elif sc.expect_bytes is not None and n != sc.expect_bytes:
                problems.append(f"{where}body {n} bytes, scenario expects {sc.expect_bytes}")
        return {"ok": not problems, "detail": "; ".join(problems[:3])}

    # ------------------------------------------------------------ deterministic
    def deterministic(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Instructions and syscalls of ``n`` requests, one at a time, made by
        a fresh adapter in counting children (after the timing rounds)."""
        # AdapterCall pickles by its module name, this one: ``_worker`` runs as __main__,
        # which the counting child cannot import
        from . import _measure

        if self.kind == "process":
            return {"status": "skipped",
                    "reason": "a process client runs a child process per request; counting "
                              "a process tree under callgrind is out of scope"}
        params = self._params(0)
        if "download_path" in params:
            params["download_path"] = os.path.join(self.workdir, "download-det.bin")
        fn = AdapterCall(self.job["client"], self.kind, self.job["base_url"],
                         self.job.get("ca_file"), params)
        n = int(cmd.get("n") or _measure.DETERMINISTIC_DEFAULT_CALLS)
        timeout = cmd.get("timeout")
        det = _measure.deterministic_counts(
            fn, n=n, instructions=bool(cmd.get("instructions", True)),
            syscalls=bool(cmd.get("syscalls", True)),
            timeout=None if timeout is None else float(timeout))
        self.requests += n + int(det["metadata"]["deterministic_warmup_calls"])
        fields = {k: list(v) if isinstance(v, tuple) else v for k, v in det["fields"].items()}
        return {"status": "ok", "fields": fields, "metadata": det["metadata"],
                "requests": self.requests}

    # ------------------------------------------------------------ rounds
    def rewarm(self) -> dict[str, Any]:
        """One unmeasured request per connection before a round.

        Other clients' rounds ran in between: this re-opens connections a pool
        expired while idle and re-warms caches, so the round measures steady
        state. Skipped for multi-megabyte transfers (their own cost dwarfs it).
        """
        sc = self.sc
        if (sc.expect_bytes or 0) + sc.body_size >= 1_000_000 or self.kind == "process":
            return {"status": "ok", "requests": 0}
        before = self.requests
        errs = _Errors()
        self._warm_pass(errs)
        if self._sampled_allocs():
            self._account(errs)
        return {"status": "ok", "requests": self.requests - before, "errors": errs.count}

    def _sampled_allocs(self) -> bool:
        """Whether rounds are timed without the allocation hooks, their allocations
        counted in separate calls (``_account``): one request in flight of a Python
        client. The hooks cost 12-13 % more instructions per call of a requests or
        urllib3 GET (callgrind), which would be in its CPU, latency and req/s."""
        return self.kind == "sync" and self.mode == "single" and bool(self.adapters)

    def _account(self, errs: _Errors) -> None:
        """Count the allocations of a few calls (~3 ms of them, 3..100) with the hooks
        armed, outside the timed round that follows; the round takes its per-call
        allocation figures from them."""
        from . import _measure

        k = int(max(ACCOUNT_MIN, min(ACCOUNT_MAX, ACCOUNT_S * 1e9 / max(self.per_req_ns, 1.0))))
        fn = _safe_sync(self.adapters[0].request, errs)
        self._acct = _measure.measure(fn, n=k, warmup=0, alloc=True, gc=False,
                                      placement="unpinned")
        self.requests += self._acct.calls

    def round(self, cmd: dict[str, Any]) -> dict[str, Any]:
        from . import _measure

        sc = self.sc
        dur: float | None = None
        if cmd.get("n"):
            n = int(cmd["n"])
            if sc.concurrency > 1 and self.kind != "async":
                n = max(n - n % sc.concurrency, sc.concurrency)
        else:
            # a time budget: measure() stops at it (stretched so slow requests still
            # make min_n), so a pessimistic warm-up estimate never shortens a round
            n = _MAX_N
            min_n = int(cmd.get("min_n") or sc.min_n)
            base = float(cmd.get("duration") or sc.duration)
            # until both the time and the request count are reached (at the current
            # estimate; the runner re-runs a round that still fell short)
            dur = max(base, min(1.2 * min_n * self.per_req_ns / 1e9, _MAX_ROUND_S))
        errs = _Errors()
        label = f"{self.client}/{sc.name}"
        proc = self.kind == "process"
        for a in self.adapters:  # timings of this round's reads only
            if getattr(a, "event_times", None):
                a.event_times.clear()
        noise0 = _noise.snapshot(self.job.get("cpu"))
        if proc:
            u0, s0, _ = _children_usage()
        if self.kind == "async":
            fn = _safe_async(self.adapters[0].request, errs)
            mr = _measure.measure_async(fn, n=n, duration=dur, concurrency=sc.concurrency,
                                         warmup=0, loop=self.loop, label=label)
        elif self.mode == "batch":
            mr = self._batched(n, dur, errs, label, python_heap=not proc)
        elif sc.concurrency > 1:
            mr = self._threaded(n, dur, errs, label, python_heap=not proc)
        else:
            fn = _safe_sync(self.adapters[0].request, errs)
            acct, self._acct = self._acct, None
            mr = _measure.measure(fn, n=n, duration=dur, warmup=0,
                                   alloc=not proc and acct is None, gc=not proc, label=label)
            if acct is not None and not proc:
                mr = _with_allocs(mr, acct)
        noise1 = _noise.snapshot(self.job.get("cpu"))
        n = mr.calls
        if proc:
            # the children did the work: their CPU and peak RSS; no Python/native heap figures
            u1, s1, rss = _children_usage()
            mr = dataclasses.replace(mr, cpu_user_ns=u1 - u0, cpu_sys_ns=s1 - s0,
                                     cpu_thread_ns=None, peak_rss_bytes=rss,
                                     native_alloc_count=None, native_alloc_bytes=None)
        self.requests += n
        if mr.wall_ns > 0 and mr.calls:
            self.per_req_ns = max(mr.wall_ns / mr.calls, 1000.0)
        mr = dataclasses.replace(mr, errors=errs.count)
        if self.sc.events:  # each request read this many events: budgets per event
            mr = dataclasses.replace(mr, metadata={**mr.metadata,
                                                   "events_per_call": self.sc.events})
        if self.sc.event_timing:
            reads = [t for a in self.adapters for t in getattr(a, "event_times", [])]
            mr = dataclasses.replace(mr, metadata={**mr.metadata,
                                                   "event_timing": event_timing(self.sc, reads)})
        ver = self.verify()
        out = {"status": "ok", "result": mr.to_dict(), "requests": self.requests,
               "round_requests": n, "errors": errs.count, "error_samples": errs.samples,
               "verify": ver, "noise": [noise0, noise1]}
        if cmd.get("control"):
            # the machine-speed index, on the client's CPU, outside the measured span
            out["control_ns"] = _machine.fixed_work_ns(int(cmd["control"]))
            out["working_set_ns"] = _machine.working_set_ns()
        return out

    def _threaded(self, n: int, dur: float | None, errs: _Errors, label: str,
                  python_heap: bool = True) -> Any:
        """Sync client, concurrency k: k threads, each with its own adapter (connection).

        The whole span is one measure() call; per-request latencies are timed
        in the threads. The harness's own Python allocations (the timestamps)
        are measured once on no-op requests and subtracted, like measure()'s
        calibration.
        """

        if self.mode == "shared":  # one thread-safe client (one connection) for every thread
            reqs = [self.adapters[0].request] * self.sc.concurrency
        else:
            reqs = [a.request for a in self.adapters]
        mr, lat, n = self._thread_span(reqs, n, dur, errs, label, python_heap)
        changes: dict[str, Any] = {"calls": n, "latency": lat, "concurrency": len(reqs),
                                   "overhead_ns_per_call": None,
                                   "overhead_allocs_per_call": None}
        if python_heap and mr.alloc_counts is not None and mr.alloc_bytes is not None:
            if self._thread_overhead is None:
                noop_n = 50 * len(reqs)
                cal, _, _ = self._thread_span([_noop] * len(reqs), noop_n, 3600.0, _Errors(),
                                              "noop", True)
                self._thread_overhead = (
                    {d: v / noop_n for d, v in (cal.alloc_counts or {}).items()},
                    {d: v / noop_n for d, v in (cal.alloc_bytes or {}).items()})
            oc, ob = self._thread_overhead
            changes["alloc_counts"] = {d: max(0, round(v - oc.get(d, 0.0) * n))
                                       for d, v in mr.alloc_counts.items()}
            changes["alloc_bytes"] = {d: max(0, round(v - ob.get(d, 0.0) * n))
                                      for d, v in mr.alloc_bytes.items()}
            changes["overhead_allocs_per_call"] = sum(oc.values())
            md = dict(mr.metadata)
            md["threaded_harness_allocs_per_call"] = sum(oc.values())
            changes["metadata"] = md
        return dataclasses.replace(mr, **changes)

    def _batched(self, n: int, dur: float | None, errs: _Errors, label: str,
                 python_heap: bool = True) -> Any:
        """Batch client, concurrency k: each call multiplexes k requests on one
        connection. Totals (CPU, allocations, wall) are the span's; per request,
        a batch counts k requests, and each request's latency is its batch's
        (from the batch's start until all k ended)."""
        from . import _measure

        k = self.sc.concurrency
        a = self.adapters[0]

        def batch() -> None:
            _request_batch(a, k, errs)

        mr = _measure.measure(batch, n=max(n // k, 1), duration=dur, warmup=0,
                               alloc=python_heap, gc=python_heap, label=label)
        lat = mr.latency.copy()
        lat.reset()
        for value, count in mr.latency:
            lat.record(value, count * k)
        md = dict(mr.metadata)
        md["batch_size"] = k
        md["latency_scope"] = "batch: each request's latency is its batch's"
        return dataclasses.replace(
            mr, calls=mr.calls * k, latency=lat, concurrency=k, metadata=md,
            overhead_ns_per_call=(None if mr.overhead_ns_per_call is None
                                  else mr.overhead_ns_per_call / k),
            overhead_allocs_per_call=(None if mr.overhead_allocs_per_call is None
                                      else mr.overhead_allocs_per_call / k))

    def _thread_span(self, reqs: list[Any], n: int, dur: float | None, errs: _Errors,
                     label: str, python_heap: bool) -> tuple[Any, Any, int]:
        """k threads, each making up to n/k requests (until the deadline, if any)."""
        from . import _core, _measure

        k = len(reqs)
        per = [n // k + (1 if i < n % k else 0) for i in range(k)]
        done = [0] * k
        hists = [_core.Histogram() for _ in range(k)]
        start = threading.Barrier(k + 1)
        span_ns = int(dur * 1e9) if dur is not None else 1 << 62
        t_start = [0]

        def body(i: int) -> None:
            req, rec, clock = reqs[i], hists[i].record, time.perf_counter_ns
            start.wait()
            end = t_start[0] + span_ns
            count = 0
            for _ in range(per[i]):
                t0 = clock()
                if t0 >= end:
                    break
                try:
                    req()
                except Exception as exc:
                    errs.add(exc)
                rec(clock() - t0)
                count += 1
            done[i] = count

        threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(k)]
        for t in threads:
            t.start()

        def run_all() -> None:
            t_start[0] = time.perf_counter_ns()
            start.wait()
            for t in threads:
                t.join()

        mr = _measure.measure(run_all, n=1, warmup=0, alloc=python_heap, gc=python_heap,
                               calibrate=False, label=label)
        lat = hists[0]
        for h in hists[1:]:
            lat.merge(h)
        return mr, lat, sum(done)

    def metadata(self) -> dict[str, Any]:
        machine = system_metadata()
        md: dict[str, Any] = {
            "pid": os.getpid(),
            **{k: machine[k] for k in ("python", "python_implementation", "openssl")},
            "client_version": self.cls.version(),
            "loaded_versions": _loaded_versions(),
            "kind": self.kind,
            "instances": len(self.adapters),
            "protocol": self.sc.protocol,
            "inflight_mode": self.mode,
        }
        try:  # the CPUs this worker may run on (it may be pinned); "cpus" is their count
            md["affinity"] = sorted(os.sched_getaffinity(0))
            md["cpus"] = len(md["affinity"])
        except (AttributeError, OSError):
            pass
        md["native_alloc_counter"] = _native_counters() is not None
        return md

    def close(self) -> None:
        for a in self.adapters:
            try:
                if self.kind == "async" and self.loop is not None:
                    self.loop.run_until_complete(a.aclose())
                else:
                    a.close()
            except Exception:  # closing is best effort; the results are already out
                pass
        if self.loop is not None:
            self.loop.close()


_STACK = ("urllib3", "requests", "httpx", "httpcore", "h11", "anyio", "aiohttp", "yarl",
          "multidict", "pycurl", "niquests", "curl_cffi", "pyreqwest", "wreq", "primp", "httpx2",
          "httpcore2", "httpxyz", "httpcorexyz", "aiosonic", "certifi", "idna",
          "charset_normalizer", "ssl")


def _loaded_versions() -> dict[str, str]:
    """Versions of the HTTP stack modules this worker actually imported."""
    out: dict[str, str] = {}
    for name in _STACK:
        mod = sys.modules.get(name)
        if mod is None:
            continue
        v = getattr(mod, "__version__", None) or getattr(mod, "OPENSSL_VERSION", None)
        if name == "pycurl":
            v = getattr(mod, "version", v)
        if isinstance(v, str):
            out[name] = v
    return out


def _native_counters() -> dict[str, int] | None:
    """The preloaded malloc counter's totals, or None when this process runs without it."""
    try:
        from ._measure import native_allocs
    except ImportError:
        return None
    try:
        return native_allocs()
    except Exception:
        return None


def _with_allocs(mr: Any, acct: Any) -> Any:
    """``mr`` (timed without allocation hooks) with the allocation figures of ``acct``
    (calls counted with them, right before), per call, scaled to ``mr``'s calls."""
    calls = mr.calls
    per = calls / acct.calls if acct.calls else 0.0

    def scaled(d: dict[str, int] | None) -> dict[str, int] | None:
        return None if d is None else {k: round(v * per) for k, v in d.items()}

    md = dict(mr.metadata)
    for key, value in acct.metadata.items():
        if key.startswith(("alloc_", "overhead_allocs", "native_")):
            md[key] = value
    md["alloc_sampled_calls"] = acct.calls
    md["alloc_sampled"] = ("allocations (Python and native) counted in separate calls right "
                           "before the timed ones, scaled per call: the timing carries no "
                           "allocation hooks")
    nat = {} if acct.native_alloc_count is None else {
        "native_alloc_count": round(acct.native_alloc_count * per),
        "native_alloc_bytes": round((acct.native_alloc_bytes or 0) * per)}
    return dataclasses.replace(
        mr, alloc_counts=scaled(acct.alloc_counts), alloc_bytes=scaled(acct.alloc_bytes),
        alloc_net_count=None, alloc_net_bytes=None,
        overhead_allocs_per_call=acct.overhead_allocs_per_call, metadata=md, **nat)


def serve(lines: Iterator[bytes], send: Callable[[dict[str, Any]], None]) -> int:
    """Run one worker: the first line is the job, then one command per line."""
    line = next(lines, b"")
    if not line.strip():
        return 2
    job = json.loads(line)
    from ._adapters import AdapterUnavailable

    try:
        w = Worker(job)
    except AdapterUnavailable as exc:
        send({"status": "skipped", "reason": exc.reason, "pip_name": exc.pip_name})
        return 0
    except Exception as exc:
        send({"status": "error", "stage": "load", "error": f"{type(exc).__name__}: {exc}",
              "traceback": traceback.format_exc()[-3000:], "requests": 0})
        return 1
    try:
        send(w.setup())
    except AdapterUnavailable as exc:
        send({"status": "skipped", "reason": exc.reason, "pip_name": exc.pip_name})
        w.close()
        return 0
    except Exception as exc:
        send({"status": "error", "stage": "setup", "error": f"{type(exc).__name__}: {exc}",
              "traceback": traceback.format_exc()[-3000:], "requests": w.requests})
        w.close()
        return 1
    try:
        for line in lines:
            cmd = json.loads(line)
            if cmd.get("cmd") == "close":
                break
            if cmd.get("cmd") == "rewarm":
                send(w.rewarm())
                continue
            if cmd.get("cmd") == "deterministic":
                try:
                    send(w.deterministic(cmd))
                except Exception as exc:
                    send({"status": "error", "stage": "deterministic",
                          "error": f"{type(exc).__name__}: {exc}",
                          "traceback": traceback.format_exc()[-3000:], "requests": w.requests})
                continue
            if cmd.get("cmd") == "run":
                try:
                    send(w.round(cmd))
                except Exception as exc:
                    send({"status": "error", "stage": "run",
                          "error": f"{type(exc).__name__}: {exc}",
                          "traceback": traceback.format_exc()[-3000:], "requests": w.requests})
    finally:
        w.close()
    return 0



def event_timing(sc: Any, reads: list[list[int]]) -> dict[str, Any]:
    """The ``sse-ttfe`` figures of a round's reads (each [start, event times...], ns):
    time to first event and gap between events, p50/p99, and the gaps minus the
    server's interval (``interval=`` of the path, ms): the client's added latency."""
    from urllib.parse import parse_qs, urlsplit

    def percentile(xs: list[int], p: int) -> int:  # nearest rank, of sorted xs
        return xs[min(len(xs) - 1, max(0, -(-p * len(xs) // 100) - 1))]

    q = parse_qs(urlsplit(sc.path).query)
    interval_ns = int(q.get("interval", ["0"])[0]) * 1_000_000
    ttfe = sorted(t[1] - t[0] for t in reads if len(t) > 1)
    gaps = sorted(b - a for t in reads for a, b in zip(t[1:], t[2:], strict=False))
    out: dict[str, Any] = {"reads": len(reads), "events": sum(len(t) - 1 for t in reads),
                           "interval_ns": interval_ns}
    for name, xs in (("ttfe", ttfe), ("gap", gaps)):
        for p in (50, 99):
            v = percentile(xs, p) if xs else None
            out[f"{name}_p{p}_ns"] = v
            if name == "gap":
                out[f"added_gap_p{p}_ns"] = None if v is None else v - interval_ns
    return out
