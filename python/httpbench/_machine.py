"""The machine under the figures: wake-up cost, placement and a speed index.

* ``wakeup_cost()``: the round trip of a one-byte ping-pong between two
  threads, both on one CPU and on two (C, ``_core.calibrate_wakeup``). Every
  sequential request pays one such round trip; on a VM the cross-CPU one is
  an inter-processor interrupt each way and can cost 5-10x the same-CPU one.
* ``choose_placement()``: where server and client run for one scenario:
  sequential work on one CPU when crossing CPUs costs more, concurrent work
  split over two so client and server overlap.
* ``fixed_work_ns()``: a fixed piece of pure-Python work, timed; its ns per
  unit is the machine-speed index, and two runs' ratio is the machine's change
  (``machine_change``), told apart from a client's change.
* ``working_set_ns()``: a dependent random walk through a working set the size of
  a client's hot memory (C, ``_core.calibrate_working_set``): ns per step. It runs
  from the shared cache on a quiet machine and slows when other processes evict
  it, which the small fixed-work loop never shows.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

__all__ = [
    "DRIFT_LIMIT",
    "PLACEMENTS",
    "WAKEUP_FACTOR",
    "WAKEUP_PENALTY",
    "choose_placement",
    "fixed_work_ns",
    "machine_change",
    "machine_change_line",
    "observed_placement",
    "placement_lines",
    "placement_text",
    "speed_line",
    "speed_summary",
    "speed_text",
    "usable_cpus",
    "wakeup_cost",
    "wakeup_limit_ns",
    "WORKING_SET_BYTES",
    "working_set_ns",
    "working_set_text",
    "wakeup_text",
]

PLACEMENTS = ("auto", "same", "split", "unpinned")
# crossing CPUs costs this much more than staying on one: sequential work stays on one
WAKEUP_PENALTY = 1.5
# a per-request figure within this factor of the wake-up round trip is mostly the machine's
WAKEUP_FACTOR = 2.0
# a speed index that moved more than this between runs (or within one) is reported
DRIFT_LIMIT = 0.03
# round trips per calibration batch; three batches, the median kept
_TRIPS = 200
_BATCHES = 3

_cached: dict[tuple[int, int | None], dict[str, Any]] = {}


def usable_cpus() -> list[int]:
    """The CPUs this process may run on, sorted ([] where affinity is unknown)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []


def _pingpong(a: int, b: int) -> dict[str, int]:
    from . import _core

    runs = [_core.calibrate_wakeup(a, b, _TRIPS) for _ in range(_BATCHES)]
    runs.sort(key=lambda r: r["rtt_median_ns"])
    return runs[len(runs) // 2]


def wakeup_cost(cpus: Sequence[int] | None = None, refresh: bool = False) -> dict[str, Any]:
    """``{"same_cpu": ns, "cross_cpu": ns | None, "cpus": [a, b], "cpu_ns": {...}}``.

    ``same_cpu`` / ``cross_cpu``: median round-trip time of a one-byte ping-pong
    between two threads on CPU b alone / on CPUs a and b (two wake-ups each);
    ``cpu_ns``: both threads' CPU per round trip. ``cpus`` (default: the first
    and last usable CPU) names a and b; on one CPU ``cross_cpu`` is None.
    Cached per process (about 50 ms of work); ``refresh`` measures again.
    """
    cs = list(cpus) if cpus is not None else usable_cpus()
    if not cs:
        cs = [-1]
    a, b = cs[0], cs[-1]
    key = (b, a if a != b else None)
    if not refresh and key in _cached:
        return dict(_cached[key])
    same = _pingpong(b, b)
    cross = _pingpong(a, b) if a != b else None
    out: dict[str, Any] = {
        "same_cpu": int(same["rtt_median_ns"]),
        "cross_cpu": None if cross is None else int(cross["rtt_median_ns"]),
        "cpus": [a, b] if a != b else [b],
        "cpu_ns": {"same_cpu": int(same["cpu_ns"]),
                   "cross_cpu": None if cross is None else int(cross["cpu_ns"])},
        "round_trips": _TRIPS * _BATCHES,
    }
    _cached[key] = out
    return dict(out)


def choose_placement(mode: str, sequential: bool, wakeup: dict[str, Any] | None,
                     cpus: Sequence[int]) -> dict[str, Any]:
    """Where server and client run: ``{"mode", "server_cpus", "client_cpus"}``.

    ``auto``: sequential work (one request in flight) on one CPU when the
    calibration shows crossing CPUs costs ``WAKEUP_PENALTY`` times more (the
    client's cost, not the wake-up's), else split; concurrent work split, so
    client and server overlap. ``same`` / ``split`` force it; ``unpinned``
    leaves both to the scheduler. Fewer than two CPUs: ``same`` on the one.
    """
    if mode not in PLACEMENTS:
        raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, got {mode!r}")
    cs = sorted(cpus)
    if mode == "unpinned" or not cs:
        return {"mode": "unpinned", "server_cpus": [], "client_cpus": []}
    if len(cs) < 2:
        return {"mode": "same", "server_cpus": cs[-1:], "client_cpus": cs[-1:]}
    if mode == "auto":
        same, cross = (wakeup or {}).get("same_cpu"), (wakeup or {}).get("cross_cpu")
        penalty = bool(same and cross and cross > WAKEUP_PENALTY * same)
        mode = "same" if sequential and penalty else "split"
    if mode == "same":
        return {"mode": "same", "server_cpus": cs[-1:], "client_cpus": cs[-1:]}
    half = len(cs) // 2 if len(cs) >= 4 else 1
    return {"mode": "split", "server_cpus": cs[:half], "client_cpus": cs[-1:]}


def observed_placement(server_cpus: Sequence[int] | None, client_cpus: Sequence[int] | None
                       ) -> dict[str, Any]:
    """The placement two CPU sets make: ``same`` (both on one CPU), ``split``
    (disjoint), else ``unpinned`` (the scheduler decides where they meet)."""
    sv, cl = sorted(set(server_cpus or [])), sorted(set(client_cpus or []))
    if sv and sv == cl and len(sv) == 1:
        mode = "same"
    elif sv and cl and not set(sv) & set(cl):
        mode = "split"
    else:
        mode = "unpinned"
    return {"mode": mode, "server_cpus": sv, "client_cpus": cl}


def wakeup_limit_ns(wakeup: dict[str, Any] | None, placement: dict[str, Any] | None
                    ) -> int | None:
    """The wake-up round trip the placement pays per sequential request, times
    ``WAKEUP_FACTOR``: a p50 or CPU/request below it is mostly the machine's."""
    if not wakeup:
        return None
    mode = (placement or {}).get("mode")
    same, cross = wakeup.get("same_cpu"), wakeup.get("cross_cpu")
    if mode == "same":
        base = same
    elif mode == "split":
        base = cross or same
    else:  # unpinned: the scheduler may give either
        base = max((v for v in (same, cross) if v), default=None)
    return None if not base else int(base * WAKEUP_FACTOR)


def wakeup_text(wakeup: dict[str, Any] | None) -> str:
    """'wake-up round trip 5.4 µs on one CPU, 32 µs across two' (empty when unknown)."""
    if not wakeup or not wakeup.get("same_cpu"):
        return ""
    s = f"wake-up round trip {_us(wakeup['same_cpu'])} on one CPU"
    if wakeup.get("cross_cpu"):
        s += f", {_us(wakeup['cross_cpu'])} across two"
    return s


def placement_text(p: dict[str, Any] | None) -> str:
    """'server and client on CPU 1' / 'server on CPU 0, client on CPU 1' / 'not pinned'."""
    if not p or p.get("mode") == "unpinned":
        return "server and client not pinned"
    sv, cl = p.get("server_cpus") or [], p.get("client_cpus") or []
    if p.get("mode") == "same":
        return f"server and client on CPU {','.join(map(str, cl or sv))}"
    return f"server on CPU {','.join(map(str, sv))}, client on CPU {','.join(map(str, cl))}"


def _us(ns: float) -> str:
    us = ns / 1e3
    return f"{us:.1f} µs" if us < 10 else f"{us:.0f} µs"


def placement_lines(md: dict[str, Any], scenario: str) -> list[str]:
    """The scenario's placement and the machine's wake-up cost, under its title."""
    p = (md.get("placement") or {}).get(scenario)
    if not isinstance(p, dict):
        return []
    why = {"same": "one request in flight: the client's cost, no cross-CPU wake-up",
           "split": "client and server overlap: each gets a CPU",
           "unpinned": "left to the scheduler"}.get(str(p.get("mode")), "")
    rule = md.get("placement_rule")
    how = f"{p.get('mode')}" + (", chosen by calibration" if rule == "auto" else
                                ", as asked" if rule else "")
    line = f"   placement: {placement_text(p)} ({how}; {why})" if why else (
        f"   placement: {placement_text(p)} ({how})")
    out = [line]
    wake = wakeup_text(md.get("wakeup_ns"))
    if wake:
        out.append(f"   machine: {wake}; wake-up: a p50 or CPU/req within "
                   f"{WAKEUP_FACTOR:.0f}x of this placement's round trip")
    return out


def speed_text(md: dict[str, Any]) -> str:
    """'44.5 µs per unit of fixed work (median of 8 controls, range ...)' from the
    run's fixed-work controls ('' when none)."""
    si = md.get("speed_index")
    if not isinstance(si, dict) or not si.get("median"):
        return ""
    med, lo, hi = float(si["median"]), float(si.get("min") or 0), float(si.get("max") or 0)
    n = len(si.get("rounds") or [])
    unit = str(si.get("unit") or "ns per unit of fixed work").replace("ns per", "µs per", 1)
    return (f"{med / 1e3:.1f} {unit} (median of {n} controls, range "
            f"{lo / 1e3:.1f}-{hi / 1e3:.1f}; lower is faster; two runs' ratio is the "
            "machine's change)")


def working_set_text(md: dict[str, Any]) -> str:
    """'working-set probe (4 MiB): 36 ns/step (range 34-52)' ('' when not measured)."""
    si = md.get("speed_index")
    ws = si.get("working_set_ns") if isinstance(si, dict) else None
    if not isinstance(ws, dict) or not ws.get("median"):
        return ""
    return (f"working-set probe ({int(ws.get('bytes') or WORKING_SET_BYTES) >> 20} MiB): "
            f"{float(ws['median']):.0f} ns/step (range {float(ws['min']):.0f}-"
            f"{float(ws['max']):.0f}; slower when other processes evict the cache)")


def speed_line(md: dict[str, Any]) -> str:
    """'Machine speed index: ...' (:func:`speed_text`) under a table ('' when none)."""
    text = speed_text(md)
    ws = working_set_text(md)
    if text and ws:
        text += f"; {ws}"
    return f"Machine speed index: {text}" if text else ""


# ---------------------------------------------------------------- speed index

# one unit of fixed work: the same pure-Python loop as a small client's hot path
_UNIT_ITERATIONS = 1500


def _unit() -> int:
    x = 0
    for i in range(_UNIT_ITERATIONS):
        x += i * i
    return len({i: x for i in range(64)})


def fixed_work_ns(units: int = 10) -> float:
    """Median ns of one unit of fixed pure-Python work over ``units`` units
    (~0.05-0.1 ms each): the machine-speed index of this moment. Lower is faster."""
    if units < 1:
        raise ValueError("units must be >= 1")
    times = []
    for _ in range(units):
        t0 = time.perf_counter_ns()
        _unit()
        times.append(time.perf_counter_ns() - t0)
    return float(statistics.median(times))


# about the hot memory of a Python HTTP client in a loop (interpreter, client library,
# buffers): past the per-core caches, inside a quiet machine's shared cache
WORKING_SET_BYTES = 4 << 20


def working_set_ns(nbytes: int = WORKING_SET_BYTES, accesses: int = 100_000) -> float:
    """ns per step of a dependent random walk through ``nbytes`` (~5 ms at 4 MiB)."""
    from . import _core

    return float(_core.calibrate_working_set(nbytes, accesses))


def speed_summary(rounds: Sequence[float]) -> dict[str, Any] | None:
    """``{"median", "min", "max", "rounds", "unit"}`` of the controls of a run (None: none)."""
    vals = [float(v) for v in rounds if v and v > 0]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "rounds": [round(v, 1) for v in vals], "unit": "ns per unit of fixed work"}


def machine_change(meta_a: dict[str, Any] | None, meta_b: dict[str, Any] | None
                   ) -> float | None:
    """How much slower the machine was in run b than in run a: the ratio of their
    speed indices minus one (0.10: b 10 % slower; -0.05: 5 % faster). None when
    either run has no index."""
    def median(md: dict[str, Any] | None) -> float | None:
        si = (md or {}).get("speed_index")
        v = si.get("median") if isinstance(si, dict) else None
        return float(v) if isinstance(v, (int, float)) and v > 0 else None

    a, b = median(meta_a), median(meta_b)
    if a is None or b is None:
        return None
    return b / a - 1.0


def machine_change_line(change: float | None) -> str:
    """'machine 12 % slower (speed index)' or '' when unknown or within DRIFT_LIMIT."""
    if change is None or abs(change) <= DRIFT_LIMIT:
        return ""
    word = "slower" if change > 0 else "faster"
    return (f"machine {abs(change):.0%} {word} than the baseline's (fixed-work speed index): "
            "part of every change below is the machine's, not the client's")
