#!/usr/bin/env python3
"""The performance suite: every benchmark against its peers, in one command.

    python benchmarks/run.py              # full suite (~15-20 min on 2 cores)
    python benchmarks/run.py --quick      # short runs (~5 min), same tables
    python benchmarks/run.py --only loadgen,server
    python benchmarks/run.py --list
    python benchmarks/run.py --render benchmarks/results/DATE.json   # no run: re-render
    python benchmarks/run.py --only h2server --into benchmarks/results/DATE.json

Each script in benchmarks/ runs as a subprocess with ``--json`` (the scripts
interleave their contenders A B A B ... themselves). This script turns their
output into rows (median, min-max over the rounds, ratio to every peer),
checks the goals of benchmarks/goals.py, and writes
``benchmarks/results/<date>.md`` and ``.json`` (``<date>-quick.*`` for
``--quick``) with machine metadata and how busy the machine was during each
benchmark, and docs/performance.md from a full run.

Peers: wrk, nginx, h2load, curl (Debian) and pycurl (PyPI); a missing one is
named with its install command before anything runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _peers import (  # noqa: E402
    Nginx,
    SystemCpu,
    find_peer,
    install_hint,
    machine_metadata,
    parse_wrk,
    strace_counts,
    summarize,
)
from goals import BENCHMARKS, GOALS, Benchmark, Goal  # noqa: E402

RESULTS = os.path.join(HERE, "results")
PERFORMANCE_MD = os.path.join(os.path.dirname(HERE), "docs", "performance.md")
SCHEMA = 2  # 2: goals computed from benchmarks/goals.py (1: by per-script code)


# ---------------------------------------------------------------------------
# rows: one contender's figure in one case, over the rounds


@dataclasses.dataclass
class Row:
    case: str
    contender: str
    metric: str
    unit: str
    median: float
    min: float
    max: float
    n: int
    values: list[float] = dataclasses.field(default_factory=list)
    ratios: dict[str, float] = dataclasses.field(default_factory=dict)  # peer -> ours/peer


def _row(case: str, contender: str, metric: str, unit: str, values: list[float]) -> dict:
    return {"case": case, "contender": contender, "metric": metric, "unit": unit,
            "values": [float(v) for v in values]}


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(b) else float("nan")


# ---------------------------------------------------------------------------
# readers: a script's own --json (or stdout) -> rows. A script that writes
# {"rows": [...], "notes": [...]} needs no reader.


def read_loadgen(data: Any) -> tuple[list[dict], list[str]]:
    """bench_loadgen.py: a list of runs {target, scheme, conns, tool, round, rps, ...}."""
    groups: dict[tuple[str, str, int], dict[str, list[dict]]] = {}
    for r in data:
        groups.setdefault((r["target"], r["scheme"], int(r["conns"])), {}).setdefault(
            r["tool"], []).append(r)
    rows = []
    for (target, scheme, conns), tools in groups.items():
        case = f"{target} {scheme.upper()} -t1 -c{conns}"
        for tool, runs in tools.items():
            runs = sorted(runs, key=lambda x: x.get("round", 0))
            rows.append(_row(case, tool, "req/s", "req/s", [x["rps"] for x in runs]))
            rows.append(_row(case, tool, "CPU/req", "µs", [x["cpu_us_per_req"] for x in runs]))
    return rows, []


def read_server(data: Any) -> tuple[list[dict], list[str]]:
    """bench_server.py: {"runs": {"<server>/<bytes>": [{rps, cpu_us_per_req, ...}]}}."""
    rows = []
    for key, runs in data["runs"].items():
        name, size = key.rsplit("/", 1)
        case = f"wrk -t1 -c16, {int(size):,} B"
        rows.append(_row(case, name, "CPU/req", "µs", [x["cpu_us_per_req"] for x in runs]))
        rows.append(_row(case, name, "req/s", "req/s", [x["rps"] for x in runs]))
        if name == "embedded" and runs and "thread_cpu_us_per_req" in runs[0]:
            rows.append(_row(case, "embedded (worker threads)", "CPU/req", "µs",
                             [x["thread_cpu_us_per_req"] for x in runs]))
    return rows, []


def _client_rows(case: str, clients: dict[str, Any]) -> list[dict]:
    rows = []
    for name, r in clients.items():
        # per-round lists when the script gives them; else its total over the rounds
        rows.append(_row(case, name, "CPU/req", "µs",
                         r.get("cpu_us_per_req_rounds") or [r["cpu_us_per_req"]]))
        rows.append(_row(case, name, "req/s", "req/s",
                         r.get("req_per_s_rounds") or [r["req_per_s"]]))
        for q in ("p50", "p99"):
            lat = r.get(f"latency_us_{q}_rounds") or (
                [r[f"latency_us_{q}"]] if f"latency_us_{q}" in r else None)
            if lat:
                rows.append(_row(case, name, f"latency {q}", "µs", lat))
    return rows


def read_client(data: Any) -> tuple[list[dict], list[str]]:
    """bench_client.py: {"server", "get": {size: {client: {...}}}, "post": {label: ...},
    "download": {client: {"median_MB_per_s", "best_MB_per_s", "MB_per_s_repeats"}}}."""
    rows: list[dict] = []
    notes: list[str] = []
    where = f"{data.get('server', '?')} server"
    for size, clients in data.get("get", {}).items():
        rows += _client_rows(f"sequential keep-alive GET {size} ({where})", clients)
    for label, clients in (data.get("post") or {}).items():
        rows += _client_rows(f"sequential POST {label} ({where})", clients)
    for name, r in (data.get("download") or {}).items():
        row = _row("30 MB download to disk", name, "MB/s", "MB/s",
                   r.get("MB_per_s_repeats") or [r["median_MB_per_s"]])
        rows.append(row)
    first = next(iter(data.get("get", {}).values()), {})
    if first and "cpu_us_per_req_rounds" not in next(iter(first.values()), {}):
        notes.append(f"{data.get('n', '?')} GETs per client and size in "
                     f"{data.get('rounds', '?')} interleaved rounds; the script reports totals "
                     "over the rounds (one value, no min–max).")
    if not data.get("post"):
        notes.append("Not measured in this run: POST 300 KB from a file.")
    return rows, notes


def read_measure(data: Any) -> tuple[list[dict], list[str]]:
    """bench_measure.py: {"loop": {..., "rounds"}, "urllib3": {..., "rounds", "cpu_rounds"}}."""
    rows: list[dict] = []
    notes: list[str] = []
    lp, u3 = data.get("loop", {}), data.get("urllib3", {})
    if lp:
        case, rr = "no-op callable, ns/call", lp.get("rounds") or {}
        rows += [
            _row(case, "Python for + perf_counter_ns", "loop", "ns",
                 rr.get("python") or [lp["python_loop_ns_per_call"]]),
            _row(case, "measure() C loop", "loop", "ns", rr.get("c") or [lp["c_loop_ns_per_call"]]),
            _row(case, "measure() C loop + alloc/GC", "loop", "ns",
                 rr.get("c_accounting") or [lp["c_loop_accounting_ns_per_call"]]),
        ]
    if u3:
        case, rr = "urllib3 GET vs embedded server, ns/call", u3.get("rounds") or {}
        rows += [
            _row(case, "accounting off", "wall", "ns", rr.get("off") or [u3["get_off_ns_per_call"]]),
            _row(case, "alloc+GC accounting", "wall", "ns",
                 rr.get("on") or [u3["get_on_ns_per_call"]]),
            _row(case, "tracemalloc", "wall", "ns",
                 rr.get("tracemalloc") or [u3["get_tracemalloc_ns_per_call"]]),
            # the script's slow-downs: medians of the per-round ratios
            _row(case, "alloc+GC accounting", "slow-down", "×", [u3["factor_accounting"]]),
            _row(case, "tracemalloc", "slow-down", "×", [u3["factor_tracemalloc"]]),
        ]
        if "factor_accounting_estimated" in u3:
            rows.append(_row(case, "alloc+GC accounting (hook cost estimate)", "slow-down", "×",
                             [u3["factor_accounting_estimated"]]))
        for key, name in (("off", "accounting off"), ("on", "alloc+GC accounting"),
                          ("tracemalloc", "tracemalloc")):
            if (u3.get("cpu_rounds") or {}).get(key):
                rows.append(_row(case, name, "thread CPU", "ns", u3["cpu_rounds"][key]))
        if not rr:
            notes.append("The script reports medians of its interleaved rounds only "
                         "(no min–max).")
    return rows, notes


def read_engine_mem(data: Any) -> tuple[list[dict], list[str]]:
    """bench_engine_mem.py: allocations of a short and a long run, and RSS after runs."""
    rows: list[dict] = []
    notes: list[str] = []
    for scheme in ("http", "https"):
        al = data.get(f"allocs_{scheme}")
        if al:
            case = f"bench() heap allocations, {scheme.upper()}"
            for which in ("short", "long"):
                rows.append(_row(case, f"{which} run", "requests", "", [al[which]["n"]]))
                rows.append(_row(case, f"{which} run", "mallocs", "", [al[which]["allocs"]]))
            rows.append(_row(case, "per extra request", "mallocs", "", [al["allocs_per_request"]]))
    rs = data.get("rss")
    if rs:
        case = "RSS after a run"
        for which, label in (("small", "short run"), ("large", "long run")):
            rows.append(_row(case, label, "requests", "", [rs[which]["n"]]))
            rows.append(_row(case, label, "peak RSS", "MB", [rs[which]["peak_rss"] / 1e6]))
        rows.append(_row(case, "growth", "peak RSS", "MB", [rs["peak_rss_growth"] / 1e6]))
        if rs["large"]["n"] < 10_000_000:
            notes.append(f"Short RSS run: {rs['large']['n']:,} requests in the long run; the "
                         "goal is stated for 10^5 vs 10^7.")
    return rows, notes


_PARSE_LINE = re.compile(r"^\s+C\s+(.+?)\s+([\d.]+) ns/op")


def read_parse(text: str) -> tuple[list[dict], list[str]]:
    """bench_parse.py prints "  C  name  12.3 ns/op" lines."""
    rows = []
    for line in text.splitlines():
        m = _PARSE_LINE.match(line)
        if m:
            rows.append(_row("parse a ~150 B response head (C)", m.group(1), "time", "ns",
                             [float(m.group(2))]))
    return rows, []


def read_syscalls(data: Any) -> tuple[list[dict], list[str]]:
    rows = []
    for scheme in ("http", "https"):
        sec = data.get(scheme)
        if not sec:
            continue
        case = f"nginx {scheme.upper()} -t1 -c16, syscalls/request"
        for tool in ("httpbench", "wrk"):
            p = sec["per_request"].get(tool, {})
            rows.append(_row(case, tool, "total", "", [p.get("total", float("nan"))]))
            top = sorted(((v, k) for k, v in p.items() if k != "total" and v >= 0.05),
                         reverse=True)[:6]
            rows += [_row(case, tool, k, "", [v]) for v, k in top]
    return rows, list(data.get("notes", []))


def read_standard(data: Any) -> tuple[list[dict], list[str]]:
    """The common form: {"rows": [{case, contender, metric, unit, values}], "notes": [...]}."""
    return list(data["rows"]), list(data.get("notes", []))


READERS: dict[str, Callable[[Any], tuple[list[dict], list[str]]]] = {
    "loadgen": read_loadgen, "server": read_server, "client": read_client,
    "measure": read_measure, "engine_mem": read_engine_mem, "parse": read_parse,
    "syscalls": read_syscalls,
}


# ---------------------------------------------------------------------------
# analysis: rows + goals.py -> medians, ratios, verdicts (the same for every benchmark)


def make_rows(raw: list[dict], ours: str) -> list[Row]:
    rows = []
    for r in raw:
        s = summarize(r["values"])
        rows.append(Row(r["case"], r["contender"], r["metric"], r.get("unit", ""), s["median"],
                        s["min"], s["max"], s["n"], s["values"]))
    if ours:
        by = {(r.case, r.contender, r.metric): r for r in rows}
        for r in rows:
            if fnmatch.fnmatchcase(r.contender, ours):
                for (case, peer, metric), p in by.items():
                    if (case, metric) == (r.case, r.metric) and not fnmatch.fnmatchcase(peer, ours):
                        r.ratios[peer] = _ratio(r.median, p.median)
    return rows


def _per_round(a: list[float], b: list[float]) -> str:
    """'per-round ratios a–b (n rounds)' from values paired by round ('' for one round)."""
    rs = [x / y for x, y in zip(a, b, strict=False) if y]
    if len(rs) < 2:
        return ""
    return f"per-round ratios {min(rs):.2f}–{max(rs):.2f} ({len(rs)} rounds)"


def _fill(detail: str, case: str, by: dict[tuple[str, str, str], Row]) -> str:
    def sub(m: re.Match[str]) -> str:
        row = by.get((case, m.group(1), m.group(2)))
        return _fmt(row.median) if row else "?"
    return re.sub(r"\{([^{}|]+)\|([^{}]+)\}", sub, detail)


def check_goal(g: Goal, case: str, by: dict[tuple[str, str, str], Row]) -> list[dict[str, Any]]:
    """The goal's verdict in ``case`` ([] when the case lacks its figures)."""
    out = []
    if fnmatch.fnmatchcase(case, g.case) and (case, g.ours, g.metric) in by:
        ours = by[(case, g.ours, g.metric)]
        parts = [_fill(g.detail, case, by)] if g.detail else []
        peer_name = ""
        if g.peer:
            peers = [r for (c, n, m), r in by.items()
                     if c == case and m == g.metric and fnmatch.fnmatchcase(n, g.peer)]
            if not peers:
                return []
            if len(peers) > 1:  # the harder reference: the peer spending least CPU/request
                def cpu(r: Row, case: str = case) -> float:
                    # CPU/request, else the goal's own metric (CPU/event, CPU/msg...)
                    c = by.get((case, r.contender, "CPU/req")) or r
                    return c.median if c else math.inf
                peers.sort(key=cpu)
                parts.append(f"vs {peers[0].contender}, the cheapest of {g.peer}")
            peer = peers[0]
            peer_name = peer.contender
            measured = _ratio(ours.median, peer.median)
            parts.append(_per_round(ours.values, peer.values))
            floor = by.get((case, g.floor, g.metric)) if g.floor else None
            if floor is not None:
                parts.append(f"floor {_ratio(floor.median, peer.median):.2f}× {peer_name}, "
                             f"{g.ours} {_ratio(ours.median, floor.median):.2f}× floor")
        else:
            measured = ours.median
        label = g.goal.format(case=case, peer=peer_name or g.peer)
        passed = None
        if not math.isnan(measured):
            m, t = measured, g.target
            passed = {"<=": m <= t, ">=": m >= t, "<": m < t, ">": m > t, "==": m == t}[g.op]
        out.append({"area": g.area, "goal": label, "measured": measured, "op": g.op,
                    "target": g.target, "detail": "; ".join(p for p in parts if p),
                    "primary": g.primary, "unit": g.unit, "passed": passed})
    return out


def analyze(b: Benchmark, data: Any) -> dict[str, Any]:
    """rows, goals and notes of one benchmark's output (a JSON-ready dict)."""
    raw, notes = (READERS.get(b.name) or read_standard)(data)
    rows = make_rows(raw, b.ours)
    by = {(r.case, r.contender, r.metric): r for r in rows}
    goals = [v for case in dict.fromkeys(r.case for r in rows)
             for g in GOALS if g.bench == b.name for v in check_goal(g, case, by)]
    present = {r.contender for r in rows}
    notes = [text for need, text in b.notes if not need or need in present] + notes
    return {"rows": [dataclasses.asdict(r) for r in rows], "goals": goals, "notes": notes}


# ---------------------------------------------------------------------------
# built in: syscalls per request (strace -f -c), httpbench vs wrk on nginx

_HB_STRACE = (
    "import sys, httpbench\n"
    "ca = sys.argv[3] if len(sys.argv) > 3 else None\n"
    "r = httpbench.bench(sys.argv[1], n=int(sys.argv[2]), concurrency=16, threads=1,"
    " ca_file=ca)\n"
    "print('ok', r.successes, 'errors', r.errors)\n"
)


def bench_syscalls(mode: str) -> dict[str, Any]:
    """Syscalls per request of each generator: the difference of a long and a short
    run under ``strace -f -c`` divided by the extra requests (start-up cancels out)."""
    short_d, long_d = (1, 3) if mode == "smoke" else (1, 4)
    short_n, long_n = (2000, 6000) if mode == "smoke" else (5000, 25000)
    out: dict[str, Any] = {"server": "nginx", "concurrency": 16, "threads": 1}
    with Nginx(tls=True) as ng:
        out["nginx_config"] = ng.config
        for scheme, url, ca in (("http", ng.url + "/150b", None),
                                ("https", ng.https_url + "/150b", ng.ca_file)):
            res: dict[str, Any] = {}
            runs = []
            for d in (short_d, long_d):
                text, c = strace_counts(["wrk", "-t1", "-c16", f"-d{d}s", url])
                runs.append((parse_wrk(text)["requests"], c))
            res["wrk"] = runs
            runs = []
            for n in (short_n, long_n):
                argv = [sys.executable, "-c", _HB_STRACE, url, str(n)] + ([ca] if ca else [])
                text, c = strace_counts(argv, timeout=300)
                m = re.search(r"ok (\d+) errors (\d+)", text)
                if not m or int(m.group(2)):
                    raise RuntimeError(f"httpbench run under strace failed: {text[-2000:]}")
                runs.append((int(m.group(1)), c))
            res["httpbench"] = runs
            per: dict[str, dict[str, float]] = {}
            for tool, ((r0, c0), (r1, c1)) in res.items():
                extra = r1 - r0
                names = set(c0) | set(c1)
                if extra >= 0.3 * r1:
                    per[tool] = {k: (c1.get(k, 0) - c0.get(k, 0)) / extra for k in names}
                else:  # the runs' lengths came out too close: the long run's average
                    per[tool] = {k: c1.get(k, 0) / r1 for k in names}
                    out.setdefault("notes", []).append(
                        f"{scheme} {tool}: runs of {r0} and {r1} requests; long run's average")
            out[scheme] = {"runs": {t: [{"requests": r, "calls": c} for r, c in v]
                                    for t, v in res.items()}, "per_request": per}
    return out



BUILTINS: dict[str, Callable[[str], Any]] = {"syscalls": bench_syscalls}


def _children_cpu() -> float:
    """CPU seconds of this process and its waited-for descendants (the suite's own)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


def _stream(argv: list[str], timeout: float) -> tuple[int | None, str, str]:
    """Run argv, echoing its output live (indented) while capturing it.
    (exit status or None on timeout, stdout, stderr)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=os.path.dirname(HERE), bufsize=1)
    bufs: dict[str, list[str]] = {"out": [], "err": []}

    def pump(stream: Any, key: str) -> None:
        for line in stream:
            bufs[key].append(line)
            print("    " + line.rstrip(), flush=True)

    readers = [threading.Thread(target=pump, args=(p.stdout, "out"), daemon=True),
               threading.Thread(target=pump, args=(p.stderr, "err"), daemon=True)]
    for t in readers:
        t.start()
    try:
        rc: int | None = p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = None
    for t in readers:
        t.join(5)
    return rc, "".join(bufs["out"]), "".join(bufs["err"])


# ---------------------------------------------------------------------------
# running


def _run_builtin(b: Benchmark, mode: str, out: dict[str, Any]) -> dict[str, Any]:
    out["script"] = "benchmarks/run.py"
    out["command"] = f"python benchmarks/run.py --only {b.name}" + (
        f" --{mode}" if mode != "full" else "")
    print(f"\n=== {b.name}: {b.script}", flush=True)
    c0 = _children_cpu()
    t0 = time.monotonic()
    try:
        with SystemCpu() as sc:
            data = BUILTINS[b.name](mode)
        an = analyze(b, data)
    except Exception as e:  # noqa: BLE001 - report it, run the other benchmarks
        out["error"] = f"{type(e).__name__}: {e}"
        print(f"!!! {b.name} failed: {out['error']}", flush=True)
        return out
    own = _children_cpu() - c0
    out["seconds"] = time.monotonic() - t0
    out["machine_busy_cores"] = sc.busy_seconds / sc.wall if sc.wall else None
    out["other_load_cores"] = max(0.0, (sc.busy_seconds - own) / sc.wall) if sc.wall else None
    out["data"] = data
    out.update(an)
    return out


def run_bench(b: Benchmark, mode: str, tmp: str) -> dict[str, Any]:
    """Run one script; its raw data, analysis, timing and the machine's other load."""
    out: dict[str, Any] = {"name": b.name, "script": f"benchmarks/{b.script}"}
    if b.builtin:
        return _run_builtin(b, mode, out)
    path = os.path.join(HERE, b.script)
    if not os.path.exists(path):
        out["error"] = f"benchmarks/{b.script} does not exist"
        return out
    args = {"full": b.full, "quick": b.quick, "smoke": b.smoke}[mode]
    argv = [sys.executable, path, *args]
    jpath = os.path.join(tmp, f"{b.name}.json")
    if b.json_out:
        argv += ["--json", jpath]
    out["command"] = " ".join(["python", f"benchmarks/{b.script}", *argv[2:]]).replace(
        jpath, "OUT.json")
    print(f"\n=== {b.name}: {out['command']}", flush=True)
    c0 = _children_cpu()
    t0 = time.monotonic()
    with SystemCpu() as sc:
        rc, stdout, stderr = _stream(argv, b.timeout)
    if rc is None:
        out["error"] = f"timed out after {b.timeout:.0f} s"
        out["stdout"], out["stderr"] = stdout[-20000:], stderr[-5000:]
        return out
    own = _children_cpu() - c0
    out["seconds"] = time.monotonic() - t0
    out["machine_busy_cores"] = sc.busy_seconds / sc.wall if sc.wall else None
    # CPU of everything else on the machine while this benchmark ran (cores).
    out["other_load_cores"] = max(0.0, (sc.busy_seconds - own) / sc.wall) if sc.wall else None
    out["stdout"] = stdout[-20000:]
    out["stderr"] = stderr[-5000:]
    if rc != 0:
        out["error"] = f"exit status {rc}: {stderr.strip()[-2000:]}"
        print(f"!!! {b.name} failed: {out['error']}", flush=True)
        return out
    try:
        if b.json_out:
            with open(jpath) as f:
                data = json.load(f)
        else:
            data = stdout
        out["data"] = data
        out.update(analyze(b, data))
    except (OSError, ValueError, KeyError, TypeError) as e:
        out["error"] = f"could not read its results: {type(e).__name__}: {e}"
        print(f"!!! {b.name}: {out['error']}", flush=True)
    return out


# ---------------------------------------------------------------------------
# report


def _fmt(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    a = abs(v)
    if float(v).is_integer():
        return f"{int(v):,}"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 0.01:
        return f"{v:.2f}"
    return f"{v:.2g}"


def _verdict(p: bool | None) -> str:
    return {True: "PASS", False: "MISS", None: "no data"}[p]


def _last_line(text: str) -> str:
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return (lines[-1] if lines else "?")[:200].replace("|", "/")


def goal_table(results: list[dict[str, Any]], primary_only: bool = False) -> list[str]:
    lines = ["| area | goal | measured | target | result | detail |",
             "|---|---|---:|---:|:---:|---|"]
    for r in results:
        for g in r.get("goals", []):
            if primary_only and not g["primary"]:
                continue
            m, unit = g["measured"], g["unit"]
            ms = _fmt(m) + unit if m is not None else "–"
            flag = "" if g["primary"] else " †"
            lines.append(f"| {g['area']} | {g['goal']}{flag} | {ms} | {g['op']} {_fmt(g['target'])}"
                         f"{unit} | {_verdict(g['passed'])} | {g['detail']} |")
        if "error" in r:
            lines.append(f"| {r['name']} | (benchmark did not run) | – | – | no data | "
                         f"{_last_line(r['error'])} |")
    return lines


def _cell(row: dict[str, Any]) -> str:
    unit = f" {row['unit']}" if row["unit"] and row["unit"] not in ("×",) else ""
    text = f"**{_fmt(row['median'])}**{unit}" if row["ratios"] else f"{_fmt(row['median'])}{unit}"
    if row["n"] > 1 or row["min"] != row["max"]:
        text += f" ({_fmt(row['min'])}–{_fmt(row['max'])})"
    if row["ratios"]:
        text += "; " + ", ".join(f"{_fmt(v)}× {k}" for k, v in row["ratios"].items())
    return text


def case_tables(rows: list[dict[str, Any]]) -> list[str]:
    """One small table per case: a row per contender, a column per metric."""
    cases: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    metrics: dict[str, list[str]] = {}
    for row in rows:
        cases.setdefault(row["case"], {}).setdefault(row["contender"], {})[row["metric"]] = row
        ms = metrics.setdefault(row["case"], [])
        if row["metric"] not in ms:
            ms.append(row["metric"])
    L: list[str] = []
    for case, contenders in cases.items():
        ms = metrics[case]
        n = max(x["n"] for c in contenders.values() for x in c.values())
        L += [f"**{case}** (median{' (min–max)' if n > 1 else ''} of {n}; ratio = ours ÷ peer)",
              "", "| contender | " + " | ".join(ms) + " |", "|---|" + "---:|" * len(ms)]
        for name, by_metric in contenders.items():
            cells = [_cell(by_metric[m]) if m in by_metric else "" for m in ms]
            L.append(f"| {name} | " + " | ".join(cells) + " |")
        L.append("")
    return L


def _machine(meta: dict[str, Any]) -> dict[str, Any]:
    """A results document's metadata in system_metadata()'s keys (older documents
    said cpu_count, openssl_python and the bare kernel release)."""
    m = dict(meta)
    if "cpu_count" in m:
        m.setdefault("cpus", m.pop("cpu_count"))
    if "openssl_python" in m:
        m.setdefault("openssl", m.pop("openssl_python"))
    if " " not in str(m.get("kernel", " ")):
        m["kernel"] = f"Linux {m['kernel']}"
    return m


def _render_header(doc: dict[str, Any]) -> list[str]:
    meta = _machine(doc["metadata"])
    L = [f"Command: `{doc['command']}` — {doc['seconds'] / 60:.1f} min, "
         f"git {meta.get('git_commit')}, httpbench {meta.get('httpbench')}.",
         "",
         f"Machine: {meta['cpu_model']} × {meta['cpus']} cores, {meta['kernel']}, "
         f"Python {meta['python']}, {meta['openssl']}; load average at start "
         f"{', '.join(f'{x:.2f}' for x in meta['loadavg'] or [])}.",
         "",
         "Peers: " + "; ".join(f"{k}: {v or 'MISSING'}" for k, v in meta["peers"].items()) + ".",
         ""]
    rerun = [f"{r['name']} ({r['date']})" for r in doc["benchmarks"] if "date" in r]
    if rerun:
        L += ["Re-run since with `python benchmarks/run.py --only NAMES --into` (each section "
              "below names its own command, date and load): " + ", ".join(rerun) + ".", ""]
    busy = [(r["name"], r.get("other_load_cores")) for r in doc["benchmarks"]
            if r.get("other_load_cores") is not None]
    if busy:
        L += ["Other load while each benchmark ran (CPU cores used by processes outside the "
              f"suite, of {meta['cpus']}): "
              + ", ".join(f"{n} {v:.2f}" for n, v in busy) + "."
              + (" **The machine was busy: ratios are side by side in the same conditions, "
                 "absolute figures are lower than on an idle machine.**"
                 if any(v > 0.3 for _, v in busy) else ""), ""]
    return L


def _render_body(doc: dict[str, Any], level: str = "##") -> list[str]:
    L = [f"{level} Goals", "", *goal_table(doc["benchmarks"]), "",
         "† informational, not one of the project's goals. Ratios are ours ÷ peer's, computed "
         "from the medians.", ""]
    for r in doc["benchmarks"]:
        L += [f"{level} {r['name']}", "", f"`{r.get('command', r['script'])}`"
              + (f" — {r['seconds']:.0f} s" if "seconds" in r else "")
              + (f", run on {r['date']}" if "date" in r else ""), ""]
        if "error" in r:
            L += [f"**Did not run:** {r['error']}", ""]
            continue
        L += case_tables(r["rows"])
        L.append("")
        L += [f"* {n}" for n in r.get("notes", [])]
        L.append("")
    return L


def render_md(doc: dict[str, Any]) -> str:
    """benchmarks/results/<date>.md."""
    mode = "" if doc["mode"] == "full" else f" ({doc['mode']})"
    return "\n".join([f"# httpbench performance suite — {doc['date']}{mode}", "",
                      *_render_header(doc), *_render_body(doc)])


def render_performance(doc: dict[str, Any], results_path: str) -> str:
    """docs/performance.md: the goals and every table of one run, generated."""
    rel = os.path.relpath(results_path, os.path.dirname(PERFORMANCE_MD))
    L = ["# Performance",
         "",
         "<!-- Generated by benchmarks/run.py; edit benchmarks/goals.py or run.py, not this "
         "file. -->",
         "",
         "Every benchmark runs its contenders side by side, interleaved A B A B ..., on the "
         "same machine in the same minutes, and reports medians with min–max over the rounds "
         "and the ratio of ours to every peer. A *floor* contender (a C program doing only the "
         "unavoidable syscalls) shows how far a figure is from what the machine allows. What "
         "each figure means is in [metrics.md](metrics.md), how it is measured in "
         "[design.md](design.md), and what was tried in [decisions.md](decisions.md).",
         "",
         "    python benchmarks/run.py                  # full suite (~15-20 min on 2 cores)",
         "    python benchmarks/run.py --quick          # short runs (~5 min)",
         "    python benchmarks/run.py --only loadgen,server   # see --list",
         "    python benchmarks/run.py --render benchmarks/results/DATE.json  # this page, no run",
         "",
         "Peers: `apt-get install -y wrk nginx-light nghttp2-client curl` and `pip install "
         "pycurl` (the suite names any that is missing). nginx is started by the scripts "
         "themselves (1 worker, `access_log off`, a temporary config on 127.0.0.1). Goals are "
         "rows of `benchmarks/goals.py`; adding a benchmark is a script plus rows there.",
         "",
         f"## Latest run: {doc['date']}",
         "",
         f"Results: [{os.path.basename(results_path)}]({rel}) (every run's raw figures) and "
         f"[the same tables]({os.path.splitext(rel)[0]}.md).",
         "",
         *_render_header(doc),
         *_render_body(doc, "###")]
    return "\n".join(L)


def latest_results(directory: str = RESULTS) -> str | None:
    """The newest full-suite results JSON (a quick one if there is no full one)."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
    except OSError:
        return None
    full = [n for n in names if re.fullmatch(r"\d{4}-\d{2}-\d{2}\.json", n)]
    pick = full or [n for n in names if "-quick" in n and "+" not in n]
    return os.path.join(directory, pick[-1]) if pick else None


def reanalyze(doc: dict[str, Any]) -> dict[str, Any]:
    """Rows, goals and notes of a saved run recomputed from its raw output with the current
    goals.py (a benchmark whose raw output was not kept keeps its saved analysis)."""
    by_name = {b.name: b for b in BENCHMARKS}
    out = dict(doc, benchmarks=[])
    for r in doc["benchmarks"]:
        r = dict(r)
        b = by_name.get(r["name"])
        raw = r.get("data", r.get("stdout") if b is not None and not b.json_out else None)
        if b is not None and raw is not None and "error" not in r:
            r.update(analyze(b, raw))
        out["benchmarks"].append(r)
    out["schema"] = SCHEMA
    return out


def render(path: str, performance: bool = True) -> None:
    """Write <results>.md (and docs/performance.md) from a saved results JSON; runs nothing."""
    with open(path) as f:
        doc = reanalyze(json.load(f))
    stem = os.path.splitext(path)[0]
    with open(stem + ".md", "w") as f:
        f.write(render_md(doc))
    print(f"wrote {stem}.md")
    if performance:
        os.makedirs(os.path.dirname(PERFORMANCE_MD), exist_ok=True)
        with open(PERFORMANCE_MD, "w") as f:
            f.write(render_performance(doc, path))
        print(f"wrote {os.path.relpath(PERFORMANCE_MD)}")


def merge_into(path: str, results: list[dict[str, Any]], date: str) -> None:
    """Replace (or append) these benchmarks' entries in the saved full run at ``path``,
    each stamped with the date it ran, and re-render that run's pages."""
    with open(path) as f:
        doc = json.load(f)
    for r in results:
        r["date"] = date
    new = {r["name"]: r for r in results}
    order = [b.name for b in BENCHMARKS]
    kept = [r for r in doc["benchmarks"] if r["name"] not in new]
    doc["benchmarks"] = sorted([*kept, *new.values()],
                               key=lambda r: order.index(r["name"]) if r["name"] in order
                               else len(order))
    doc.setdefault("reruns", []).append({"date": date, "benchmarks": sorted(new)})
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    latest = latest_results()
    render(path, performance=latest is not None
           and os.path.abspath(latest) == os.path.abspath(path))


def check_peers(benches: list[Benchmark]) -> list[str]:
    missing = sorted({p for b in benches for p in b.peers if find_peer(p) is None})
    return [f"missing peer {p}: install with `{install_hint(p)}`" for p in missing]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="short runs (~5 min)")
    ap.add_argument("--only", help="comma-separated benchmark names (see --list)")
    ap.add_argument("--smoke", action="store_true",
                    help="sub-second runs to check the plumbing (figures meaningless; no files)")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    ap.add_argument("--out", default=None,
                    help=f"results directory (default: {os.path.relpath(RESULTS)}; "
                         "--smoke writes only with --out)")
    ap.add_argument("--no-write", action="store_true", help="print only, write no files")
    ap.add_argument("--into", metavar="RESULTS.json",
                    help="with --only (full mode): put the new runs into a saved full run, "
                         "replacing those benchmarks' entries (each keeps its own date and "
                         "load), and re-render its pages")
    ap.add_argument("--render", metavar="RESULTS.json", nargs="?", const="latest",
                    help="run nothing: rewrite RESULTS.md and docs/performance.md from a saved "
                         "results file (default: the latest full run)")
    a = ap.parse_args(argv)
    if a.render:
        path = latest_results() if a.render == "latest" else a.render
        if path is None:
            ap.error("no results in benchmarks/results/ yet: run the suite first")
        render(path)
        return 0
    if a.list:
        for b in BENCHMARKS:
            print(f"{b.name:<11} benchmarks/{b.script} {' '.join(b.full)}")
        return 0
    benches = BENCHMARKS
    if a.only:
        names = [n.strip() for n in a.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in {b.name for b in BENCHMARKS}]
        if unknown:
            ap.error(f"unknown benchmark(s) {', '.join(unknown)}; "
                     f"known: {', '.join(b.name for b in BENCHMARKS)}")
        benches = [b for b in BENCHMARKS if b.name in names]
    missing = check_peers(benches)
    for m in missing:
        print(m, file=sys.stderr)
    if missing:
        print("the benchmarks needing them will report what they could not measure",
              file=sys.stderr)
    mode = "smoke" if a.smoke else "quick" if a.quick else "full"
    if a.into and (not a.only or mode != "full" or a.no_write):
        ap.error("--into needs --only and a full run (no --quick/--smoke/--no-write)")
    if a.into and not os.path.exists(a.into):
        ap.error(f"--into {a.into}: no such results file")
    if a.smoke and a.out is None:
        a.no_write = True
    a.out = a.out or RESULTS
    cmd = "python benchmarks/run.py" + (f" --{mode}" if mode != "full" else "") + (
        f" --only {a.only}" if a.only else "")
    t0 = time.monotonic()
    meta = machine_metadata()
    results = []
    with tempfile.TemporaryDirectory(prefix="hb-suite-") as tmp:
        for b in benches:
            results.append(run_bench(b, mode, tmp))
    date = time.strftime("%Y-%m-%d", time.gmtime())
    doc = {"schema": SCHEMA, "date": date, "mode": mode, "quick": mode != "full",
           "command": cmd, "seconds": time.monotonic() - t0, "metadata": meta,
           "loadavg_end": list(os.getloadavg()), "missing_peers": missing,
           "benchmarks": results}
    print("\n" + "\n".join(goal_table(results)))
    if a.into:
        merge_into(a.into, results, date)
        return 1 if any("error" in r for r in results) else 0
    if not a.no_write:
        os.makedirs(a.out, exist_ok=True)
        stem = os.path.join(a.out, date + (f"-{mode}" if mode != "full" else "")
                            + (f"-{a.only.replace(',', '+')}" if a.only else ""))
        with open(stem + ".json", "w") as f:
            json.dump(doc, f, indent=1, default=str)
        # the docs page shows complete full runs only
        render(stem + ".json", performance=mode == "full" and not a.only)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
