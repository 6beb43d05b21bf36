"""Scheduling a client comparison: servers, workers and rounds in order.

The embedded server runs in its own process (pinned to one core when the
machine has two or more); every (client, scenario) runs in a fresh worker
process (``python -m httpbench._worker``, pinned to another core) that sets
the adapter up, warms up and then measures one round per command. Rounds are
interleaved across clients (A B C A B C) so drift in the machine's state hits
every client alike. Results come back as JSON over a pipe; a worker that
crashes, hangs (per-reply timeout) or fails is reported with its stderr and
the run goes on. A timed round can be taken in slices (``RunOptions.slices``):
slice k of every round and client before slice k + 1 of any, so each round
samples the machine's state over the whole scenario (a virtual machine's CPU
speed drifts over seconds); the slices' counts are summed into the round.

Each round is checked against the server's own stats (requests, connections
accepted, server CPU) and turned into anomaly notes: server saturated, new
connections where keep-alive was expected, a latency mode near 40 ms (Nagle /
delayed ACK), errors, a POST answered early that broke the connection,
responses that failed verification, large run-to-run spread. The server's
per-protocol counts prove the protocol of every round: a client that fell
back to HTTP/1.1 in an HTTP/2 scenario is noted ``h1-fallback``, one that
took h2 (by ALPN) in an HTTP/1.1 scenario ``h2-negotiated``; either way its
figures are dropped (listed under skipped), never reported under the
scenario's protocol.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import _machine, _noise
from ._adapters import ADAPTERS, adapter_status, is_custom, load_adapter
from ._metadata import system_metadata
from ._results import MeasureResult, Note, ResultSet
from ._roundnotes import (
    protocol_verdict,
    round_notes,
    server_counts,
    spread_notes,
)
from ._scenarios import Scenario
from ._workerproc import (
    WorkerFailed,
    WorkerProc,
    Zygote,
    isolated_env,
    preload_library,
    worker_env,
)

__all__ = ["RunOptions", "Runner", "merge_slices"]

# transfers this large run their rounds in one piece (see Runner._slices)
SLICE_MAX_BYTES = 1 << 20
# the shortest slice of a round, seconds
SLICE_MIN_S = 0.025
# the fixed-work control (the machine-speed index): units per control, and at most one
# control per this many seconds of the run (~1 ms per 0.1 s: about 1 % of its time)
CONTROL_UNITS = 10
CONTROL_EVERY_S = 0.1


@dataclass
class RunOptions:
    """How a comparison runs.

    ``n``: requests per round (None: ``scale`` × the scenario's duration);
    ``repeat``: rounds per (client, scenario); ``timeout``: seconds a worker
    may take for one reply (setup or round) before it is killed as hung;
    ``min_requests``: fewest requests of a timed round (re-run below it);
    ``reruns``: how often a round disturbed by machine noise or short of
    requests is run again at most; ``slices``: pieces a timed round is taken
    in, in turn with every other round and client (1: one contiguous piece); ``native_allocs``: preload the malloc counter in workers (None: on when a
    counter library exists, Linux); ``pin``: CPU pinning server/workers (False: ``placement="unpinned"``);
    ``placement``: ``auto`` (``_machine.choose_placement`` per scenario), ``same``,
    ``split`` or ``unpinned``;
    ``commands``: name -> argv of extra process-level clients; ``zygote``:
    fork workers from one pre-imported process (False: a new interpreter each).
    """

    repeat: int = 3
    n: int | None = None
    # fewest requests a timed round rests on (the scenario's min_n when larger)
    min_requests: int = 10
    # a round disturbed by machine noise or short of min_requests runs again, this often at most
    reruns: int = 2
    # a timed round is taken in this many slices, in turn with the other rounds and clients
    slices: int = 1
    scale: float = 1.0
    warmup: int = 3
    timeout: float = 120.0
    native_allocs: bool | None = None
    pin: bool = True
    # where server and client run per scenario: auto (by the wake-up calibration), same,
    # split, unpinned (``pin=False`` means unpinned)
    placement: str = "auto"
    commands: dict[str, list[str]] = field(default_factory=dict)
    server_threads: int = 1
    zygote: bool = True
    progress: Callable[[str], None] | None = None
    # client key -> (adapter name, interpreter): clients running in an environment of their own
    interpreters: dict[str, tuple[str, str]] = field(default_factory=dict)
    # instructions/syscalls per request from counting children, after the timing rounds
    deterministic: bool = False
    deterministic_n: int = 200


# ---------------------------------------------------------------- servers


def _pin_process(pid: int, cpus: set[int]) -> bool:
    """Pin every thread of ``pid`` to ``cpus`` (threads created later inherit it)."""
    ok = False
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
            ok = True
        except OSError:
            pass
    return ok


def _default_server_factory(tls: bool, threads: int, h3: bool = False) -> Any:
    from . import _server

    # Rounds interleave every client, so a client's kept-alive connection may idle longer
    # than a server's usual 30 s between its own slices (20 clients x a 30 MB download):
    # closing it there would be the harness's doing, counted as the client's error.
    return _server.start_process(tls=tls, threads=threads, h3=h3, keepalive_timeout=3600.0)


def merge_slices(parts: Sequence[MeasureResult]) -> MeasureResult:
    """One round's result from its slices: counts, times and CPU summed, latency
    histograms merged, peak RSS the largest; a single slice is returned as is."""
    import dataclasses

    if len(parts) == 1:
        return parts[0]
    first = parts[0]

    def total(name: str) -> int | None:
        vals = [getattr(p, name) for p in parts]
        return None if any(v is None for v in vals) else sum(vals)

    def dict_total(name: str) -> dict[str, int] | None:
        vals = [getattr(p, name) for p in parts]
        if any(v is None for v in vals):
            return None
        out: dict[str, int] = {}
        for v in vals:
            for k, x in v.items():
                out[k] = out.get(k, 0) + x
        return out

    lat = first.latency.copy()
    for p in parts[1:]:
        lat.merge(p.latency)
    calls = sum(p.calls for p in parts)
    gcs = [p.gc_collections for p in parts]
    over = [p.overhead_ns_per_call for p in parts]
    rss = [p.peak_rss_bytes for p in parts if p.peak_rss_bytes is not None]
    md = dict(first.metadata)
    md["slice_calls"] = [p.calls for p in parts]
    return dataclasses.replace(
        first, calls=calls, wall_ns=sum(p.wall_ns for p in parts), latency=lat,
        cpu_user_ns=sum(p.cpu_user_ns for p in parts), cpu_sys_ns=sum(p.cpu_sys_ns for p in parts),
        cpu_thread_ns=total("cpu_thread_ns"), alloc_counts=dict_total("alloc_counts"),
        alloc_bytes=dict_total("alloc_bytes"), alloc_net_bytes=total("alloc_net_bytes"),
        alloc_net_count=total("alloc_net_count"), native_alloc_count=total("native_alloc_count"),
        native_alloc_bytes=total("native_alloc_bytes"),
        gc_collections=(None if any(g is None for g in gcs)
                        else tuple(sum(g[i] for g in gcs) for i in range(3))),  # type: ignore[index]
        gc_pause_ns=total("gc_pause_ns"), peak_rss_bytes=max(rss) if rss else None,
        overhead_ns_per_call=(None if any(o is None for o in over) or not calls
                              else sum(o * p.calls for o, p in zip(over, parts, strict=True)) / calls),
        errors=sum(p.errors for p in parts), end_unix_ns=parts[-1].end_unix_ns, metadata=md)


# ---------------------------------------------------------------- runner


def _eta(t_start: float, finished: float, total: float) -> str:
    """"  ETA 1m05s" from the wall time per unit of work so far (worker start-ups
    included) times the work left; empty before the first round or after the last.
    Work is counted in rounds weighted by their scenario's time budget."""
    if finished <= 0 or finished >= total:
        return ""
    left = (time.time() - t_start) / finished * (total - finished)
    m, sec = divmod(int(left + 0.5), 60)
    return f"  ETA {m}m{sec:02d}s" if m else f"  ETA {sec}s"


class Runner:
    """Runs clients × scenarios × repeats in isolated workers and builds a ResultSet.

    ``server_factory(tls, threads)`` returns a started server handle with
    ``.url``, ``.ca_file``, ``.pid``, ``.stats()`` and ``.stop()`` (default:
    ``httpbench._server.start_process``).
    """

    def __init__(self, options: RunOptions | None = None,
                 server_factory: Callable[[bool, int], Any] | None = None) -> None:
        self.opt = options or RunOptions()
        self.server_factory = server_factory or _default_server_factory
        self.servers: dict[bool, Any] = {}
        self.notes: list[Note] = []
        self.skipped: dict[str, str] = {}
        self.versions: dict[str, str | None] = {}
        self.failed: set[tuple[str, str]] = set()
        # (client, scenario) pairs whose protocol was not the scenario's: rows dropped
        self.h1_fallback: set[tuple[str, str]] = set()
        self._zygote: Zygote | None = None
        self._zygote_failed = False
        self._env_zygotes: dict[str, Zygote] = {}
        if self.opt.placement not in _machine.PLACEMENTS:
            raise ValueError(f"placement must be one of {', '.join(_machine.PLACEMENTS)}, "
                             f"got {self.opt.placement!r}")
        self.cpus = _machine.usable_cpus()
        self.mode = self.opt.placement if self.opt.pin else "unpinned"
        # the scenario being run's placement; every scenario's, for the metadata
        self.placement: dict[str, Any] = _machine.choose_placement("unpinned", True, None, [])
        self.placements: dict[str, dict[str, Any]] = {}
        self.wakeup: dict[str, Any] | None = None
        # the fixed-work control, taken in the workers between slices: (scenario, ns/unit)
        self.controls: list[tuple[str, float]] = []
        self.ws_probes: list[float] = []  # the working-set probe beside each control
        self._last_control = 0.0
        self.env_changes: dict[str, str] = {}
        self.noise: dict[str, dict[str, Any]] = {}
        self._reruns: dict[str, int] = {}
        self.slices: dict[str, int] = {}
        self.preload = None
        if self.opt.native_allocs is not False and sys.platform.startswith("linux"):
            self.preload = preload_library()
            if self.preload is None and self.opt.native_allocs:
                self.notes.append(Note("native-allocs-unavailable",
                                       "native allocation counter library not found; "
                                       "native allocs/req not measured", severity="info"))

    def _progress(self, msg: str) -> None:
        if self.opt.progress is not None:
            self.opt.progress(msg)

    def _server(self, tls: bool, h3: bool = False) -> Any:
        key: Any = "h3" if h3 else tls
        srv = self.servers.get(key)
        if srv is None:
            if h3:  # the HTTP/3 listener comes with the default server only
                srv = _default_server_factory(True, self.opt.server_threads, h3=True)
            else:
                srv = self.server_factory(tls, self.opt.server_threads)
            self.servers[key] = srv
        return srv

    def _place(self, sc: Scenario, srv: Any) -> None:
        """Choose the scenario's placement and move the server's threads there."""
        # one request in flight pays a wake-up per request; a transfer of a megabyte or more
        # overlaps server and client within its request (the wake-ups are amortized)
        sequential = (sc.concurrency == 1
                      and (sc.expect_bytes or 0) + sc.body_size < SLICE_MAX_BYTES)
        self.placement = _machine.choose_placement(self.mode, sequential, self.wakeup, self.cpus)
        self.placements[sc.name] = self.placement
        if not self.cpus:
            return
        cpus = sorted(self.placement["server_cpus"] or self.cpus)
        setter = getattr(srv, "set_cpus", None)  # Server and ServerProcess have it
        if setter is not None:
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                setter(cpus)
            return
        pid = getattr(srv, "pid", None)
        if pid and int(pid) != os.getpid():  # never the threads of this process
            _pin_process(int(pid), set(cpus))

    @property
    def worker_cpu(self) -> int | None:
        """The CPU the current scenario's workers run on (None: not pinned)."""
        cl = self.placement.get("client_cpus") or []
        return int(cl[0]) if cl else None

    def _stats(self, srv: Any) -> dict[str, int | None]:
        try:
            return server_counts(srv.stats())
        except Exception:
            return {k: None for k in server_counts({})}

    def _env(self) -> dict[str, str]:
        """The caller's environment, with only the changes every client needs (recorded)."""
        env, self.env_changes = worker_env(dict(os.environ), self.preload)
        return env

    def _get_zygote(self, env: dict[str, str], python: str | None = None) -> Zygote | None:
        """The run's zygote (started on first use); None: plain subprocess workers."""
        if not self.opt.zygote or self._zygote_failed:
            return None
        if python is not None:  # one zygote per spec environment
            z = self._env_zygotes.get(python)
            if z is None or z.proc.poll() is not None:
                try:
                    z = self._env_zygotes[python] = Zygote(isolated_env(env), python)
                except OSError:
                    return None
            return z
        if self._zygote is None or self._zygote.proc.poll() is not None:
            try:
                import socket

                if not hasattr(socket, "send_fds"):
                    raise OSError("socket.send_fds unavailable")
                self._zygote = Zygote(env)
            except OSError as exc:
                self._zygote_failed = True
                self.notes.append(Note("zygote-unavailable", f"workers started as plain "
                                       f"subprocesses ({exc})", severity="info"))
                return None
        return self._zygote

    def _check_clients(self, clients: Sequence[str]) -> list[str]:
        ok: list[str] = []
        for c in clients:
            if c in self.opt.interpreters:
                ok.append(c)  # checked by its worker, in its own environment
                continue
            name = "command" if c in self.opt.commands else c
            if name not in ADAPTERS and not is_custom(name):
                self.skipped[c] = f"unknown client (known: {', '.join(ADAPTERS)})"
                continue
            avail, reason, pip_name = adapter_status(name)
            if not avail:
                self.skipped[c] = (f"not installed: {reason}"
                                   + (f" (pip install {pip_name})" if pip_name else ""))
                self._progress(f"skip {c}: {self.skipped[c]}")
                continue
            if name == "command" and c not in self.opt.commands:
                self.skipped[c] = "the command client needs an argv (commands={name: argv})"
                continue
            if name == "command":
                argv = self.opt.commands[c]
                self.versions[c] = "command: " + " ".join([shutil.which(argv[0]) or argv[0],
                                                           *argv[1:]])
            else:
                self.versions[c] = load_adapter(name).version()
            ok.append(c)
        return ok

    def run(self, clients: Sequence[str], scenarios: Sequence[Scenario]) -> ResultSet:
        """Run everything; never raises for a client's failure (it becomes a note)."""
        t_start = time.time()
        clients = self._check_clients(clients)
        results: dict[tuple[str, str, int], MeasureResult] = {}
        workdir = tempfile.mkdtemp(prefix="httpbench-compare-")
        total = len(clients) * len(scenarios) * self.opt.repeat
        done = 0
        # the ETA counts work, not rounds: a 7 MB download's round weighs more than a GET's
        weight = self._round_weights(scenarios)
        total_work = sum(weight[sc.name] for sc in scenarios) * len(clients) * self.opt.repeat
        work = 0.0
        interrupted = False
        if clients and self.mode != "unpinned" and len(self.cpus) >= 1:
            try:
                self.wakeup = _machine.wakeup_cost(self.cpus, refresh=True)
            except (OSError, ValueError) as exc:
                self.notes.append(Note("calibration-failed", f"wake-up calibration failed "
                                       f"({exc}); sequential scenarios run split",
                                       severity="info"))
            else:
                self._progress(_machine.wakeup_text(self.wakeup))
        try:
            for sc in scenarios:
                if not clients:
                    break
                try:
                    srv = self._server(sc.tls, h3=sc.is_h3)
                except (RuntimeError, ValueError) as exc:  # H3Unavailable: a build without HTTP/3
                    if not sc.is_h3:
                        raise
                    for c in clients:
                        self.skipped[f"{c}/{sc.name}"] = str(exc)
                    continue
                self._place(sc, srv)
                workers: dict[str, WorkerProc] = {}
                try:
                    workers = self._start_workers(clients, sc, srv, workdir)
                    rounds: dict[str, list[MeasureResult]] = {c: [] for c in workers}
                    k = self._slices(sc)
                    self.slices[sc.name] = k
                    sliced: dict[tuple[str, int], MeasureResult] = {}
                    if k > 1:
                        # every round is assembled from k slices taken in turn with every
                        # other round and client: each samples the machine's state over
                        # the whole scenario instead of one stretch of it
                        base, wbase = done, work
                        per = len(workers) * self.opt.repeat

                        def at(i: int, of: int, base: int = base, wbase: float = wbase,
                               per: int = per, wt: float = weight[sc.name]) -> str:
                            eta = _eta(t_start, wbase + wt * per * i / of, total_work)
                            return f"[{int(base + per * i / of)}/{total}]{eta}"

                        sliced = self._sliced_checked(workers, sc, srv, k, at)
                        # every round of the scenario is measured now: the lines below
                        # report them, and the ETA stays what the work left says
                        work += weight[sc.name] * per
                    for rep in range(self.opt.repeat):
                        for c, w in list(workers.items()):
                            done += 1
                            if k > 1:
                                mr = sliced.get((c, rep))
                            elif w.dead or (c, sc.name) in self.h1_fallback:
                                work += weight[sc.name]
                                continue
                            else:
                                self._progress(
                                    f"[{done}/{total}] running {sc.name} {c} #{rep + 1}/"
                                    f"{self.opt.repeat}{_eta(t_start, work, total_work)}")
                                mr = self._round_checked(c, sc, rep, w, srv)
                                work += weight[sc.name]
                            if mr is not None:
                                results[(c, sc.name, rep)] = mr
                                rounds[c].append(mr)
                                self._progress(
                                    f"[{done}/{total}] {sc.name:<20} {c:<12} #{rep + 1} "
                                    f"{mr.calls_per_s:>10,.0f} req/s  p50 {mr.p50 / 1e3:,.0f} µs"
                                    f"{_eta(t_start, work, total_work)}")
                    for c in workers:
                        if (c, sc.name) in self.h1_fallback:  # none is the scenario's protocol
                            rounds[c] = []
                            for key in [k for k in results if k[:2] == (c, sc.name)]:
                                del results[key]
                    for c in workers:
                        self.notes.extend(spread_notes(c, sc, rounds[c]))
                    kept = [r.metadata.get("noise") for c in workers for r in rounds[c]]
                    self.noise[sc.name] = _noise.summary(kept, self._reruns.get(sc.name, 0))
                    if self.opt.deterministic:  # after every timing round of the scenario
                        for c, w in workers.items():
                            self._deterministic(c, sc, results, w)
                finally:
                    for w in workers.values():  # all exit in parallel
                        w.request_close()
                    for w in workers.values():
                        w.close()
        except KeyboardInterrupt:
            # Ctrl-C: keep what was measured, say so, stop everything we started
            interrupted = True
            self.notes.append(Note("interrupted", f"stopped by the user after {len(results)} "
                                   "rounds; the results are partial", severity="warning"))
        finally:
            self.stop()
            shutil.rmtree(workdir, ignore_errors=True)
        for sc in scenarios:
            self._drift_notes(sc)
        md = system_metadata()
        md.update({
            "client_versions": self.versions,
            "repeat": self.opt.repeat,
            "n": self.opt.n,
            "scale": self.opt.scale,
            "placement": self.placements,
            "placement_rule": self.mode,
            "wakeup_ns": ({"same_cpu": self.wakeup["same_cpu"],
                           "cross_cpu": self.wakeup["cross_cpu"]} if self.wakeup else None),
            "wakeup": self.wakeup,
            "speed_index": self._speed_index(),
            "native_alloc_counter": self.preload,
            "environment_changes": self.env_changes,
            "min_requests": self.opt.min_requests,
            "slices": self.slices,
            "noise": self.noise,
            "noise_thresholds": {"other": _noise.DISTURBED_OTHER,
                                 "steal": _noise.DISTURBED_STEAL},
            "server_threads": self.opt.server_threads,
            "scenarios": {sc.name: sc.to_dict() for sc in scenarios},
            "clients": list(clients),
            "started_unix_ns": int(t_start * 1e9),
            "duration_s": round(time.time() - t_start, 3),
            "interrupted": interrupted,
        })
        return ResultSet(results=results, metadata=md, notes=tuple(self.notes),
                         skipped=self.skipped)

    def _job(self, client: str, sc: Scenario, srv: Any, workdir: str) -> dict[str, Any]:
        d = tempfile.mkdtemp(prefix=f"{client.replace('/', '_')}-{sc.name}-", dir=workdir)
        url = (getattr(srv, "h3_url", None) or srv.url) if sc.is_h3 else srv.url
        return {
            "client": ("command" if client in self.opt.commands
                       else self.opt.interpreters.get(client, (client,))[0]),
            "label": client,
            "scenario": sc.to_dict(),
            "base_url": url,
            "ca_file": getattr(srv, "ca_file", None) if sc.tls else None,
            "cpu": self.worker_cpu,
            "warmup": self.opt.warmup,
            "workdir": d,
            "argv": self.opt.commands.get(client),
        }

    def _start_workers(self, clients: Sequence[str], sc: Scenario, srv: Any,
                       workdir: str) -> dict[str, WorkerProc]:
        env = self._env()
        started: dict[str, WorkerProc] = {}
        for c in clients:
            try:
                py = self.opt.interpreters.get(c, (c, None))[1]
                wenv = env if py is None else isolated_env(env)
                started[c] = WorkerProc(self._job(c, sc, srv, workdir), wenv, self.opt.timeout,
                                        self._get_zygote(env, py), python=py or sys.executable)
            except (OSError, WorkerFailed) as exc:
                self._fail(c, sc, WorkerFailed(str(exc), "", "worker-failed"))
        ready: dict[str, WorkerProc] = {}
        for c, w in started.items():
            try:
                msg = w.recv()
            except WorkerFailed as exc:
                self._fail(c, sc, exc)
                w.close()
                continue
            st = msg.get("status")
            if st == "ready":
                w.info = dict(msg.get("metadata") or {})
                w.info["setup_requests"] = msg.get("requests")
                if w.info.get("client_version"):  # from the library the worker loaded
                    self.versions[c] = w.info["client_version"]
                ready[c] = w
                self._progress(f"ready {sc.name} {c}")
            elif st == "skipped":
                reason = msg.get("reason", "unavailable")
                pip = msg.get("pip_name")
                self.skipped[f"{c}/{sc.name}"] = reason + (f" (pip install {pip})" if pip else "")
                w.close()
            else:
                self._fail(c, sc, WorkerFailed(
                    f"{c}/{sc.name}: setup failed: {msg.get('error')}",
                    (msg.get("traceback") or "") + w.stderr_tail(800), "worker-failed"))
                w.close()
        return ready

    def _fail(self, client: str, sc: Scenario, exc: WorkerFailed, repeat: int | None = None) -> None:
        self.failed.add((client, sc.name))
        tail = exc.stderr.strip().splitlines()[-6:]
        msg = str(exc) + (("; stderr: " + " | ".join(tail)) if tail else "")
        self.notes.append(Note(exc.kind, msg, client, sc.name, repeat, "error"))
        self._progress(f"FAILED {msg[:300]}")

    def _round_weights(self, scenarios: Sequence[Scenario]) -> dict[str, float]:
        """Each scenario's round as work for the ETA: its time budget (seconds); rounds
        of a fixed request count weigh as much as the average timed round."""
        timed = {sc.name: sc.duration * self.opt.scale for sc in scenarios
                 if self.opt.n is None and sc.n is None and sc.duration}
        mean = sum(timed.values()) / len(timed) if timed else 1.0
        return {sc.name: timed.get(sc.name, mean) or 1.0 for sc in scenarios}

    def _slices(self, sc: Scenario) -> int:
        """Slices per round: ``opt.slices`` for timed rounds of small transfers, fewer
        when a slice would be shorter than SLICE_MIN_S; 1 for rounds of a fixed
        request count, multi-megabyte transfers (a slice would hold one request) and
        concurrent scenarios (each slice would start its threads and re-warm every
        connection again)."""
        if self.opt.n is not None or sc.n is not None:
            return 1
        if (sc.expect_bytes or 0) + sc.body_size >= SLICE_MAX_BYTES or sc.concurrency > 1:
            return 1
        # a slice's fixed costs (re-warm-up, stats, messages) are a few ms: not shorter
        per_round = sc.duration * self.opt.scale
        return max(1, min(self.opt.slices, int(per_round / SLICE_MIN_S + 1e-9)))

    def _min_n(self, sc: Scenario) -> int:
        return max(sc.min_n, self.opt.min_requests)

    def _round_checked(self, client: str, sc: Scenario, rep: int, w: WorkerProc,
                       srv: Any) -> MeasureResult | None:
        """One round, re-run (a bounded number of times) while it was disturbed by
        machine noise or rests on fewer requests than a round must; the last is kept."""
        mark = len(self.notes)
        mr = self._round(client, sc, rep, w, srv)
        tries = 0
        while mr is not None and tries < self.opt.reruns and not w.dead:
            reasons = self._redo_reasons(mr, sc)
            if not reasons:
                break
            why = "; ".join(text for _, text in reasons)
            tries += 1
            self._reruns[sc.name] = self._reruns.get(sc.name, 0) + 1
            self._progress(f"re-run {sc.name} {client} #{rep + 1}: {why}")
            del self.notes[mark:]  # the notes of the round that is replaced
            again = self._round(client, sc, rep, w, srv)
            if again is None:
                break
            mr = again
        return None if mr is None else self._kept(client, sc, rep, mr, tries)

    def _kept(self, client: str, sc: Scenario, rep: int, mr: MeasureResult,
              tries: int) -> MeasureResult:
        """The round kept after ``tries`` re-runs, noted when still disturbed or short."""
        import dataclasses

        md = dict(mr.metadata)
        md["reruns"] = tries
        # a round both disturbed and short gets both notes: each is its own warning
        for kind, why in self._redo_reasons(mr, sc):
            self.notes.append(Note(kind, f"round {rep + 1}: {why} (after {tries} re-run(s))",
                                   client, sc.name, rep, "warning"))
        return dataclasses.replace(mr, metadata=md)

    def _sliced(self, workers: dict[str, WorkerProc], sc: Scenario, srv: Any, k: int,
                want: list[tuple[str, int]], progress: Callable[[int, int], str]
                ) -> dict[tuple[str, int], tuple[MeasureResult, list[Note]]]:
        """The rounds ``want`` ((client, repeat), in run order), each taken in ``k``
        slices: slice s of every one before slice s + 1 of any. A round whose
        worker failed in any slice is left out (its failure is noted)."""
        parts: dict[tuple[str, int], list[dict[str, Any]] | None] = {key: [] for key in want}
        for s in range(k):
            for i, (c, rep) in enumerate(want):
                w, got = workers[c], parts[(c, rep)]
                if w.dead or got is None or (c, sc.name) in self.h1_fallback:
                    continue
                self._progress(f"{progress(s * len(want) + i, k * len(want))} {sc.name} {c} "
                               f"#{rep + 1} slice {s + 1}/{k}")
                part = self._part(c, sc, rep, w, srv, k)
                if part is None:
                    parts[(c, rep)] = None
                else:
                    got.append(part)
        out: dict[tuple[str, int], tuple[MeasureResult, list[Note]]] = {}
        for (c, rep), got in parts.items():
            if got and len(got) == k:  # a round short of slices (its worker died) is lost
                mark = len(self.notes)
                mr = self._assemble(c, sc, rep, workers[c], got)
                out[(c, rep)] = (mr, self.notes[mark:])
                del self.notes[mark:]
        return out

    def _sliced_checked(self, workers: dict[str, WorkerProc], sc: Scenario, srv: Any, k: int,
                        progress: Callable[[int, int], str]
                        ) -> dict[tuple[str, int], MeasureResult]:
        """Every round of the scenario in slices; rounds disturbed or short are taken
        again, in slices among themselves (at most ``reruns`` times); the last is kept."""
        want = [(c, rep) for rep in range(self.opt.repeat) for c in workers]
        got = self._sliced(workers, sc, srv, k, want, progress)
        tries = dict.fromkeys(got, 0)
        for _ in range(self.opt.reruns):
            redo = [key for key in want if key in got and not workers[key[0]].dead
                    and self._redo_reasons(got[key][0], sc)]
            if not redo:
                break
            for c, rep in redo:
                why = "; ".join(t for _, t in self._redo_reasons(got[(c, rep)][0], sc))
                self._progress(f"re-run {sc.name} {c} #{rep + 1}: {why}")
                self._reruns[sc.name] = self._reruns.get(sc.name, 0) + 1
                tries[(c, rep)] += 1
            got.update(self._sliced(workers, sc, srv, k, redo, progress))
        out: dict[tuple[str, int], MeasureResult] = {}
        for key in want:
            if key in got:
                mr, notes = got[key]
                self.notes.extend(notes)
                out[key] = self._kept(key[0], sc, key[1], mr, tries[key])
        return out

    def _redo_reasons(self, mr: MeasureResult, sc: Scenario) -> list[tuple[str, str]]:
        """Why a round must run again, as (note kind, text): disturbed, short, or both."""
        reasons: list[tuple[str, str]] = []
        noise = mr.metadata.get("noise")
        if _noise.disturbed(noise):
            reasons.append(("noisy", f"disturbed: other processes {noise['other']:.0%}, steal "
                                     f"{noise['steal']:.0%} of the client's CPU"))
        timed = self.opt.n is None and sc.n is None
        if timed and mr.calls < self._min_n(sc):
            reasons.append(("few-requests",
                            f"only {mr.calls} requests (a round needs {self._min_n(sc)})"))
        return reasons

    def _round(self, client: str, sc: Scenario, rep: int, w: WorkerProc,
               srv: Any) -> MeasureResult | None:
        """One contiguous round (the whole duration in one slice)."""
        part = self._part(client, sc, rep, w, srv, 1)
        return None if part is None else self._assemble(client, sc, rep, w, [part])

    def _part(self, client: str, sc: Scenario, rep: int, w: WorkerProc, srv: Any,
              slices: int) -> dict[str, Any] | None:
        """One slice of a round: ``1/slices`` of its time and minimum requests, checked
        against the server's stats; None (and a failure note) when the worker failed."""
        cmd: dict[str, Any] = {"cmd": "run"}
        if self.opt.n is not None or sc.n is not None:
            cmd["n"] = self.opt.n if self.opt.n is not None else sc.n
        else:
            cmd["duration"] = sc.duration * self.opt.scale / slices
            cmd["min_n"] = -(-self._min_n(sc) // slices)
        now = time.monotonic()
        if now - self._last_control >= CONTROL_EVERY_S:
            cmd["control"] = CONTROL_UNITS
            self._last_control = now
        try:
            w.send({"cmd": "rewarm"})
            warm = w.recv()
            if warm.get("status") != "ok":
                raise WorkerFailed(f"{client}/{sc.name} re-warm-up: {warm.get('error')}",
                                   warm.get("traceback") or "", "worker-failed")
            s0 = self._stats(srv)  # after the re-warm-up: the round alone is checked
            w.send(cmd)
            msg = w.recv()
        except WorkerFailed as exc:
            self._fail(client, sc, exc, rep)
            return None
        s1 = self._stats(srv)
        if msg.get("status") != "ok":
            self._fail(client, sc, WorkerFailed(
                f"{client}/{sc.name} round {rep + 1}: {msg.get('error')}",
                msg.get("traceback") or "", "worker-failed"), rep)
            return None
        srv_delta = {k: (None if s0[k] is None or s1[k] is None else s1[k] - s0[k]) for k in s0}
        protocol, pkind, pmsg = protocol_verdict(sc, srv_delta)
        if pkind in ("h1-fallback", "h2-negotiated", "h3-fallback"):
            self.notes.append(Note(pkind, f"round {rep + 1}: {pmsg}", client, sc.name, rep,
                                   "error"))
            self.h1_fallback.add((client, sc.name))
            self.skipped[f"{client}/{sc.name}"] = f"{pkind}: {pmsg}"
            self._progress(f"{pkind} {client}/{sc.name}: {pmsg}")
            return None
        if msg.get("control_ns"):
            self.controls.append((sc.name, float(msg["control_ns"])))
        if msg.get("working_set_ns"):
            self.ws_probes.append(float(msg["working_set_ns"]))
        return {"mr": MeasureResult.from_dict(msg["result"]), "server": srv_delta, "msg": msg}

    def _speed_index(self) -> dict[str, Any] | None:
        """The run's machine-speed index: its controls' range, and each scenario's median."""
        out = _machine.speed_summary([v for _, v in self.controls])
        if out is None:
            return None
        by: dict[str, list[float]] = {}
        for name, v in self.controls:
            by.setdefault(name, []).append(v)
        out["by_scenario"] = {k: statistics.median(v) for k, v in by.items()}
        if self.ws_probes:
            out["working_set_ns"] = {"median": statistics.median(self.ws_probes),
                                     "min": min(self.ws_probes), "max": max(self.ws_probes),
                                     "bytes": _machine.WORKING_SET_BYTES}
        return out

    def _drift_notes(self, sc: Scenario) -> None:
        """A note when the scenario's controls ran on a machine faster or slower than
        the run's so far (by more than DRIFT_LIMIT)."""
        mine = [v for name, v in self.controls if name == sc.name]
        every = [v for _, v in self.controls]
        if len(mine) < 3 or len(every) <= len(mine):
            return
        ch = statistics.median(mine) / statistics.median(every) - 1.0
        if abs(ch) > _machine.DRIFT_LIMIT:
            word = "slower" if ch > 0 else "faster"
            self.notes.append(Note("machine-drift", f"the machine ran {abs(ch):.0%} {word} "
                                   "during this scenario than over the run (fixed-work speed "
                                   "index): its figures and the others' differ by that much "
                                   "beyond the clients", None, sc.name, severity="info"))

    def _assemble(self, client: str, sc: Scenario, rep: int, w: WorkerProc,
                  parts: list[dict[str, Any]]) -> MeasureResult:
        """A round from its slices: summed counts, merged latencies, summed noise
        windows, then the round's anomaly notes."""
        mr = merge_slices([p["mr"] for p in parts])
        srv_delta: dict[str, int | None] = {}
        for k in parts[0]["server"]:
            vals = [p["server"][k] for p in parts]
            srv_delta[k] = None if any(v is None for v in vals) else sum(vals)
        protocol, pkind, pmsg = protocol_verdict(sc, srv_delta)
        if pkind is not None and pmsg is not None:
            self.notes.append(Note(pkind, f"round {rep + 1}: {pmsg}", client, sc.name, rep,
                                   "warning"))
        # on the client's CPU (same or unpinned), the server's CPU is the harness's, not noise
        windows = [tuple(p["msg"].get("noise") or (None, None)) for p in parts]
        shared = (0 if self.placement.get("mode") == "split"
                  else sum(p["server"].get("cpu_ns") or 0 for p in parts))
        noise = _noise.windows_noise(windows, exclude_ns=shared)
        msgs = [p["msg"] for p in parts]
        round_requests = sum(int(m.get("round_requests") or 0) for m in msgs)
        problems = [m["verify"] for m in msgs if m.get("verify") and not m["verify"].get("ok")]
        verify = problems[-1] if problems else (msgs[-1].get("verify") or {"ok": True})
        samples = [s for m in msgs for s in (m.get("error_samples") or [])][:5]
        md = dict(mr.metadata)
        md["noise"] = noise
        md.update({
            "client": client, "scenario": sc.name, "repeat": rep,
            "protocol": protocol,
            "server": srv_delta, "server_threads": self.opt.server_threads,
            "worker_requests": round_requests,
            "verify": verify, "error_samples": samples,
            "client_version": self.versions.get(client),
            "kind": w.info.get("kind", "sync"),
            "worker": w.info,
            "slices": len(parts),
        })
        import dataclasses

        mr = dataclasses.replace(mr, metadata=md)
        self.notes.extend(round_notes(
            client, sc, rep, md["kind"], mr, srv_delta, round_requests,
            verify, md["error_samples"], self.opt.server_threads))
        return mr

    def _deterministic(self, client: str, sc: Scenario,
                       results: dict[tuple[str, str, int], MeasureResult], w: WorkerProc) -> None:
        """Counts of ``deterministic_n`` requests from the worker's counting
        children, attached to each of the client's rounds of ``sc``."""
        from ._deterministic import scaled_timeout

        reps = {k: r for k, r in results.items() if k[0] == client and k[1] == sc.name}
        if w.dead or not reps:
            return
        n = self.opt.deterministic_n
        per = max(max(r.wall_ns / r.calls * r.concurrency if r.calls else 0.0, r.p99)
                  for r in reps.values()) / 1e9
        child_s = scaled_timeout(per, n + 20)
        self._progress(f"counting {sc.name} {client}: {n} requests under callgrind and strace")
        try:
            w.send({"cmd": "deterministic", "n": n, "timeout": child_s})
            # two children (callgrind, strace), each bounded by child_s
            msg = w.recv(timeout=2 * child_s + self.opt.timeout)
        except WorkerFailed as exc:
            self.notes.append(Note("deterministic-failed", f"counting failed: {exc}", client,
                                   sc.name, None, "warning"))
            return
        st = msg.get("status")
        if st == "skipped":
            self.notes.append(Note("deterministic-skipped", "no instruction/syscall counts: "
                                   + str(msg.get("reason")), client, sc.name, None, "info"))
            return
        if st != "ok":
            self.notes.append(Note("deterministic-failed", f"counting failed: "
                                   f"{msg.get('error')}", client, sc.name, None, "warning"))
            return
        import dataclasses

        fields = {k: tuple(v) if isinstance(v, list) else v
                  for k, v in (msg.get("fields") or {}).items()}
        det_md = dict(msg.get("metadata") or {})
        det_md["deterministic_scope"] = ("a separate run of fresh adapters, one request at a "
                                         "time, after the timing rounds")
        for key, mr in reps.items():
            md = dict(mr.metadata)
            md.update(det_md)
            results[key] = dataclasses.replace(mr, metadata=md, **fields)

    def stop(self) -> None:
        """Stop the server processes and the zygote this runner started."""
        if self._zygote is not None:
            with contextlib.suppress(Exception):
                self._zygote.stop()
            self._zygote = None
        for z in self._env_zygotes.values():
            with contextlib.suppress(Exception):
                z.stop()
        self._env_zygotes.clear()
        for srv in self.servers.values():
            with contextlib.suppress(Exception):
                srv.stop()
        self.servers.clear()
