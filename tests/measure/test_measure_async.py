"""httpbench.measure_async(): C-side per-request timing on one persistent loop,
concurrency, exceptions, and real async clients against the embedded server."""

from __future__ import annotations

import asyncio

import httpbench
import pytest
from httpbench import _core, _measure


def disarmed() -> bool:
    return _core._alloc_hooks_state()[1] == 0 and not _core._acct_active()


@pytest.mark.parametrize("concurrency", [1, 8])
def test_counts_and_concurrency(concurrency: int) -> None:
    in_flight = 0
    peak = 0
    done = 0

    async def req() -> None:
        nonlocal in_flight, peak, done
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0)
        in_flight -= 1
        done += 1

    r = httpbench.measure_async(req, n=400, concurrency=concurrency, warmup=0)
    assert r.calls == 400 and done == 400
    assert r.latency.count == 400
    assert r.concurrency == concurrency
    assert peak == concurrency
    assert r.metadata["mode"] == "async"
    assert r.alloc_counts is not None and r.gc_collections is not None
    assert disarmed()


def test_sleep_latency_and_overlap() -> None:
    async def nap() -> None:
        await asyncio.sleep(0.002)

    r = httpbench.measure_async(nap, n=80, concurrency=8, warmup=8)
    assert r.calls == 80
    assert 2_000_000 <= r.p50 <= 50_000_000
    # 8 in flight: 80 naps of 2 ms take far less than 160 ms sequentially.
    assert r.wall_ns < 80 * 2_000_000


def test_uses_one_persistent_loop() -> None:
    loops = set()

    async def which() -> None:
        loops.add(id(asyncio.get_running_loop()))

    httpbench.measure_async(which, n=50, concurrency=4)
    httpbench.measure_async(which, n=50, concurrency=2)
    assert loops == {id(_measure.event_loop())}


def test_exception_propagates_and_cancels_the_rest() -> None:
    started = 0

    async def fails_on_ten() -> None:
        nonlocal started
        started += 1
        if started == 10:
            raise ConnectionError("boom")
        await asyncio.sleep(0.001)

    with pytest.raises(ConnectionError, match="boom"):
        httpbench.measure_async(fails_on_ten, n=10_000, concurrency=4, warmup=0)
    assert started < 100
    assert disarmed()
    loop = _measure.event_loop()
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    assert pending == []


def test_validation() -> None:
    async def ok() -> None:
        return None

    with pytest.raises(ValueError):
        httpbench.measure_async(ok, n=10, concurrency=0)
    with pytest.raises(TypeError):
        httpbench.measure_async(3, n=10)  # type: ignore[arg-type]

    async def inside() -> None:
        httpbench.measure_async(ok, n=1)

    with pytest.raises(RuntimeError, match="running loop"):
        asyncio.run(inside())


def test_explicit_loop_and_duration() -> None:
    loop = asyncio.new_event_loop()
    try:
        seen = set()

        async def note() -> None:
            seen.add(id(asyncio.get_running_loop()))
            await asyncio.sleep(0.001)

        r = httpbench.measure_async(note, duration=0.05, concurrency=2, loop=loop, warmup=0)
        assert seen == {id(loop)}
        assert r.calls >= 2
        assert r.wall_ns >= 50_000_000
    finally:
        loop.close()

# exact deltas of the server's counters: no other module's traffic may land in them
pytestmark = pytest.mark.own_server


def _requests(srv) -> int:
    return int(srv.stats()["requests"])


@pytest.mark.parametrize("concurrency", [1, 8])
def test_aiohttp_against_embedded_server(server, concurrency: int) -> None:
    aiohttp = pytest.importorskip("aiohttp")
    loop = _measure.event_loop()

    async def open_session():
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency))

    session = loop.run_until_complete(open_session())
    url = server.url + "/bytes/100"
    bodies = []

    async def get() -> None:
        async with session.get(url) as resp:
            assert resp.status == 200
            bodies.append(await resp.read())

    try:
        before = _requests(server)
        r = httpbench.measure_async(get, n=200, concurrency=concurrency, warmup=5)
        after = _requests(server)
    finally:
        loop.run_until_complete(session.close())
    assert r.calls == 200
    assert after - before == 200 + 5  # measured + warm-up, nothing else
    assert len(bodies) == 205
    assert bodies[0] == httpbench.expected_bytes(100)
    assert r.latency.count == 200
    assert r.alloc_counts["obj"] > 0
    assert r.p50 > 0


@pytest.mark.slow
@pytest.mark.parametrize("concurrency", [1, 8])
def test_httpx_async_against_embedded_server(server, concurrency: int) -> None:
    httpx = pytest.importorskip("httpx")
    loop = _measure.event_loop()
    client = httpx.AsyncClient(limits=httpx.Limits(max_connections=concurrency))
    url = server.url + "/"

    async def get() -> None:
        resp = await client.get(url)
        assert resp.status_code == 200

    try:
        before = _requests(server)
        r = httpbench.measure_async(get, n=100, concurrency=concurrency, warmup=3)
        after = _requests(server)
    finally:
        loop.run_until_complete(client.aclose())
    assert r.calls == 100
    assert after - before == 103


def test_uvloop_persistent_loop() -> None:
    uvloop = pytest.importorskip("uvloop")
    kinds = set()

    async def which() -> None:
        kinds.add(type(asyncio.get_running_loop()))
        await asyncio.sleep(0)

    r = httpbench.measure_async(which, n=100, concurrency=4, uvloop=True)
    assert r.calls == 100
    assert kinds == {uvloop.Loop}
    assert _measure.event_loop(uvloop=True) is _measure.event_loop(uvloop=True)
    assert "uvloop" in r.metadata["event_loop"]


def test_keyboard_interrupt_leaves_loop_usable() -> None:
    import os
    import signal

    n = 0

    async def interrupt_on_50() -> None:
        nonlocal n
        n += 1
        if n == 50:
            os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(0)

    with pytest.raises(KeyboardInterrupt):
        httpbench.measure_async(interrupt_on_50, n=100_000, concurrency=4, warmup=0)
    assert n < 200
    assert disarmed()
    loop = _measure.event_loop()
    assert [t for t in asyncio.all_tasks(loop) if not t.done()] == []
    r = httpbench.measure_async(interrupt_on_50, n=100, concurrency=4)
    assert r.calls == 100
