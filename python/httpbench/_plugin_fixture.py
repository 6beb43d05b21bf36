"""The pytest plugin's fixtures' objects: the session's embedded server and the
``httpbench`` helper that measures, records and checks every result of a test.

The fixtures themselves are declared in ``plugin`` (pytest collects them from there).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ._plugin_session import BUDGET_KEY, MARKER_KEY, Record, session_of

__all__ = ["Httpbench", "HttpbenchServer"]


class HttpbenchServer:
    """The embedded test server of the session: HTTP and HTTPS, each started on first use.

    Starting lazily keeps sessions that only ``measure()`` pure callables free of servers.
    """

    def __init__(self) -> None:
        self._http: Any = None
        self._https: Any = None

    def _start(self, tls: bool) -> Any:
        from ._features import h3_missing
        from ._server import Server

        # the TLS server also serves HTTP/3 (UDP, the same port number) when the build can
        # HTTP/3 served but not advertised: a client that follows Alt-Svc stays on TCP, so an
        # HTTPS test measures what it did before; protocol="h3" asks for QUIC explicitly
        srv = Server(tls=tls, h3=tls and h3_missing() is None, alt_svc=False)
        enter = getattr(srv, "__enter__", None)
        return enter() if enter is not None else srv

    def _plain(self) -> Any:
        if self._http is None:
            self._http = self._start(False)
        return self._http

    def _tls(self) -> Any:
        if self._https is None:
            self._https = self._start(True)
        return self._https

    @property
    def url(self) -> str:
        """Base URL of the plain-HTTP server (no trailing slash)."""
        return self._plain().url.rstrip("/")

    @property
    def https_url(self) -> str:
        """Base URL of the HTTPS server (no trailing slash)."""
        return self._tls().url.rstrip("/")

    @property
    def ca_file(self) -> str:
        """PEM file with the HTTPS server's certificate (pass as ``ca_file=``)."""
        return self._tls().ca_file

    @property
    def h3(self) -> bool:
        """Whether the HTTPS server also serves HTTP/3 (on UDP at the same port number)."""
        return bool(self._tls().h3)

    def url_for(self, path: str = "/", tls: bool = False) -> str:
        """Full URL of ``path`` on the HTTP (or, with ``tls``, HTTPS) server."""
        if not path.startswith("/"):
            path = "/" + path
        return (self.https_url if tls else self.url) + path

    def stats(self, tls: bool = False) -> Any:
        """Server-side statistics of the HTTP (or HTTPS) server."""
        return (self._tls() if tls else self._plain()).stats()

    def close(self) -> None:
        """Stop whichever servers were started."""
        for srv in (self._http, self._https):
            if srv is not None:
                exit_ = getattr(srv, "__exit__", None)
                if exit_ is not None:
                    exit_(None, None, None)
                else:
                    srv.close()
        self._http = self._https = None


class Httpbench:
    """Helper of the ``httpbench`` fixture: measure against the session's server.

    Every result returned by :meth:`measure`, :meth:`measure_async` and
    :meth:`bench` is recorded for the current test, checked against the test's
    ``@pytest.mark.httpbench(budget=...)`` (raising ``BudgetExceeded``) and,
    with ``--httpbench-compare``, against the baseline (raising
    ``BaselineRegression`` after ``repeats`` runs).
    """

    def __init__(self, request: pytest.FixtureRequest, server: HttpbenchServer) -> None:
        self.server = server
        self._request = request
        self._node = request.node
        self._session = session_of(request.config)
        self.results: list[Any] = []

    def url(self, path: str = "/", tls: bool = False) -> str:
        """Full URL of ``path`` on the session's server (HTTPS with ``tls=True``)."""
        return self.server.url_for(path, tls=tls)

    def client(self, name: str, path: str = "/", *, tls: bool | None = None,
               protocol: str = "http/1.1", **params: Any) -> Any:
        """A client adapter (``httpbench._adapters``) set up for ``path`` on the session server.

        ``name``: "native", "http.client", "urllib3", "requests", "httpx", "httpx-async",
        "aiohttp", "pycurl", ... or "package.module:Class". ``params`` go to the
        adapter's ``setup`` (method, body, keep_alive, ...). Each ``request()`` call makes
        one request; measure it with ``httpbench.measure(c.request)`` (async adapters:
        ``httpbench.measure_async(c.request)``, set up on measure_async's default loop).
        The adapter is closed at the end of the test. A client whose library is not
        installed skips the test.

        ``protocol="h3"`` (implies ``tls``): the request goes over HTTP/3 to the HTTPS
        server's UDP side, as compare's h3 scenarios make it; the test is skipped,
        saying why, when the adapter declares no HTTP/3, its library lacks it, or this
        build of httpbench has no HTTP/3.
        """
        from ._adapters import AdapterUnavailable, load_adapter, require_protocol

        if protocol not in ("http/1.1", "h3"):
            raise ValueError(f"httpbench.client: protocol must be 'http/1.1' or 'h3', "
                             f"got {protocol!r}")
        if protocol == "h3":
            if tls is False:
                raise ValueError("httpbench.client: protocol='h3' needs TLS (HTTP/3 is "
                                 "always TLS); leave tls out or pass tls=True")
            tls = True
        try:
            cls = load_adapter(name)
            params.update(require_protocol(cls, name, protocol))
        except AdapterUnavailable as exc:
            pytest.skip(f"httpbench client {exc}")
        if protocol == "h3":
            from ._features import H3_CLIENT_MISSING

            if not self.server.h3:
                pytest.skip(f"httpbench client {name} over HTTP/3: {H3_CLIENT_MISSING}")
        if not path.startswith("/"):
            path = "/" + path
        base = self.server.https_url if tls else self.server.url
        ca_file = self.server.ca_file if tls else None
        adapter = cls()
        try:
            if adapter.kind == "async":
                from ._measure import event_loop

                loop = event_loop()
                loop.run_until_complete(adapter.asetup(base, ca_file, path=path, **params))
                self._request.addfinalizer(lambda: loop.run_until_complete(adapter.aclose()))
            else:
                adapter.setup(base, ca_file, path=path, **params)
                self._request.addfinalizer(adapter.close)
        except AdapterUnavailable as exc:  # a library built without the protocol
            pytest.skip(f"httpbench client {exc}")
        return adapter

    def measure(self, fn: Callable[..., Any], *, name: str | None = None, **kwargs: Any) -> Any:
        """``httpbench.measure(fn, **kwargs)``, recorded for this test (see the class doc)."""
        from ._measure import measure

        __tracebackhide__ = True
        kwargs = self._deterministic_kwargs(kwargs, name)
        return self._run("measure", lambda: measure(fn, **kwargs), name, kwargs)

    def measure_async(self, coro_fn: Callable[..., Any], *, name: str | None = None,
                      **kwargs: Any) -> Any:
        """``httpbench.measure_async(coro_fn, **kwargs)``, recorded for this test."""
        from ._measure import measure_async

        __tracebackhide__ = True
        return self._run("measure", lambda: measure_async(coro_fn, **kwargs), name,
                         kwargs)

    def bench(self, path_or_url: str = "/", *, name: str | None = None, **kwargs: Any) -> Any:
        """``httpbench.bench(url, **kwargs)`` where a path ("/bytes/150") means this server.

        ``tls=True`` selects the HTTPS server; an https URL of the session
        server is verified against its CA file unless ``ca_file``/``verify`` are given.
        """
        from ._bench import bench

        __tracebackhide__ = True
        tls = bool(kwargs.pop("tls", False))
        url = path_or_url if "://" in path_or_url else self.url(path_or_url, tls=tls)
        if url.startswith("https://") and "ca_file" not in kwargs and kwargs.get("verify", True) \
                and self.server._https is not None and url.startswith(self.server.https_url):
            kwargs["ca_file"] = self.server.ca_file
        return self._run("bench", lambda: bench(url, **kwargs), name, kwargs)

    def _deterministic_kwargs(self, kwargs: dict[str, Any], name: str | None) -> dict[str, Any]:
        """Count instructions / syscalls when the marker budget or the baseline entry
        names them and the caller did not say otherwise."""
        wanted: set[str] = set()
        for lim in self._node.stash.get(BUDGET_KEY, None) or ():
            wanted.add(lim.metric.name)
        s = self._session
        if s.baseline is not None:
            n = self._name_peek(name)
            key = f"{self._node.nodeid}[{n}]" if n else self._node.nodeid
            wanted.update((s.baseline.entries.get(key) or {}).get("metrics", {}))
        out = dict(kwargs)
        if "instructions_per_request" in wanted:
            out.setdefault("instructions", True)
        if "syscalls_per_request" in wanted:
            out.setdefault("syscalls", True)
        return out

    def _name_peek(self, name: str | None) -> str:
        if name:
            return str(name)
        n = len(self._session.for_node(self._node.nodeid))
        return "" if n == 0 else f"#{n}"

    # the recording / checking core
    def _name(self, name: str | None) -> str:
        """The measurement's name within the test: given, or "" / "#1", "#2"... by order."""
        if name:
            name = str(name)
            if any(r.name == name for r in self._session.for_node(self._node.nodeid)):
                raise ValueError(f"measurement name {name!r} is used twice in this test; "
                                 "names key the baseline, give each measurement its own")
            return name
        n = len(self._session.for_node(self._node.nodeid))
        return "" if n == 0 else f"#{n}"

    def _run(self, kind: str, run: Callable[[], Any], name: str | None,
             kwargs: dict[str, Any]) -> Any:
        from ._baseline import BaselineRegression, compare_metrics
        from ._budget import BudgetExceeded, check_budget, result_metrics

        __tracebackhide__ = True  # failures point at the test's call, not at the plugin
        s = self._session
        name = self._name(name)
        key = f"{self._node.nodeid}[{name}]" if name else self._node.nodeid
        opts = self._node.stash.get(MARKER_KEY, {})
        limits = self._node.stash.get(BUDGET_KEY, None)
        result, cal = s.calibrated(run)
        metrics = result_metrics(result)
        # A fixed count (not also cut short by a duration) makes request counts comparable.
        bounded = kwargs.get("n") is not None and kwargs.get("duration") is None
        rec = Record(key=key, nodeid=self._node.nodeid, name=name, kind=kind,
                     metrics=metrics, bounded=bounded, calibration=cal, result=result,
                     functions=_functions_of(result))
        if cal is not None and s.speeds:
            rec.speed_ns = s.speeds[-1]
        s.add(rec)
        self.results.append(result)

        error: AssertionError | None = None
        if limits:
            rows = check_budget(metrics, limits)
            rec.budget_rows = rows
            rec.budget_failed = [r.limit.metric.name for r in rows if not r.ok]
            if rec.budget_failed:
                error = BudgetExceeded(rows, label=key)

        entry = s.baseline.entries.get(key) if s.baseline is not None else None
        rec.has_baseline = entry is not None
        if entry is not None and error is None:  # a broken budget already fails the test
            tol = opts.get("tolerance", s.tolerance)
            repeats = opts.get("repeats", s.repeats)
            both_bounded = bounded and bool(entry.get("bounded", False))
            scale = s.scale_for(entry, cal)
            rec.machine = scale - 1.0 if scale != 1.0 else None

            def compare() -> list[Any]:
                return compare_metrics(entry["metrics"], metrics, kind=kind, scale=scale,
                                       tolerance=tol, bounded=both_bounded,
                                       instructions_tolerance=s.instructions_tolerance)

            rows = compare()
            # Timing noise: re-run while a timing metric looks slower, keeping the best of each
            # (every run's timings brought to the first run's calibration).
            while rec.runs < repeats and any(r.verdict == "slower" and not r.metric.deterministic
                                             for r in rows):
                again, cal_i = s.calibrated(run)
                rec.runs += 1
                adjust = (cal / cal_i) if cal and cal_i else 1.0
                for m, v in result_metrics(again).items():
                    if m in metrics and not _is_deterministic(m) and m != "requests":
                        if _upper(m):
                            metrics[m] = min(metrics[m], v * adjust)
                        else:
                            metrics[m] = max(metrics[m], v / adjust)
                rows = compare()
            rec.compare_rows = rows
            rec.regressed = [r.metric.name for r in rows if r.verdict == "slower"]
            rec.improved = [r.metric.name for r in rows if r.verdict == "faster"]
            if rec.regressed or (s.fail_faster and rec.improved):
                from ._baseline import function_movers

                detail = ""
                if "instructions_per_request" in rec.regressed + rec.improved:
                    detail = function_movers(entry.get("functions") or {}, rec.functions)
                error = BaselineRegression(rows, key=key, scale=scale, fail_faster=s.fail_faster,
                                           detail=detail)
        if error is not None:
            raise error
        return result


def _functions_of(result: Any) -> dict[str, float]:
    """Inclusive instructions per call of the top functions (measure(instructions=True))."""
    top = getattr(result, "metadata", {}).get("callgrind_top") or []
    return {str(t[0]): float(t[1]) for t in top if isinstance(t, (list, tuple)) and len(t) >= 2}


def _is_deterministic(name: str) -> bool:
    from ._budget import METRICS

    return METRICS[name].deterministic


def _upper(name: str) -> bool:
    from ._budget import METRICS

    return METRICS[name].upper

