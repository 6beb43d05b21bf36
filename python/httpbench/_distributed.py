"""``bench(url, ..., cluster=...)``: one load test split into shards run by Dask workers,
merged exactly into one :class:`~httpbench.BenchResult`.

How a run goes (the coordinator is the calling process):

1. attach: a ``distributed.Client`` (given, or connected to an address, or a
   ``LocalCluster`` for ``"local:N"``); a scheduler that cannot be reached fails
   within :data:`CONNECT_TIMEOUT`.
2. check: every worker must import the same httpbench version, else the run is
   refused before any load is sent, naming the worker.
3. clocks: each worker's offset against the scheduler's clock is estimated from
   the round trip with the least delay (NTP style), with its uncertainty.
4. plan: ``n``, ``concurrency`` and ``threads`` are split into integer shares
   whose sums are the totals (every shard gets at least one connection, so at
   most ``concurrency`` workers take part); ``rate`` is split evenly and each
   shard's schedule is shifted by ``i / rate``, so the shards' send slots
   interleave into the one schedule a single generator would follow.
5. barrier: the coordinator picks a start instant on the scheduler's clock a
   lead time ahead; each shard waits until that instant on its own clock
   (corrected by its offset), then runs the local load test (``_loadgen.run_local``,
   what ``bench()`` runs without a cluster) in the worker process. The
   C engine releases the GIL, so the worker keeps answering the scheduler, and
   a worker that dies takes exactly its shard with it.
6. merge: shards return their result as the versioned dict of ``to_dict()``
   (histograms as ``Histogram.encode()`` blobs, never pickled C objects); the
   histograms are merged exactly, counters and CPU summed, per-second series
   aligned on wall-clock seconds (scheduler clock).

Faults: a lost worker leaves the merge of the others, marked ``partial`` with
the lost shard named in ``workers``; Ctrl-C in the coordinator stops every shard
(their partial results are merged, ``interrupted=True``).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
import uuid
from typing import Any

from ._loadgen import LoadSpec, run_local
from ._results import BenchResult, WorkerResult

__all__ = ["run_distributed", "split", "CONNECT_TIMEOUT"]

CONNECT_TIMEOUT = 10.0  # seconds to reach the scheduler
LEAD_S = 0.2  # start-barrier lead on top of the slowest measured round trip (x4)
CLOCK_SAMPLES = 8  # round trips per clock-offset estimate (the least delayed one wins)
CANCEL_GRACE_S = 10.0  # how long cancelled shards get to hand back their partial results
POLL_S = 0.02  # how often the coordinator looks at the shards' futures
ALIVE_S = 0.5  # how often it asks the scheduler which workers are still there
INSTALL_HINT = 'pip install "httpbench[distributed]"'


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise ImportError(f"cluster= needs Dask distributed: {INSTALL_HINT}") from exc
    return distributed


def split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` integers differing by at most one, summing to ``total``."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


# --------------------------------------------------------------------------
# worker side (runs in the Dask worker process)

_FLAGS: dict[str, threading.Event] = {}
_FLAGS_LOCK = threading.Lock()


def _flag(run_id: str) -> threading.Event:
    with _FLAGS_LOCK:
        return _FLAGS.setdefault(run_id, threading.Event())


def _cancel(run_id: str) -> bool:
    """Stop this worker's shard of ``run_id`` (or keep it from starting)."""
    _flag(run_id).set()
    return True


def _run_shard(spec: dict[str, Any]) -> dict[str, Any]:
    """One shard: wait for the start instant, run locally, return plain data."""
    flag = _flag(spec["run_id"])
    try:
        # Sleep to just before the instant, then in short naps: a long timed wait
        # overshoots by a millisecond or more on a busy machine.
        delay = spec["start_at"] - time.time()
        if delay > 0.002 and flag.wait(delay - 0.002):
            return {"result": None, "host": socket.gethostname(), "pid": os.getpid()}
        while time.time() < spec["start_at"]:
            time.sleep(0.0001)
        late_ns = max(0, int((time.time() - spec["start_at"]) * 1e9))

        def progress(_p: Any) -> None:
            if flag.is_set():  # the engine turns this into a partial, interrupted result
                raise KeyboardInterrupt

        r = run_local(spec["url"], progress=progress, **spec["kw"])
        return {"result": r.to_dict(), "host": socket.gethostname(), "pid": os.getpid(),
                "start_late_ns": late_ns}
    finally:
        with _FLAGS_LOCK:
            _FLAGS.pop(spec["run_id"], None)


# --------------------------------------------------------------------------
# coordinator side


def _connect(cluster: Any, distributed: Any) -> tuple[Any, list[Any], float]:
    """(client, things to close afterwards, seconds spent starting a LocalCluster)."""
    if isinstance(cluster, distributed.Client):
        return cluster, [], 0.0
    started = 0.0
    owned: list[Any] = []
    if isinstance(cluster, str) and cluster.startswith("local:"):
        try:
            nw = int(cluster[len("local:"):])
        except ValueError:
            nw = 0
        if nw < 1:
            raise ValueError(f"cluster={cluster!r}: expected 'local:N' with N >= 1")
        import logging

        t0 = time.monotonic()
        lc = distributed.LocalCluster(n_workers=nw, threads_per_worker=1, processes=True,
                                      host="127.0.0.1", dashboard_address=None,
                                      silence_logs=logging.ERROR)
        started = time.monotonic() - t0
        owned.append(lc)
        target: Any = lc
    elif isinstance(cluster, str):
        target = cluster
    elif hasattr(cluster, "scheduler_address"):  # a Cluster object (SSHCluster, ...)
        target = cluster
    else:
        raise TypeError("cluster must be a dask.distributed.Client, a Cluster, a scheduler "
                        "address such as 'tcp://host:8786', or 'local:N'")
    try:
        client = distributed.Client(target, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        for o in owned:
            o.close()
        from ._core import ConnectError

        raise ConnectError(f"cannot reach the Dask scheduler at {cluster!r} within "
                           f"{CONNECT_TIMEOUT:g} s: {exc}") from None
    owned.insert(0, client)
    return client, owned, started


def _workers(client: Any, timeout: float) -> list[str]:
    end = time.monotonic() + timeout
    while True:
        ws = sorted(client.scheduler_info()["workers"])
        if ws or time.monotonic() >= end:
            break
        time.sleep(0.1)
    if not ws:
        raise RuntimeError(f"the Dask cluster has no workers (waited {timeout:g} s)")
    return ws


# Evaluated on each worker by the builtin eval: a function of ours could not even
# be unpickled on a worker without httpbench, and the probe must import what the
# shards will (the compiled core included), not just find the package's metadata.
_PROBE = "__import__('httpbench._core').__version__"


def _local_version() -> str:
    from ._version import __version__

    return __version__


def _check_versions(client: Any, workers: list[str]) -> None:
    """Refuse the run unless every worker imports this httpbench version."""
    want = _local_version()
    got = client.run(eval, _PROBE, workers=workers, on_error="return")
    bad = []
    for w in workers:
        v = got.get(w)
        if isinstance(v, BaseException):
            bad.append(f"{w}: httpbench is not installed ({type(v).__name__}: {v})")
        elif v != want:
            bad.append(f"{w}: httpbench {v}, the coordinator runs {want}")
    if bad:
        raise RuntimeError("refusing to run on workers without the same httpbench "
                           f"({INSTALL_HINT} on each): " + "; ".join(bad))


def _clock_offsets(client: Any, workers: list[str]) -> tuple[float, dict[str, tuple[float, float]],
                                                             float]:
    """(scheduler - coordinator offset s, {worker: (worker - scheduler offset s,
    uncertainty s)}, slowest round trip s), each from its least delayed sample."""
    best_s = (float("inf"), 0.0)
    best_w: dict[str, tuple[float, float]] = {}
    # One worker per call: a broadcast's round trip is the slowest worker's, which
    # would blur every estimate. Fewer samples each on a large cluster.
    samples = max(2, min(CLOCK_SAMPLES, 64 // max(1, len(workers))))
    for _ in range(samples):
        t0 = time.time()
        ts = client.run_on_scheduler(time.time)
        t1 = time.time()
        if t1 - t0 < best_s[0]:
            best_s = (t1 - t0, ts - (t0 + t1) / 2)
        for w in workers:
            t0 = time.time()
            v = client.run(time.time, workers=[w])[w]
            t1 = time.time()
            if t1 - t0 < best_w.get(w, (float("inf"), 0.0))[0]:
                best_w[w] = (t1 - t0, v - (t0 + t1) / 2)
    rtt_s, off_s = best_s
    offsets = {w: (off - off_s, (rtt + rtt_s) / 2) for w, (rtt, off) in best_w.items()}
    slowest = max([rtt_s, *(rtt for rtt, _ in best_w.values())])
    return off_s, offsets, slowest


def _plan(n: int | None, concurrency: int, threads: int, rate: float | None,
          nworkers: int) -> list[dict[str, Any]]:
    k = min(nworkers, concurrency, n if n is not None else nworkers)
    ns = split(n, k) if n is not None else [None] * k
    cs = split(concurrency, k)
    ts = [max(1, t) for t in split(threads, k)]
    out = []
    for i in range(k):
        out.append({"n": ns[i], "concurrency": cs[i], "threads": min(ts[i], cs[i]),
                    "rate": rate / k if rate else None,
                    "phase_s": i / rate if rate else 0.0})
    return out


def _merge_hist(hs: list[Any]) -> Any:
    hs = [h for h in hs if h is not None]
    if not hs:
        return None
    out = hs[0].copy()
    for h in hs[1:]:
        out.merge(h)
    return out


def _sum_maps(ms: list[dict[Any, int]]) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for m in ms:
        for k, v in m.items():
            out[k] = out.get(k, 0) + v
    return out


def _merge(parts: list[tuple[WorkerResult, BenchResult]], shards: list[WorkerResult],
           n: int | None, rate: float | None, extra_meta: dict[str, Any],
           interrupted: bool) -> BenchResult:
    """One BenchResult from the shards that returned (``parts``); ``shards`` lists all."""
    if not parts:
        lost = ", ".join(f"{s.worker} ({s.status})" for s in shards)
        raise RuntimeError(f"no shard returned a result: {lost}")
    rs = [r for _, r in parts]
    first = rs[0]
    # Timestamps onto the scheduler's clock, so hosts with skewed clocks line up.
    starts = [r.start_unix_ns - w.clock_offset_ns for w, r in parts]
    ends = [r.end_unix_ns - w.clock_offset_ns for w, r in parts]
    start, end = min(starts), max(ends)
    iv = first.series_interval_ns
    nsec = 0
    shifted = []
    for (_, r), s in zip(parts, starts, strict=True):
        shift = (s - start + iv // 2) // iv
        shifted.append((shift, r))
        nsec = max(nsec, shift + len(r.series_responses))
    ok = [0] * nsec
    err = [0] * nsec
    for shift, r in shifted:
        for i, v in enumerate(r.series_responses):
            ok[shift + i] += v
        for i, v in enumerate(r.series_errors):
            err[shift + i] += v
    md = dict(first.metadata)
    for key in ("body_bytes_in", "completed", "tls_resumed", "warmup_requests"):
        md[key] = sum(int(r.metadata.get(key, 0) or 0) for r in rs)
    md["status_classes"] = _sum_maps([r.metadata.get("status_classes") or {} for r in rs])
    md["doc_length"] = next((r.metadata["doc_length"] for r in rs
                             if (r.metadata.get("doc_length") or -1) >= 0),
                            first.metadata.get("doc_length", -1))
    md["server"] = next((r.metadata["server"] for r in rs if r.metadata.get("server")), "")
    md["first_error"] = next((r.metadata["first_error"] for r in rs
                              if r.metadata.get("first_error")), "")
    md["distributed"] = extra_meta
    cfg = dataclasses.replace(
        first.config, n=n, rate=rate,
        concurrency=sum(s.concurrency for s in shards),
        threads=sum(s.threads for s in shards),
    )
    hists = {name: _merge_hist([getattr(r, name) for r in rs])
             for name in ("latency", "latency_uncorrected", "connect", "tls", "ttfb",
                          "processing")}
    setups = [r.setup for r in rs if r.setup is not None]
    # Optional counters: summed over the shards that report them, None when none does.
    counters = {name: (sum(v for v in vals if v is not None)
                       if any(v is not None for v in vals) else None)
                for name in ("sends", "sends_late", "unsent", "connect_attempts",
                             "connect_failures", "connect_fd_exhausted")
                for vals in [[getattr(r, name) for r in rs]]}
    return BenchResult(
        url=first.url, duration_ns=max(0, end - start), method=first.method, config=cfg,
        label=first.label, responses=sum(r.responses for r in rs),
        successes=sum(r.successes for r in rs),
        status_counts=_sum_maps([r.status_counts for r in rs]),
        error_counts=_sum_maps([r.error_counts for r in rs]),
        bytes_in=sum(r.bytes_in for r in rs), bytes_out=sum(r.bytes_out for r in rs),
        connections=sum(r.connections for r in rs), reconnects=sum(r.reconnects for r in rs),
        in_flight_at_stop=sum(r.in_flight_at_stop for r in rs),
        interrupted=interrupted or any(r.interrupted for r in rs),
        cpu_user_ns=sum(r.cpu_user_ns for r in rs), cpu_sys_ns=sum(r.cpu_sys_ns for r in rs),
        start_unix_ns=start, end_unix_ns=end, series_interval_ns=iv,
        series_responses=tuple(ok), series_errors=tuple(err), metadata=md,
        workers=tuple(shards), partial=any(s.status == "lost" for s in shards),
        setup=_merge_hist(setups) if setups else None,
        **hists, **counters,
    )


def run_distributed(cluster: Any, spec: LoadSpec) -> BenchResult:
    """Run a checked load test across the workers of ``cluster`` (see the module doc).

    Every shard runs ``spec``'s request with its part of the totals. Raises
    ImportError naming the extra when Dask is missing, ConnectError when the
    scheduler cannot be reached, RuntimeError when a worker lacks this httpbench
    or every shard failed; a shard's own exception (e.g. ConnectError for an
    unresolvable host) is re-raised.
    """
    kw = dict(keepalive=spec.keepalive, pipeline=spec.pipeline, method=spec.method,
              headers=spec.headers, body=spec.body, verify=spec.verify, ca_file=spec.ca_file,
              session_resumption=spec.session_resumption, server_name=spec.server_name,
              tls_max_version=spec.tls_max_version, lenient=spec.lenient)
    distributed = _import_distributed()
    t_begin = time.monotonic()
    client, owned, cluster_start_s = _connect(cluster, distributed)
    try:
        return _run(distributed, client, cluster_start_s, t_begin, spec.target.url, spec.n,
                    spec.duration, spec.concurrency, spec.threads, spec.rate, spec.warmup,
                    spec.timeout, spec.label, kw)
    finally:
        for o in owned:
            try:
                o.close()
            except Exception:  # closing a half-dead cluster must not hide the result
                pass


def _run(distributed: Any, client: Any, cluster_start_s: float, t_begin: float, url: str,
         n: int | None, duration: float | None, concurrency: int, threads: int,
         rate: float | None, warmup: float, timeout: float, label: str,
         kw: dict[str, Any]) -> BenchResult:
    workers = _workers(client, CONNECT_TIMEOUT)
    _check_versions(client, workers)
    off_sched, offsets, slowest_rtt = _clock_offsets(client, workers)
    plan = _plan(n, concurrency, threads, rate, len(workers))
    run_id = uuid.uuid4().hex
    lead = LEAD_S + 4 * slowest_rtt
    start_sched = time.time() + off_sched + lead  # the start instant, scheduler clock
    t_setup = time.monotonic()
    shards: list[WorkerResult] = []
    futures = {}
    for i, p in enumerate(plan):
        w = workers[i]
        off, unc = offsets.get(w, (0.0, 0.0))
        shard = WorkerResult(worker=w, shard=i, n=p["n"], concurrency=p["concurrency"],
                             threads=p["threads"], rate=p["rate"],
                             clock_offset_ns=int(off * 1e9),
                             clock_uncertainty_ns=int(unc * 1e9), status="running")
        shards.append(shard)
        spec = {"run_id": run_id, "url": url, "start_at": start_sched + off + p["phase_s"],
                "kw": dict(kw, n=p["n"], duration=duration, concurrency=p["concurrency"],
                           threads=p["threads"], rate=p["rate"], warmup=warmup,
                           timeout=timeout, label=label)}
        futures[i] = client.submit(_run_shard, spec, workers=[w], allow_other_workers=False,
                                   pure=False, retries=0, key=f"httpbench-{run_id}-{i}")

    raw: dict[int, dict[str, Any]] = {}
    status: dict[int, str] = {}
    error: BaseException | None = None
    interrupted = False
    grace_end = None
    next_alive = time.monotonic() + ALIVE_S
    pending = dict(futures)
    while pending:
        try:
            time.sleep(POLL_S)  # futures' states are kept current by the client's own thread
            for i, f in list(pending.items()):
                if f.status == "finished":
                    raw[i] = f.result()
                    del pending[i]
                elif f.status in ("error", "cancelled"):
                    exc = f.exception() if f.status == "error" else None
                    del pending[i]
                    if exc is not None and type(exc).__name__ == "KilledWorker":
                        status[i] = "lost"
                    elif exc is not None:
                        status[i] = "failed"
                        if error is None:
                            error = exc
                            _cancel_all(client, run_id, pending, shards)
                    else:
                        status[i] = "lost"
            if pending and time.monotonic() >= next_alive:
                next_alive = time.monotonic() + ALIVE_S
                alive = set(client.scheduler_info()["workers"])
                for i in list(pending):
                    if shards[i].worker not in alive:
                        status[i] = "lost"
                        pending.pop(i).cancel()
            if grace_end is not None and time.monotonic() > grace_end:
                for i in list(pending):
                    status[i] = "lost"
                    pending.pop(i).cancel()
        except KeyboardInterrupt:
            if interrupted:  # a second Ctrl-C: give up on the stragglers
                raise
            interrupted = True
            _cancel_all(client, run_id, pending, shards)
            grace_end = time.monotonic() + CANCEL_GRACE_S + timeout
    if error is not None:
        raise error
    t_done = time.monotonic()

    parts: list[tuple[WorkerResult, BenchResult]] = []
    final: list[WorkerResult] = []
    for i, shard in enumerate(shards):
        got = raw.get(i)
        d = got.get("result") if got else None
        if d is None:
            final.append(dataclasses.replace(shard, status=status.get(i, "cancelled"),
                                              host=(got or {}).get("host", "")))
            continue
        r = BenchResult.from_dict(d)
        shard = dataclasses.replace(
            shard, host=got["host"], status="interrupted" if r.interrupted else "ok",
            responses=r.responses, successes=r.successes, errors=r.errors,
            bytes_in=r.bytes_in, duration_ns=r.duration_ns, cpu_user_ns=r.cpu_user_ns,
            cpu_sys_ns=r.cpu_sys_ns, start_unix_ns=r.start_unix_ns - shard.clock_offset_ns,
            start_late_ns=int(got.get("start_late_ns", 0)),
            series_responses=r.series_responses)
        parts.append((shard, r))
        final.append(shard)
    meta = {"scheduler": getattr(client, "scheduler", None) and client.scheduler.address,
            "workers": len(workers), "shards": len(plan), "lead_s": lead,
            "cluster_start_s": cluster_start_s,
            "setup_s": t_setup - t_begin - cluster_start_s,
            "run_s": t_done - t_setup}
    t0 = time.monotonic()
    out = _merge(parts, final, n, rate, meta, interrupted)
    out.metadata["distributed"]["merge_s"] = time.monotonic() - t0
    return out


def _cancel_all(client: Any, run_id: str, pending: dict[int, Any],
                shards: list[WorkerResult]) -> None:
    """Ask every worker with a running shard to stop it (its partial result comes back)."""
    ws = [shards[i].worker for i in pending]
    if ws:
        try:
            client.run(_cancel, run_id, workers=ws, on_error="ignore")
        except Exception:  # a worker gone meanwhile is detected by the monitor loop
            pass
