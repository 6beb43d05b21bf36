"""What makes two runs unlike: the settings that differ, each run's noise, and the
cells whose verdict rests on a disturbed or thin measurement.

``diff`` prints these above its verdicts, so "17 improvements" between a noisy
``--quick`` run and a quiet full run is never read as a like-for-like result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._machine import machine_change_line
from ._noise import summary_line
from ._results import BenchResult, ResultSet
from ._rows import is_thin
from ._stack import stack_differences

__all__ = ["WAKEUP_TOLERANCE", "build_difference", "cell_cautions", "machine_line",
           "noise_notes", "run_metadata", "stack_causes", "unlike_settings"]


def run_metadata(rs: ResultSet) -> dict[str, Any]:
    """A run's facts: the set's metadata, else (a lone record) its first record's."""
    if rs.metadata:
        return dict(rs.metadata)
    for r in rs.results.values():
        return dict(r.metadata)
    return {}


def _slices(v: Any) -> Any:
    if isinstance(v, dict) and v:
        vals = set(v.values())
        return next(iter(vals)) if len(vals) == 1 else dict(sorted(v.items()))
    return v


def _placement(v: Any) -> Any:
    if isinstance(v, dict) and "mode" in v:
        return f"{v.get('mode')} (server {v.get('server_cpus')}, client {v.get('client_cpus')})"
    if isinstance(v, dict):
        return {k: _placement(x) for k, x in sorted(v.items())}
    return v


def _speed(v: Any) -> Any:
    return v.get("median") if isinstance(v, dict) else v


def _wakeup(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    return ", ".join(f"{k.replace('_', '-')} {float(x) / 1e3:.1f} µs" for k, x in sorted(v.items())
                     if isinstance(x, (int, float)))


def _wakeup_moved(a: Any, b: Any) -> bool:
    """True when a wake-up cost moved beyond :data:`WAKEUP_TOLERANCE` (28.4 vs 29.0 µs
    is the same machine calibrated twice)."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return a != b
    for k in set(a) | set(b):
        x, y = a.get(k), b.get(k)
        if not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
            if x != y:
                return True
            continue
        if x > 0 and abs(y / x - 1) > WAKEUP_TOLERANCE:
            return True
    return False


def _bench_shape(rs: ResultSet) -> Any:
    shapes = {f"-c{r.config.concurrency} -t{r.config.threads}"
              + (f" -R{r.config.rate:g}" if r.config.rate else "")
              + (f" {r.config.h2_shape}" if r.config.h2_shape else "")
              for r in rs.results.values() if isinstance(r, BenchResult)}
    return ", ".join(sorted(shapes)) or None


# (label, metadata key, how to read it); absent on both sides: not compared
_SETTINGS: list[tuple[str, str, Callable[[Any], Any]]] = [
    ("quick", "quick", bool),
    ("repeats", "repeat", lambda v: v),
    ("slices", "slices", _slices),
    ("scale", "scale", lambda v: v),
    ("requests per round", "n", lambda v: v),
    ("min requests per round", "min_requests", lambda v: v),
    ("placement", "placement", _placement),
    ("pinning", "pinning", lambda v: v),
    ("interpreter", "python", lambda v: v),
    ("Python implementation", "python_implementation", lambda v: v),
    ("CPU model", "cpu_model", lambda v: v),
    ("CPUs", "cpus", lambda v: v),
    ("host", "hostname", lambda v: v),
    ("wake-up cost", "wakeup_ns", _wakeup),
]
# a machine-speed index moves a little between runs on one machine; beyond this it differs
SPEED_TOLERANCE = 0.05
# a wake-up round trip calibrated twice on one machine moves by this much
WAKEUP_TOLERANCE = 0.25
# settings recorded per scenario: compared on the scenarios both runs have
_PER_SCENARIO = ("slices", "placement")


def unlike_settings(base: ResultSet, cur: ResultSet) -> list[str]:
    """'slices: 8 vs 2' for each setting the two runs do not share (absent on one side
    counts only when the other records it: older results lack the newer keys)."""
    ma, mb = run_metadata(base), run_metadata(cur)
    common = set(base.scenarios) & set(cur.scenarios)
    out = []
    for label, key, read in _SETTINGS:
        if key not in ma and key not in mb:
            continue
        a, b = ma.get(key), mb.get(key)
        if a is None or b is None:
            if key in ("wakeup_ns", "placement", "quick") or (a is None and b is None):
                continue  # not recorded by the older run: nothing to compare
        if key in _PER_SCENARIO and isinstance(a, dict) and isinstance(b, dict) \
                and "mode" not in a and "mode" not in b:
            a = {k: v for k, v in a.items() if k in common}
            b = {k: v for k, v in b.items() if k in common}
        if key == "wakeup_ns" and not _wakeup_moved(a, b):
            continue
        va, vb = read(a), read(b)
        if va != vb:
            out.append(f"{label}: {_show(va)} vs {_show(vb)}")
    build = build_difference(ma, mb)
    if build:
        out.append(build)
    sa, sb = _speed(ma.get("speed_index")), _speed(mb.get("speed_index"))
    if isinstance(sa, (int, float)) and isinstance(sb, (int, float)) and sa > 0:
        if abs(sb / sa - 1) > SPEED_TOLERANCE:
            out.append(f"machine-speed index: {sa:g} vs {sb:g}")
    ba, bb = _bench_shape(base), _bench_shape(cur)
    if ba and bb and ba != bb:
        out.append(f"load shape: {ba} vs {bb}")
    return out


def build_difference(ma: dict[str, Any], mb: dict[str, Any]) -> str:
    """'build features: http2-server yes vs no, ...' when the two builds of httpbench
    differ ('' when equal or not recorded): a server with more protocols is a bigger
    process, every client's peak RSS moves with it."""
    fa, fb = ma.get("build_features"), mb.get("build_features")
    if not isinstance(fa, dict) or not isinstance(fb, dict):
        return ""
    diffs = [f"{k} {_show(fa.get(k))} vs {_show(fb.get(k))}" for k in sorted(set(fa) | set(fb))
             if fa.get(k) != fb.get(k)]
    return "build features: " + ", ".join(diffs) if diffs else ""


def stack_causes(base: ResultSet, cur: ResultSet) -> dict[str, str]:
    """client -> how its transport stack differs between the runs ('urllib3 2.8.0 vs
    2.9.0; ...'), for the clients whose recorded stacks differ."""
    sa = run_metadata(base).get("client_stacks") or {}
    sb = run_metadata(cur).get("client_stacks") or {}
    out = {}
    for c in sorted(set(sa) & set(sb)):
        d = stack_differences(sa[c], sb[c])
        if d:
            out[c] = "; ".join(d)
    return out


def machine_line(base: ResultSet, cur: ResultSet) -> str:
    """'machine: speed index 54.3 -> 55.8 µs/unit (+2.7%); wake-up same-cpu 1.8 -> 1.9
    µs, cross-cpu 40.0 -> 41.0 µs', or what is unknown: always one line."""
    ma, mb = run_metadata(base), run_metadata(cur)
    sa, sb = _speed(ma.get("speed_index")), _speed(mb.get("speed_index"))
    parts = []
    if isinstance(sa, (int, float)) and isinstance(sb, (int, float)) and sa > 0:
        parts.append(f"speed index {sa / 1e3:.1f} -> {sb / 1e3:.1f} µs per unit of work "
                     f"({sb / sa - 1:+.1%}; + is slower)")
        drift = machine_change_line(sb / sa - 1)  # beyond the drift limit: said in words
        if drift:
            parts.append(drift)
    else:
        parts.append("speed index not recorded in "
                     + ("both runs" if sa is None and sb is None
                        else "the baseline" if sa is None else "the current run"))
    wa, wb = ma.get("wakeup_ns"), mb.get("wakeup_ns")
    if isinstance(wa, dict) and isinstance(wb, dict):
        bits = [f"{k.replace('_', '-')} {float(wa[k]) / 1e3:.1f} -> {float(wb[k]) / 1e3:.1f} µs"
                for k in sorted(set(wa) & set(wb))
                if isinstance(wa[k], (int, float)) and isinstance(wb[k], (int, float))]
        if bits:
            parts.append("wake-up " + ", ".join(bits))
    return "machine: " + "; ".join(parts)


def _show(v: Any) -> str:
    if v is True:
        return "yes"
    if v is False:
        return "no"
    if isinstance(v, dict):
        return ", ".join(f"{k} {x}" for k, x in v.items())
    return "—" if v is None else str(v)


def noise_notes(name: str, rs: ResultSet) -> list[str]:
    """A run's warnings about itself: disturbed scenarios and its notes by kind."""
    out = []
    noise = run_metadata(rs).get("noise")
    if isinstance(noise, dict):
        for sc, s in noise.items():
            if isinstance(s, dict) and s.get("disturbed"):
                out.append(f"{name} {sc}: {summary_line(s)}")
    kinds: dict[str, int] = {}
    for n in rs.notes:
        kinds[n.kind] = kinds.get(n.kind, 0) + 1
    if kinds:
        out.append(f"{name} notes: " + ", ".join(
            f"{k} ×{c}" if c > 1 else k for k, c in sorted(kinds.items())))
    return out


_DISTURBED_KINDS = ("noisy",)
_THIN_KINDS = ("few-requests",)


def cell_cautions(rs: ResultSet, name: str) -> dict[tuple[str, str], str]:
    """(client, scenario) -> why its figures are weak in this run ('disturbed in
    current', 'thin in baseline'); cells that are fine are absent."""
    out: dict[tuple[str, str], str] = {}
    for n in rs.notes:
        if n.client and n.scenario:
            if n.kind in _DISTURBED_KINDS:
                out[(n.client, n.scenario)] = f"disturbed in {name}"
            elif n.kind in _THIN_KINDS:
                out.setdefault((n.client, n.scenario), f"thin in {name}")
    least = run_metadata(rs).get("min_requests")
    calls: dict[tuple[str, str], list[int]] = {}
    for (c, s, _i), r in rs.results.items():
        n = getattr(r, "calls", None)
        if n is None:
            n = r.responses + r.errors  # a bench record
        calls.setdefault((c, s), []).append(int(n))
    for key, ns in calls.items():
        # one repeat is "not tested" anyway; 2 repeats test but too weakly to headline
        if len(ns) >= 2 and is_thin(ns, least):
            out.setdefault(key, f"thin in {name}")
    return out
