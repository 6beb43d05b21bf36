"""CPU time of processes and of the whole machine, for the benchmark scripts (from
``/proc``; re-exported by ``_peers``, see its docstring)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

__all__ = ["CLK_TCK", "CpuMeter", "SystemCpu", "cpu_ns", "cpu_seconds"]

CLK_TCK = os.sysconf("SC_CLK_TCK")



def _cpu_ticks(pid: int) -> int:
    """User+sys CPU clock ticks of process ``pid`` (all threads), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    # comm (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = data[data.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime/stime are fields 14/15.
    return int(fields[11]) + int(fields[12])


def cpu_seconds(pid: int) -> float:
    """User+sys CPU seconds of process ``pid`` (all threads), from /proc/<pid>/stat."""
    return _cpu_ticks(pid) / CLK_TCK


def cpu_ns(pid: int) -> int:
    """User+sys CPU of process ``pid`` in whole nanoseconds (one clock tick of resolution)."""
    return _cpu_ticks(pid) * 1_000_000_000 // CLK_TCK


class CpuMeter:
    """CPU seconds (user+sys) used by some processes across a ``with`` block.

    Resolution is one clock tick (10 ms at CLK_TCK=100): measure runs of
    seconds. A process that exits inside the block raises ProcessLookupError
    at exit (measure a longer-lived process, or a child with ``wait4``).
    """

    def __init__(self, pids: Iterable[int]) -> None:
        self.pids = list(pids)
        self.seconds = 0.0
        self.wall = 0.0
        self._start: dict[int, float] = {}
        self._t0 = 0.0

    def __enter__(self) -> CpuMeter:
        self._start = {p: cpu_seconds(p) for p in self.pids}
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._t0
        self.seconds = sum(cpu_seconds(p) - s for p, s in self._start.items())


class SystemCpu:
    """Whole-machine busy CPU seconds across a ``with`` block (from /proc/stat)."""

    def __init__(self) -> None:
        self.busy_seconds = 0.0
        self.wall = 0.0
        self.cores = os.cpu_count() or 1
        self._b0 = 0.0
        self._t0 = 0.0

    @staticmethod
    def _busy() -> float:
        with open("/proc/stat") as f:
            parts = f.readline().split()
        vals = [int(x) for x in parts[1:]]
        idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
        total = sum(vals[:8])  # user..steal; guest is already inside user
        return (total - idle) / CLK_TCK

    def __enter__(self) -> SystemCpu:
        self._b0 = self._busy()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._t0
        self.busy_seconds = self._busy() - self._b0

    @property
    def busy_fraction(self) -> float:
        """Busy share of all cores over the block (0..1)."""
        return self.busy_seconds / (self.wall * self.cores) if self.wall > 0 else 0.0
