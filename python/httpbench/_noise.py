"""Machine noise during a measured round: CPU steal and CPU used by other processes.

A round reads ``/proc/stat`` (the line of the CPU the client is pinned to, or
the all-CPU line) and its own CPU (``getrusage``, self and children) at both
ends. ``steal`` is the fraction of that CPU's time the hypervisor gave to
other guests; ``other`` the fraction busy with work that is not the client's
(other processes, interrupts; minus the in-process server CPU when the client
shares its CPUs with it). Both are ~0 on a quiet machine. /proc/stat counts in
clock ticks (usually 10 ms), so short rounds carry a few ticks of error.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["DISTURBED_OTHER", "DISTURBED_STEAL", "disturbed", "round_noise", "snapshot",
           "summary", "summary_line", "windows_noise"]

# a round is disturbed when others took more than this share of the client's CPU(s)
DISTURBED_OTHER = 0.20
DISTURBED_STEAL = 0.05
# below this many ticks in the window the fractions are not meaningful
_MIN_TICKS = 5

try:
    _TICK_NS = 1e9 / os.sysconf("SC_CLK_TCK")
except (AttributeError, OSError, ValueError):
    _TICK_NS = 1e7


def _cpu_line(cpu: int | None) -> list[int] | None:
    want = "cpu" if cpu is None else f"cpu{cpu}"
    try:
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                parts = line.split()
                if parts and parts[0] == want:
                    return [int(x) for x in parts[1:]]
    except (OSError, ValueError):
        return None
    return None


def _own_cpu_ns() -> int:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return int((s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime) * 1e9)


def snapshot(cpu: int | None) -> dict[str, Any] | None:
    """The counters at one end of a round (None where /proc/stat is not readable)."""
    ticks = _cpu_line(cpu)
    if ticks is None:
        return None
    return {"cpu": cpu, "ticks": ticks, "own_cpu_ns": _own_cpu_ns(),
            "wall_ns": time.monotonic_ns()}


def round_noise(a: dict[str, Any] | None, b: dict[str, Any] | None,
                exclude_ns: int = 0) -> dict[str, Any] | None:
    """Steal and other-CPU fractions between two snapshots.

    ``exclude_ns``: CPU of the harness's own processes on the same CPUs that is
    not the client's (the server, when nothing is pinned).
    """
    if a is None or b is None:
        return None
    d = [y - x for x, y in zip(a["ticks"], b["ticks"], strict=False)]
    d += [0] * (10 - len(d))
    user, nice, system, idle, iowait, irq, softirq, steal = d[:8]
    total = user + nice + system + idle + iowait + irq + softirq + steal
    busy = user + nice + system + irq + softirq
    own = b["own_cpu_ns"] - a["own_cpu_ns"]
    total_ns = total * _TICK_NS
    out: dict[str, Any] = {"cpu": a["cpu"], "ticks": total,
                           "wall_ns": b["wall_ns"] - a["wall_ns"], "own_cpu_ns": own}
    if total < _MIN_TICKS:
        out.update(steal=None, other=None)
        return out
    other_ns = busy * _TICK_NS - own - max(0, exclude_ns)
    out["steal"] = round(steal / total, 4)
    out["other"] = round(min(1.0, max(0.0, other_ns / total_ns)), 4)
    return out


def windows_noise(windows: Sequence[tuple[dict[str, Any] | None, dict[str, Any] | None]],
                  exclude_ns: int = 0) -> dict[str, Any] | None:
    """Steal and other-CPU fractions over several measured windows (a round's
    slices): their counters summed, the time between them left out."""
    if not windows or any(a is None or b is None for a, b in windows):
        return None
    if len(windows) == 1:
        return round_noise(windows[0][0], windows[0][1], exclude_ns)
    width = max(len(a["ticks"]) for a, _ in windows)  # type: ignore[index]
    ticks = [0] * width
    own = wall = 0
    for a, b in windows:
        assert a is not None and b is not None
        for i, (x, y) in enumerate(zip(a["ticks"], b["ticks"], strict=False)):
            ticks[i] += y - x
        own += b["own_cpu_ns"] - a["own_cpu_ns"]
        wall += b["wall_ns"] - a["wall_ns"]
    cpu = windows[0][0]["cpu"]  # type: ignore[index]
    zero = {"cpu": cpu, "ticks": [0] * width, "own_cpu_ns": 0, "wall_ns": 0}
    out = round_noise(zero, {"cpu": cpu, "ticks": ticks, "own_cpu_ns": own, "wall_ns": wall},
                      exclude_ns)
    if out is not None:
        out["windows"] = len(windows)
    return out


def disturbed(noise: dict[str, Any] | None) -> bool:
    """True when steal or other processes took a notable share of the round's CPU."""
    if not noise or noise.get("other") is None:
        return False
    return bool(noise["other"] > DISTURBED_OTHER or (noise.get("steal") or 0) > DISTURBED_STEAL)


def summary(rounds: Sequence[dict[str, Any] | None], reruns: int = 0) -> dict[str, Any]:
    """Medians and maxima of steal/other over kept rounds, how many were disturbed."""
    got = [r for r in rounds if r and r.get("other") is not None]
    out: dict[str, Any] = {"rounds": len(got), "reruns": reruns,
                           "disturbed": sum(1 for r in got if disturbed(r))}
    for k in ("steal", "other"):
        vals = [float(r[k]) for r in got]
        out[f"{k}_median"] = statistics.median(vals) if vals else None
        out[f"{k}_max"] = max(vals) if vals else None
    return out


def summary_line(s: dict[str, Any]) -> str:
    """One line: 'machine noise: steal 0.0 %, other processes 1.2 % (max 3 %) ...'."""
    if not s.get("rounds"):
        return "machine noise: not measured (no /proc/stat)"

    def pct(v: float | None) -> str:
        return "?" if v is None else f"{v * 100:.1f} %"

    line = (f"machine noise: CPU steal {pct(s['steal_median'])}, other processes "
            f"{pct(s['other_median'])} of the client's CPU (median of {s['rounds']} rounds, "
            f"max {pct(s['other_max'])})")
    if s.get("reruns"):
        line += f"; {s['reruns']} disturbed round(s) re-run"
    if s.get("disturbed"):
        line += f"; {s['disturbed']} round(s) still disturbed: treat with care"
    return line
