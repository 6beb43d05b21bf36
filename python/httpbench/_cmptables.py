"""Compare tables: a compare run as ``httpbench compare`` prints it and writes it
to tables.txt (public through ``httpbench.report``). Each table row is a
:func:`~httpbench.report.cell_rows` row: the medians over a client's repeats
under the DataFrame's names; the version and saved-run deltas are the ones the
run stored."""

from __future__ import annotations

import math
import os
from typing import Any

from . import _units as U
from ._delta import DELTA_METRICS, format_delta
from ._delta import TEST as DELTA_TEST
from ._machine import machine_change_line, placement_lines, speed_line
from ._noise import summary_line
from ._results import MeasureResult, ResultSet
from ._rows import cell_rows
from ._tables import ci_pm, render_table
from ._verdict import PRIMARY, format_ratio, format_value, primary_metric, verdict, verdicts

__all__ = ["caption", "compare_table", "format_tables", "ranking_lines", "report_tables",
           "took_line",
           "verdict_lines"]

# (cell_rows column, header, scale to the shown unit); notes last
_CMP_COLUMNS = (
    ("client", "client", 1.0),
    ("rps", "req/s", 1.0),
    ("p50_ns", "p50", 1.0),
    ("p99_ns", "p99", 1.0),
    ("cpu_ns_per_request", "CPU µs/req", 1e-3),
    ("allocs_per_request", "Python allocs/req", 1.0),
    ("native_allocs_per_request", "native allocs/req", 1.0),
    ("alloc_bytes_per_request", "KiB allocated/req", 1 / 1024),
    ("gc_per_10k", "GC/10k req", 1.0),
    ("peak_rss_bytes", "peak RSS", 1.0),
)
# columns shown only when some row has them (compare --deterministic)
_CMP_DETERMINISTIC = (("instructions_per_request", "instr/req"),
                      ("syscalls_per_request", "syscalls/req"))


def _cmp_pm(row: dict[str, Any], key: str) -> str:
    """' ±x%': half the width of the median's CI relative to it ('' for one repeat)."""
    ci = row.get(key + "_ci")
    med = row.get(key)
    if row.get("repeats", 1) < 2 or not ci or med is None:
        return ""
    return ci_pm(ci[0], ci[1], med)


def _cmp_cell(key: str, row: dict[str, Any], scale: float = 1.0) -> str:
    v = row.get(key)
    if key == "rps":
        s = U.format_count(v, 3)
        sp = row.get("rps_spread")
        if row.get("repeats", 1) > 1 and sp is not None and not math.isnan(sp):
            s += f" ±{sp * 50:.0f}%"  # half the CI's width, relative to the median
        return s
    if key == "p50_ns":
        return U.format_duration(v) + _cmp_pm(row, "p50_ns")
    if key == "cpu_ns_per_request":
        return U.format_count(v * scale, 3) + _cmp_pm(row, "cpu_ns_per_request")
    if key == "p99_ns":
        return U.format_duration(v)
    if key == "peak_rss_bytes":
        return U.format_bytes(v)
    if key == "notes":
        tags = row.get("notes") or {}
        return ", ".join(k + (f"×{c}" if c > 1 else "") for k, c in tags.items()) or ""
    return U.format_count(math.nan if v is None else v * scale, 3)


def caption(rows: list[dict[str, Any]], md: dict[str, Any], scenario: str) -> str:
    """What a scenario's cells rest on: repeats, slices and what the ± means."""
    reps = max(r["repeats"] for r in rows)
    if reps < 2:
        return ("one run per row: no repeats, no confidence interval"
                + ("; thin: too few repeats or requests" if any(r["thin"] for r in rows) else ""))
    cov = max((r["ci_coverage"] for r in rows if r["repeats"] == reps), default=0.0)
    k = int((md.get("slices") or {}).get(scenario) or 1)
    sliced = f", each taken in {k} slices" if k > 1 else ""
    return (f"medians of {reps} repeat{'s' if reps != 1 else ''}{sliced}; ±: half the width of "
            f"the {cov:.0%} order-statistic confidence interval of the median, relative to it"
            + ("; thin: too few repeats or requests" if any(r["thin"] for r in rows) else ""))


def compare_table(rows: list[dict[str, Any]], fmt: str = "text") -> str:
    """One scenario's grid from its :func:`cell_rows` (instr/syscalls columns when counted),
    as text, Markdown or HTML: every rendering of a compare run shows the same cells."""
    det = [(k, h) for k, h in _CMP_DETERMINISTIC if any(r.get(k) is not None for r in rows)]
    cols = [*_CMP_COLUMNS, *((k, h, 1.0) for k, h in det), ("notes", "notes", 1.0)]
    cells = [[r["client"]] + [_cmp_cell(k, r, f) for k, _, f in cols[1:]] for r in rows]
    align = "".join("l" if k in ("client", "notes") else "r" for k, _, _ in cols)
    return render_table([h for _, h, _ in cols], cells, fmt, align=align, style="grid")


def _delta_nan(d: dict[str, Any]) -> dict[str, Any]:
    # a saved file stores NaN as null
    return {k: (math.nan if v is None and k != "p" else v) for k, v in d.items()}


def _delta_row(row: dict[str, Any]) -> str:
    parts = []
    for key, name, kind in DELTA_METRICS:
        if key in row:
            unit = "/req" if "alloc" in key else ""
            parts.append(f"{name} {format_delta(kind, _delta_nan(row[key]), unit)}")
    return ", ".join(parts)


def _measured(rs: ResultSet, client: str, scenario: str) -> bool:
    return any(isinstance(r, MeasureResult) for r in rs.repeats(client, scenario))


def _why_not(rs: ResultSet, client: str, scenario: str) -> str:
    """Why ``client`` has no rounds on ``scenario``: its error note or skip reason."""
    for n in rs.notes:
        if n.client == client and n.scenario in (scenario, None) and n.severity == "error":
            return f"{n.kind}: {n.message}"
    return rs.skipped.get(f"{client}/{scenario}") or rs.skipped.get(client) or "no rounds"


def _version_lines(rs: ResultSet, scenario: str) -> list[str]:
    """Every versioned row against the baseline spec (the deltas the run stored);
    a spec without rounds on ``scenario`` gets the reason instead."""
    v = rs.metadata.get("versions")
    if not v:
        return []
    ds = {c: row for c, row in ((v.get("deltas") or {}).get(scenario) or {}).items()
          if _measured(rs, c, scenario)}
    lost = [c for c in (v.get("specs") or {}) if not _measured(rs, c, scenario)]
    if not ds and not lost:
        return []
    lines = [f"   vs {v['baseline']} ({v.get('test', DELTA_TEST)}; allocations and GC: exact "
             "differences)"]
    for c, row in ds.items():
        lines.append(f"   {c} vs {v['baseline']}: " + _delta_row(row))
    for c in lost:
        lines.append(f"   {c}: not compared ({_why_not(rs, c, scenario)})")
    return lines


def _saved_run_lines(rs: ResultSet, scenario: str) -> list[str]:
    """The delta lines against a saved run (``--baseline-file``) for ``scenario``."""
    bf = rs.metadata.get("baseline_file")
    if not bf:
        return []
    name = os.path.basename(str(bf.get("path")))
    if scenario in (bf.get("missing_scenarios") or []):
        return [f"   vs saved run {name}: it has no {scenario} (not compared)"]
    rows = (bf.get("deltas") or {}).get(scenario) or {}
    lines = [f"   vs saved run {name} (not interleaved: measured at another time; "
             f"{bf.get('test', DELTA_TEST)}; allocations and GC: exact differences)"]
    machine = machine_change_line(bf.get("machine_change"))
    if machine:
        lines.append(f"   {machine}")
    match = bf.get("matched") or {}
    for c in rs.clients:
        if not _measured(rs, c, scenario):
            continue
        if c in rows:
            lines.append(f"   {c} vs saved {match.get(c)}: {_delta_row(rows[c])}")
        else:
            lines.append(f"   {c}: no matching row in {name}")
    return lines


def _env_line(md: dict[str, Any]) -> str | None:
    changes = md.get("environment_changes") or {}
    if not changes:
        return None
    return ("   environment: the caller's, changed for every client alike: "
            + "; ".join(f"{k}: {v}" for k, v in changes.items()))


def _under_table(rs: ResultSet, scenario: str) -> list[str]:
    """The lines under a scenario's table: environment changes, machine noise, protocol."""
    lines = []
    env = _env_line(rs.metadata)
    if env:
        lines.append(env)
    noise = (rs.metadata.get("noise") or {}).get(scenario)
    if noise:
        lines.append("   " + summary_line(noise))
    sc = (rs.metadata.get("scenarios") or {}).get(scenario) or {}
    if sc.get("protocol") == "h2":
        protos = {r.metadata.get("protocol") for k, r in rs.results.items() if k[1] == scenario}
        proof = ("proven in every round by the server's per-protocol counts"
                 if protos == {"h2"} else
                 "NOT proven in every round (see the notes): " + ", ".join(sorted(map(str, protos))))
        lines.append(f"   protocol: {'h2' if sc.get('tls') else 'h2c'}, "
                     f"{sc.get('concurrency', 1)} in flight on one connection; {proof}")
    elif sc.get("protocol") == "h3":
        protos = {r.metadata.get("protocol") for k, r in rs.results.items() if k[1] == scenario}
        proof = ("proven in every round by the server's HTTP/3 request counts"
                 if protos == {"h3"} else
                 "NOT proven in every round (see the notes): " + ", ".join(sorted(map(str, protos))))
        lines.append(f"   protocol: h3 (QUIC), one request at a time on one connection; {proof}")
    return lines


def skip_lines(skipped: dict[str, str]) -> list[str]:
    """The skipped ``client/scenario`` pairs, one line per reason: a reason shared by
    several pairs names its clients once per set of scenarios, in the run's order."""
    by_reason: dict[str, list[str]] = {}
    for what, why in skipped.items():
        by_reason.setdefault(why, []).append(what)
    out: list[str] = []
    for why, whats in by_reason.items():
        if len(whats) == 1:
            out.append(f"{whats[0]}: {why}")
            continue
        per_client: dict[str, list[str]] = {}
        for what in whats:
            client, _, scenario = what.partition("/")
            per_client.setdefault(client, []).append(scenario)
        groups: dict[tuple[str, ...], list[str]] = {}
        for client, scenarios in per_client.items():
            groups.setdefault(tuple(scenarios), []).append(client)
        for scenarios, clients in groups.items():
            where = f" ({', '.join(x for x in scenarios if x)})" if any(scenarios) else ""
            out.append(f"{', '.join(clients)}{where}: {why}")
    return out


def ranking_lines(v: Any, indent: str = "   ") -> list[str]:
    """A scenario's clients ranked by its primary figure: rank, client, figure, ratio to
    the best with the ratio's interval."""
    name, higher, short = PRIMARY[v.metric]
    head = (f"{indent}ranked by {name} ({'higher' if higher else 'lower'} is better; "
            f"× the best with its interval from the medians' {v.coverage:.0%} CIs):")
    rows = [[f"{i}.", s.client, format_value(v.metric, s.value), format_ratio(s)]
            for i, s in enumerate(v.standings, 1)]
    table = render_table(["", "client", short, "× best"], rows, align="llrl", style="bare")
    return [head] + [indent + ln for ln in table.splitlines()]


def verdict_lines(rs: ResultSet) -> list[str]:
    """The run's verdict: one generated sentence of findings per scenario."""
    vs = verdicts(rs)
    if not vs:
        return []
    return ["Verdict:"] + [f"  * {v.sentence}" for v in vs] + [""]


def took_line(md: dict[str, Any]) -> str:
    """'Took 8.1 s in all (measuring 4.2 s; results, plots and HTML 3.9 s)': the whole
    command's wall time ('' for a run saved without it)."""
    wall, meas = md.get("wall_s"), md.get("duration_s")
    if wall is None:
        return ""
    if meas is None:
        return f"Took {float(wall):.1f} s in all"
    return (f"Took {float(wall):.1f} s in all (measuring {float(meas):.1f} s; results, "
            f"plots and HTML {max(0.0, float(wall) - float(meas)):.1f} s)")


def format_tables(rs: ResultSet) -> str:
    """A compare run as ``httpbench compare`` prints it: the verdict first (a sentence
    per scenario), then per scenario its ranking and table (its :func:`cell_rows`) with
    the method lines under it, then notes, skipped clients and the run."""
    out: list[str] = verdict_lines(rs)
    md = rs.metadata
    order = list(md.get("scenario_order") or rs.scenarios)
    for s in rs.scenarios:
        if s not in order:
            order.append(s)
    scdefs = md.get("scenarios") or {}
    for s in order:
        rows = cell_rows(rs, s)
        desc = (scdefs.get(s) or {}).get("description") or ""
        out.append(f"== {s}" + (f" — {desc}" if desc else ""))
        if rows:
            v = verdict(rows, s, primary_metric(scdefs.get(s)))
            if v is not None:
                out.extend(ranking_lines(v))
            out.append(compare_table(rows))
            out.append(f"   ({caption(rows, md, s)})")
            out.extend(placement_lines(md, s))
            out.extend(_version_lines(rs, s))
            out.extend(_saved_run_lines(rs, s))
            out.extend(_under_table(rs, s))
        else:
            out.append("   (no results)")
        out.append("")
    if rs.notes:
        out.append("Notes:")
        seen: set[tuple[Any, ...]] = set()
        for n in rs.notes:
            key = (n.kind, n.client, n.scenario)
            if key in seen:
                continue
            seen.add(key)
            count = sum(1 for m in rs.notes if (m.kind, m.client, m.scenario) == key)
            more = f" (in {count} rounds)" if count > 1 else ""
            where = "/".join(x for x in (n.client, n.scenario) if x)
            out.append(f"  * [{n.kind}] {where + ': ' if where else ''}{n.message}{more}")
        out.append("")
    if rs.skipped:
        out.append("Skipped:")
        out.extend(f"  * {line}" for line in skip_lines(rs.skipped))
        out.append("")
    bits = [f"Python {md.get('python')}", str(md.get("openssl")), str(md.get("kernel")),
            f"{md.get('cpus')} CPU(s) {md.get('cpu_model') or ''}".strip(),
            f"clock {md.get('clock_source')}"]
    pin = md.get("pinning")  # results saved before placement was chosen per scenario
    if pin:
        bits.append(f"server on CPU {pin.get('server_cpus')}, workers on CPU {pin.get('worker_cpu')}")
    if md.get("duration_s") is not None:
        bits.append(f"measured in {md['duration_s']:.1f} s")
    out.append("Run: " + "; ".join(bits))
    speed = speed_line(md)
    if speed:
        out.append(speed)
    vers = md.get("client_versions") or {}
    if vers:
        out.append("Clients: " + "; ".join(k if k.endswith(f" {v}") else f"{k} {v}"
                                           for k, v in vers.items() if v))
    out.extend(_replaced_lines(md))
    return "\n".join(out) + "\n"


def _replaced_lines(md: dict[str, Any]) -> list[str]:
    """A warning per import name that two installed distributions claim, naming the
    clients that import it: what runs is whichever was installed last."""
    seen: dict[str, tuple[list[str], list[str]]] = {}
    for client, st in (md.get("client_stacks") or {}).items():
        for mod, owners in ((st or {}).get("replaced") or {}).items():
            seen.setdefault(mod, (list(owners), []))[1].append(client)
    return [f"Warning: {mod}/ is installed by {' and '.join(owners)}: {', '.join(clients)} "
            "run whichever was installed last" for mod, (owners, clients) in seen.items()]


def report_tables(rs: ResultSet) -> str:
    """A saved compare run as ``httpbench report`` prints it: what compare printed, and
    the whole command's time when it was saved."""
    took = took_line(rs.metadata)
    return format_tables(rs) + (took + "\n" if took else "")
