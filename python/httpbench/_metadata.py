"""The one collector of machine facts stored with every result (bench, measure,
compare, pytest plugin), so saved results describe the machine the same way."""

from __future__ import annotations

import os
import platform
import ssl
from typing import Any

__all__ = ["METADATA_KEYS", "system_metadata"]

# The keys system_metadata() returns; results of every kind carry these.
METADATA_KEYS = (
    "python", "python_implementation", "python_build", "openssl", "kernel", "machine",
    "platform", "cpu_model", "cpus", "clock", "clock_source", "hostname",
)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _cpu_model() -> str | None:
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.lower().startswith(("model name", "hardware", "cpu model")):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_STATIC: dict[str, Any] | None = None


def system_metadata() -> dict[str, Any]:
    """Python, OpenSSL, kernel, CPU model and usable CPU count, clock source, host.

    A fresh dict each call; the facts that cannot change are read once. ``cpus``
    is the number of CPUs this process may run on (its affinity), as a count.
    """
    global _STATIC
    if _STATIC is None:
        _STATIC = {
            "python": platform.python_version(),
            "python_implementation": platform.python_implementation(),
            "python_build": " ".join(platform.python_build()),
            "openssl": ssl.OPENSSL_VERSION,
            "kernel": f"{platform.system()} {platform.release()}",
            "machine": platform.machine(),
            "platform": platform.platform(),
            "cpu_model": _cpu_model(),
            "clock": "CLOCK_MONOTONIC",
            "clock_source": _read(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource"),
            "hostname": platform.node(),
        }
    md = dict(_STATIC)
    md["cpus"] = _usable_cpus()
    return {k: md[k] for k in METADATA_KEYS}
