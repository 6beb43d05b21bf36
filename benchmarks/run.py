#!/usr/bin/env python3
"""The performance suite: every benchmark against its peers, in one command.

    python benchmarks/run.py              # full suite (~15-20 min on 2 cores)
    python benchmarks/run.py --quick      # short runs (~5 min), same tables
    python benchmarks/run.py --only loadgen,server
    python benchmarks/run.py --list

Each per-area script in benchmarks/ runs as a subprocess with ``--json`` (the
scripts interleave their contenders A B A B ... themselves); this script reads
the JSON, computes medians with min-max over the rounds and the ratio to each
peer, checks the goals of issue 10 (pass/miss per goal), and writes
``benchmarks/results/<date>.md`` and ``.json`` (``<date>-quick.*`` for
``--quick``) with machine metadata and how busy the machine was during each
benchmark (CPU used by anything other than the benchmark's own processes).

Peers: wrk, nginx, h2load, curl (Debian) and pycurl (PyPI); a missing one is
named with its install command before anything runs.
"""

from __future__ import annotations

import argparse
import dataclasses
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

RESULTS = os.path.join(HERE, "results")


# ---------------------------------------------------------------------------
# records


@dataclasses.dataclass
class Row:
    """One contender's figure in one case: median, min, max over the rounds."""

    case: str
    contender: str
    metric: str
    unit: str
    median: float
    min: float
    max: float
    n: int
    ratios: dict[str, float] = dataclasses.field(default_factory=dict)  # peer -> ours/peer


@dataclasses.dataclass
class Goal:
    """A goal check: ``measured <op> target``; ``passed`` None when not measured."""

    area: str
    goal: str
    measured: float | None
    op: str
    target: float
    detail: str = ""
    primary: bool = True  # an issue-10 goal (False: a per-area issue's or informational)
    unit: str = "×"  # of measured and target: "×" for ratios

    @property
    def passed(self) -> bool | None:
        if self.measured is None or (isinstance(self.measured, float) and
                                     math.isnan(self.measured)):
            return None
        m, t = self.measured, self.target
        return {"<=": m <= t, ">=": m >= t, "<": m < t, "==": m == t}[self.op]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["passed"] = self.passed
        return d


@dataclasses.dataclass
class Analysis:
    rows: list[Row] = dataclasses.field(default_factory=list)
    goals: list[Goal] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)


def _row(case: str, contender: str, metric: str, unit: str, values: list[float]) -> Row:
    s = summarize(values)
    return Row(case, contender, metric, unit, s["median"], s["min"], s["max"], s["n"])


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(b) else float("nan")


# ---------------------------------------------------------------------------
# analyzers: per-area JSON -> rows + goals


def _round_ratios(ours: list[dict], peer: list[dict], key: str) -> str:
    """'per-round ratios a–b (n rounds)' from runs paired by their "round" (else by order)."""
    if all("round" in x for x in ours + peer):
        by = {x["round"]: x[key] for x in peer}
        pairs = [(x[key], by[x["round"]]) for x in ours if x["round"] in by]
    else:
        pairs = [(a[key], b[key]) for a, b in zip(ours, peer, strict=False)]
    rs = [a / b for a, b in pairs if b]
    if len(rs) < 2:
        return f"{len(rs)} round"
    return f"per-round ratios {min(rs):.2f}–{max(rs):.2f} ({len(rs)} rounds)"


def analyze_loadgen(data: Any, quick: bool) -> Analysis:
    """bench_loadgen.py --json: a list of runs {target, scheme, conns, tool, round, rps, ...}."""
    an = Analysis()
    groups: dict[tuple[str, str, int], dict[str, list[dict]]] = {}
    for r in data:
        groups.setdefault((r["target"], r["scheme"], int(r["conns"])), {}).setdefault(
            r["tool"], []).append(r)
    for (target, scheme, conns), tools in groups.items():
        case = f"{target} {scheme.upper()} -t1 -c{conns}"
        med: dict[tuple[str, str], float] = {}
        for tool, runs in tools.items():
            for metric, key, unit in (("req/s", "rps", "req/s"),
                                      ("CPU/req", "cpu_us_per_req", "µs")):
                row = _row(case, tool, metric, unit, [x[key] for x in runs])
                med[(tool, key)] = row.median
                an.rows.append(row)
        for row in an.rows:
            if row.case != case or row.contender != "httpbench":
                continue
            key = "rps" if row.metric == "req/s" else "cpu_us_per_req"
            for peer in tools:
                if peer != "httpbench":
                    row.ratios[peer] = _ratio(row.median, med[(peer, key)])
        if "httpbench" in tools and "wrk" in tools:
            cpu_r = _ratio(med[("httpbench", "cpu_us_per_req")], med[("wrk", "cpu_us_per_req")])
            rps_r = _ratio(med[("httpbench", "rps")], med[("wrk", "rps")])
            primary = conns == 16
            detail = _round_ratios(tools["httpbench"], tools["wrk"], "cpu_us_per_req")
            if "floor" in tools:
                fl = med[("floor", "cpu_us_per_req")]
                detail += (f"; floor {_ratio(fl, med[('wrk', 'cpu_us_per_req')]):.2f}× wrk, "
                           f"httpbench {_ratio(med[('httpbench', 'cpu_us_per_req')], fl):.2f}× "
                           "floor")
            an.goals.append(Goal("load generator", f"CPU/request ≤ 0.8× wrk ({case})", cpu_r,
                                 "<=", 0.8, detail, primary))
            an.goals.append(Goal("load generator", f"requests/s ≥ wrk ({case})", rps_r, ">=",
                                 1.0, _round_ratios(tools["httpbench"], tools["wrk"], "rps"),
                                 primary))
            if "floor" in tools:
                an.goals.append(Goal(
                    "load generator", f"floor (send+recv only) CPU/request ≤ 0.8× wrk ({case})",
                    _ratio(med[("floor", "cpu_us_per_req")], med[("wrk", "cpu_us_per_req")]),
                    "<=", 0.8, "is the goal reachable at all? " +
                    _round_ratios(tools["floor"], tools["wrk"], "cpu_us_per_req"),
                    primary=False))
    an.notes.append("httpbench's CPU is its engine threads' own rusage (RUSAGE_THREAD); wrk's "
                    "and h2load's the whole process's (wait4). Checked: the httpbench process's "
                    "CPU over the run span is within ~2% of its engine threads' (the Python "
                    "start-up, ~0.27 s CPU, is outside the span). -c1 goals are informational "
                    "(issue 4 states the goals at -c16).")
    if any("floor" in tools for tools in groups.values()):
        an.notes.append("floor = benchmarks/floor_loadgen.c: one send() of a prebuilt request "
                        "and one recv() per request, counted against the known response length; "
                        "no parsing, timing or histograms. Its CPU/request is what the kernel's "
                        "loopback TCP path costs a client here, the least any generator can "
                        "spend; a goal below floor/wrk is out of reach on this machine.")
    return an


def analyze_server(data: Any, quick: bool) -> Analysis:
    """bench_server.py --json: {"runs": {"<server>/<bytes>": [{rps, cpu_us_per_req}]}}."""
    an = Analysis()
    by_size: dict[str, dict[str, list[dict]]] = {}
    for key, runs in data["runs"].items():
        name, size = key.rsplit("/", 1)
        by_size.setdefault(size, {})[name] = runs
    for size, servers in by_size.items():
        case = f"wrk -t1 -c16, {int(size):,} B"
        med: dict[tuple[str, str], float] = {}
        rows = []
        for name, runs in servers.items():
            for metric, key, unit in (("CPU/req", "cpu_us_per_req", "µs"), ("req/s", "rps",
                                                                             "req/s")):
                row = _row(case, name, metric, unit, [x[key] for x in runs])
                med[(name, key)] = row.median
                rows.append(row)
            if name == "embedded" and runs and "thread_cpu_us_per_req" in runs[0]:
                rows.append(_row(case, "embedded (worker threads)", "CPU/req", "µs",
                                 [x["thread_cpu_us_per_req"] for x in runs]))
        nginxes = [n for n in servers if n.startswith("nginx")]
        for row in rows:
            if row.contender == "embedded":
                key = "rps" if row.metric == "req/s" else "cpu_us_per_req"
                for ng in nginxes + (["floor"] if "floor" in servers else []):
                    row.ratios[ng] = _ratio(row.median, med[(ng, key)])
        an.rows += rows
        if "embedded" in servers and nginxes:
            ref = min(nginxes, key=lambda n: med[(n, "cpu_us_per_req")])
            cpu_r = _ratio(med[("embedded", "cpu_us_per_req")], med[(ref, "cpu_us_per_req")])
            rps_r = _ratio(med[("embedded", "rps")], med[(ref, "rps")])
            detail = f"vs the cheaper nginx: {ref}; " + _round_ratios(
                servers["embedded"], servers[ref], "cpu_us_per_req")
            if "floor" in servers:
                fl = med[("floor", "cpu_us_per_req")]
                detail += (f"; floor {_ratio(fl, med[(ref, 'cpu_us_per_req')]):.2f}× {ref}, "
                           f"embedded {_ratio(med[('embedded', 'cpu_us_per_req')], fl):.2f}× "
                           "floor")
            an.goals.append(Goal("embedded server", f"CPU/request ≤ 0.8× nginx ({size} B)",
                                 cpu_r, "<=", 0.8, detail))
            if "floor" in servers:
                an.goals.append(Goal(
                    "embedded server", f"floor (find blank line + write) CPU/request ≤ 0.8× "
                    f"nginx ({size} B)", _ratio(med[("floor", "cpu_us_per_req")],
                                                med[(ref, "cpu_us_per_req")]),
                    "<=", 0.8, f"is the goal reachable at all? vs {ref}; " +
                    _round_ratios(servers["floor"], servers[ref], "cpu_us_per_req"),
                    primary=False))
            an.goals.append(Goal("embedded server", f"requests/s ≥ nginx ({size} B, issue 3)",
                                 rps_r, ">=", 1.0, f"vs {ref}; " +
                                 _round_ratios(servers["embedded"], servers[ref], "rps"),
                                 primary=False))
    an.notes.append("Server CPU: utime+stime of the server process over the wrk run "
                    "(/proc/<pid>/stat), divided by the requests wrk completed; server on CPU 0, "
                    "wrk on CPU 1. nginx-static: open_file_cache + sendfile; nginx-return: "
                    "`return 200` from memory (12 KB stays a file).")
    if any("floor" in servers for servers in by_size.values()):
        an.notes.append("floor = benchmarks/floor_server.c: finds the blank line of each request "
                        "head and writes the same prebuilt response bytes, nothing else; its "
                        "CPU/request is the kernel's loopback cost for a server here, the least "
                        "any server can spend.")
    return an


def _client_section(an: Analysis, case: str, label: str, clients: dict[str, Any],
                    peers: tuple[str, ...]) -> None:
    rows = []
    for name, r in clients.items():
        # Per-round lists when the script gives them; else its total over the rounds.
        cpu = r.get("cpu_us_per_req_rounds") or [r["cpu_us_per_req"]]
        rps = r.get("req_per_s_rounds") or [r["req_per_s"]]
        rows.append(_row(case, name, "CPU/req", "µs", cpu))
        rows.append(_row(case, name, "req/s", "req/s", rps))
        for q in ("p50", "p99"):
            lat = r.get(f"latency_us_{q}_rounds") or (
                [r[f"latency_us_{q}"]] if f"latency_us_{q}" in r else None)
            if lat:
                rows.append(_row(case, name, f"latency {q}", "µs", lat))
    med = {(x.contender, x.metric): x.median for x in rows}
    for row in rows:
        if row.contender.startswith("native"):
            for p in peers:
                if (p, row.metric) in med:
                    row.ratios[p] = _ratio(row.median, med[(p, row.metric)])
    an.rows += rows
    if ("native", "CPU/req") in med:
        pyc = med.get(("pycurl", "CPU/req"), float("nan"))
        detail = "process CPU (server in another process)"
        fl = med.get(("floor", "CPU/req"))
        if fl:
            detail += (f"; floor {_ratio(fl, pyc):.2f}× pycurl, native "
                       f"{_ratio(med[('native', 'CPU/req')], fl):.2f}× floor")
        an.goals.append(Goal("native Client", f"CPU/request ≤ 0.5× pycurl ({label})",
                             _ratio(med[("native", "CPU/req")], pyc), "<=", 0.5, detail))
        if fl:
            an.goals.append(Goal(
                "native Client", f"floor (C send+recv only) CPU/request ≤ 0.5× pycurl ({label})",
                _ratio(fl, pyc), "<=", 0.5, "is the goal reachable at all? floor_loadgen -c1, "
                "interleaved with the clients", primary=False))


def analyze_client(data: Any, quick: bool) -> Analysis:
    """bench_client.py --json.

    Reads ``{"server", "n", "rounds", "get": {size: {client: {"cpu_us_per_req",
    "req_per_s"}}}, "download": {client: {"median_MB_per_s", "best_MB_per_s"}}}``
    and, when present, per-round lists ``cpu_us_per_req_rounds``,
    ``req_per_s_rounds``, latency ``latency_us_p50``/``latency_us_p99`` (or
    ``..._rounds``), ``"post": {label: {client: {...}}}`` (same fields; POST
    300 KB from a file) and ``MB_per_s_repeats`` for the download.
    """
    an = Analysis()
    peers = ("pycurl", "http.client", "urllib3")
    where = f"{data.get('server', '?')} server"
    for size, clients in data.get("get", {}).items():
        _client_section(an, f"sequential keep-alive GET {size} ({where})", f"GET {size}",
                        clients, peers)
    for label, clients in (data.get("post") or {}).items():
        _client_section(an, f"sequential POST {label} ({where})", f"POST {label}", clients,
                        peers)
    dl = data.get("download") or {}
    if dl:
        case = "30 MB download to disk"
        rows = []
        for name, r in dl.items():
            vals = r.get("MB_per_s_repeats") or [r["median_MB_per_s"]]
            row = _row(case, name, "MB/s", "MB/s", vals)
            if len(vals) == 1 and "best_MB_per_s" in r:
                row.max = r["best_MB_per_s"]  # the script gives median and best only
            rows.append(row)
        med = {x.contender: x.median for x in rows}
        for row in rows:
            if row.contender == "native":
                for p in med:
                    if p != "native":
                        row.ratios[p] = _ratio(row.median, med[p])
        an.rows += rows
        if "native" in med:
            an.goals.append(Goal("native Client", "30 MB download ≥ 1.2× http.client",
                                 _ratio(med["native"], med.get("http.client", float("nan"))),
                                 ">=", 1.2, "median MB/s of interleaved repeats"))
    first = next(iter(data.get("get", {}).values()), {})
    if first and "cpu_us_per_req_rounds" not in next(iter(first.values()), {}):
        an.notes.append(f"{data.get('n', '?')} GETs per client and size in "
                        f"{data.get('rounds', '?')} interleaved rounds; the script reports "
                        "totals over the rounds (one value, no min–max).")
    if dl and "MB_per_s_repeats" not in next(iter(dl.values())):
        an.notes.append("Download: the script reports median and best MB/s only (shown as "
                        "median and max; no min).")
    if any("floor" in c for c in data.get("get", {}).values()):
        an.notes.append("Client floor = benchmarks/floor_loadgen.c at one connection: one send() "
                        "and one recv() per request, nothing else (C, no Python). Its "
                        "CPU/request is what a sequential client's loopback round trip costs "
                        "here, wake-ups included; a goal below floor/pycurl is out of reach on "
                        "this machine.")
    if not data.get("post"):
        an.notes.append("Not measured by bench_client.py yet: POST 300 KB from a file.")
    return an


def analyze_measure(data: Any, quick: bool) -> Analysis:
    """bench_measure.py --json: {"loop": {...}, "urllib3": {...}}.

    Per-round lists are used when present: ``loop["rounds"] = {"python": [...],
    "c": [...], "c_accounting": [...]}`` and ``urllib3["rounds"] = {"off": [...],
    "on": [...], "tracemalloc": [...]}`` (ns per call).
    """
    an = Analysis()
    lp, u3 = data.get("loop", {}), data.get("urllib3", {})
    if lp:
        case = "no-op callable, ns/call"
        rr = lp.get("rounds") or {}
        py = _row(case, "Python for + perf_counter_ns", "loop", "ns",
                  rr.get("python") or [lp["python_loop_ns_per_call"]])
        c = _row(case, "measure() C loop", "loop", "ns",
                 rr.get("c") or [lp["c_loop_ns_per_call"]])
        ca = _row(case, "measure() C loop + alloc/GC", "loop", "ns",
                  rr.get("c_accounting") or [lp["c_loop_accounting_ns_per_call"]])
        c.ratios["Python loop"] = lp["ratio_c_vs_python"]
        ca.ratios["Python loop"] = lp["ratio_c_accounting_vs_python"]
        an.rows += [py, c, ca]
        an.goals.append(Goal("measure()", "loop overhead ≤ 0.5× Python perf_counter_ns loop",
                             lp["ratio_c_vs_python"], "<=", 0.5, "no-op callable"))
    if u3:
        case = "urllib3 GET vs embedded server, ns/call"
        rr = u3.get("rounds") or {}
        off = _row(case, "accounting off", "wall", "ns",
                   rr.get("off") or [u3["get_off_ns_per_call"]])
        on = _row(case, "alloc+GC accounting", "wall", "ns",
                  rr.get("on") or [u3["get_on_ns_per_call"]])
        tm = _row(case, "tracemalloc", "wall", "ns",
                  rr.get("tracemalloc") or [u3["get_tracemalloc_ns_per_call"]])
        on.ratios["off"] = u3["factor_accounting"]
        tm.ratios["off"] = u3["factor_tracemalloc"]
        an.rows += [off, on, tm]
        cr = u3.get("cpu_rounds") or {}
        if cr:
            for key, name, fkey in (("off", "accounting off", None),
                                    ("on", "alloc+GC accounting", "cpu_factor_accounting"),
                                    ("tracemalloc", "tracemalloc", "cpu_factor_tracemalloc")):
                if cr.get(key):
                    row = _row(case, name, "thread CPU", "ns", cr[key])
                    if fkey and fkey in u3:
                        row.ratios["off"] = u3[fkey]
                    an.rows.append(row)
        elif "cpu_factor_accounting" in u3:
            an.rows.append(_row(case, "alloc+GC accounting", "CPU factor", "×",
                                [u3["cpu_factor_accounting"]]))
            an.rows.append(_row(case, "tracemalloc", "CPU factor", "×",
                                [u3["cpu_factor_tracemalloc"]]))
        an.goals.append(Goal("measure()", "allocation accounting slow-down ≤ 1.10×",
                             u3["factor_accounting"], "<=", 1.10,
                             f"urllib3 GET, median of per-round ratios; tracemalloc in the "
                             f"same run: {u3['factor_tracemalloc']:.2f}×" +
                             (f"; estimated from the hook cost per allocation: "
                              f"{u3['factor_accounting_estimated']:.3f}×"
                              if "factor_accounting_estimated" in u3 else "")))
        if not rr:
            an.notes.append("The script reports medians of its interleaved rounds only "
                            "(no min–max).")
    return an


def analyze_engine_mem(data: Any, quick: bool) -> Analysis:
    """bench_engine_mem.py --json."""
    an = Analysis()
    for scheme in ("http", "https"):
        al = data.get(f"allocs_{scheme}")
        if not al:
            continue
        case = f"bench() heap allocations, {scheme.upper()}"
        for which in ("short", "long"):
            an.rows.append(_row(case, f"{al[which]['n']:,} requests", "mallocs", "",
                                [al[which]["allocs"]]))
        an.rows.append(_row(case, "per extra request", "mallocs", "",
                            [al["allocs_per_request"]]))
        if scheme == "http":
            an.goals.append(Goal("load generator", "0 heap allocations per request (HTTP)",
                                 al["allocs_per_request"], "==", 0.0,
                                 f"{al['short']['allocs']} mallocs in {al['short']['n']:,} "
                                 f"requests vs {al['long']['allocs']} in {al['long']['n']:,}", unit=""))
        else:
            an.goals.append(Goal("load generator", "heap allocations per request (HTTPS)",
                                 al["allocs_per_request"], "<=", 4.5,
                                 "includes OpenSSL's record-layer allocations", primary=False,
                                 unit=""))
    rs = data.get("rss")
    if rs:
        case = "RSS after a run"
        for which in ("small", "large"):
            r = rs[which]
            an.rows.append(_row(case, f"{r['n']:,} requests", "peak RSS", "MB",
                                [r["peak_rss"] / 1e6]))
        small, large = rs["small"]["n"], rs["large"]["n"]
        scope = f"{small:.0e} vs {large:.0e} requests".replace("e+0", "e")
        if quick or large < 10_000_000:
            scope += " (QUICK: goal is stated for 1e5 vs 1e7)"
        an.goals.append(Goal("load generator", "RSS growth < 1 MB from 10^5 to 10^7 requests",
                             rs["peak_rss_growth"] / 1e6, "<", 1.0, f"peak RSS, {scope}",
                                 unit=" MB"))
    return an


_PARSE_LINE = re.compile(r"^\s+(C|Py)\s+(.+?)\s+([\d.]+) ns/op")


def analyze_parse(text: str, quick: bool) -> Analysis:
    """bench_parse.py has no --json: parse its printed lines "  C  name  12.3 ns/op"."""
    an = Analysis()
    base = None
    for line in text.splitlines():
        m = _PARSE_LINE.match(line)
        if not m:
            continue
        level, name, ns = m.group(1), m.group(2), float(m.group(3))
        row = _row(f"parse a ~150 B response head ({level})", name, "time", "ns", [ns])
        if level == "Py":
            if base is None:
                base = ns
            elif base:
                row.ratios["httpbench"] = ns / base
        an.rows.append(row)
    an.notes.append("Best of the script's repeats (it prints no spread). No goal in issue 10.")
    return an


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


def analyze_syscalls(data: Any, quick: bool) -> Analysis:
    an = Analysis()
    for scheme in ("http", "https"):
        sec = data.get(scheme)
        if not sec:
            continue
        case = f"nginx {scheme.upper()} -t1 -c16, syscalls/request"
        per = sec["per_request"]
        wrk_tot = per.get("wrk", {}).get("total", float("nan"))
        for tool in ("httpbench", "wrk"):
            p = per.get(tool, {})
            row = _row(case, tool, "total", "", [p.get("total", float("nan"))])
            if tool == "httpbench":
                row.ratios["wrk"] = _ratio(row.median, wrk_tot)
            an.rows.append(row)
            top = sorted(((v, k) for k, v in p.items() if k != "total" and v >= 0.05),
                         reverse=True)[:6]
            for v, k in top:
                an.rows.append(_row(case, tool, k, "", [v]))
    an.notes.append("(calls in a long run − calls in a short run) ÷ extra requests, strace -f -c "
                    "(all threads; strace slows both tools alike, which changes epoll batching "
                    "a little). Diagnostic for the CPU/request goals; no goal of its own.")
    return an


# ---------------------------------------------------------------------------
# the benchmarks


@dataclasses.dataclass
class Bench:
    name: str
    script: str
    full: list[str]
    quick: list[str]
    smoke: list[str]
    analyze: Callable[[Any, bool], Analysis]
    peers: tuple[str, ...] = ()
    json_out: bool = True
    timeout: float = 1200.0
    func: Callable[[str], Any] | None = None  # built in: called with the mode, returns data


BENCHES = [
    Bench("loadgen", "bench_loadgen.py", ["--duration", "5", "--rounds", "3"],
          ["--duration", "2", "--rounds", "2"], ["--duration", "1", "--rounds", "1"],
          analyze_loadgen, ("wrk", "h2load", "nginx")),
    Bench("server", "bench_server.py", ["--duration", "10", "--rounds", "3"],
          ["--duration", "2", "--rounds", "2"], ["--duration", "1", "--rounds", "1"],
          analyze_server, ("wrk", "nginx")),
    Bench("client", "bench_client.py", ["-n", "20000", "--rounds", "5", "--dl-repeats", "9"],
          ["-n", "5000", "--rounds", "3", "--dl-repeats", "3"],
          ["-n", "300", "--rounds", "1", "--dl-repeats", "1", "--warmup", "10",
           "--floor-seconds", "0.1"], analyze_client,
          ("pycurl", "curl")),
    Bench("measure", "bench_measure.py", [],
          ["--rounds", "3", "--noop-n", "100000", "--get-n", "500"],
          ["--rounds", "1", "--noop-n", "10000", "--get-n", "50"], analyze_measure),
    Bench("engine_mem", "bench_engine_mem.py", [], ["--quick"],
          ["--quick", "--small", "2000", "--large", "10000", "--alloc-long", "5000"],
          analyze_engine_mem,
          timeout=2400.0),
    Bench("parse", "bench_parse.py", [], ["--iters", "50000", "--repeat", "3"], ["--iters", "2000", "--repeat", "1"], analyze_parse,
          json_out=False, timeout=600.0),
    Bench("syscalls", "(built in: strace -f -c)", [], [], [], analyze_syscalls,
          ("wrk", "nginx"), func=bench_syscalls),
]


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


def _run_builtin(b: Bench, mode: str, out: dict[str, Any]) -> dict[str, Any]:
    assert b.func is not None
    out["script"] = "benchmarks/run.py"
    out["command"] = f"python benchmarks/run.py --only {b.name}" + (
        f" --{mode}" if mode != "full" else "")
    print(f"\n=== {b.name}: {b.script}", flush=True)
    c0 = _children_cpu()
    t0 = time.monotonic()
    try:
        with SystemCpu() as sc:
            data = b.func(mode)
        an = b.analyze(data, mode != "full")
    except Exception as e:  # noqa: BLE001 - report it, run the other benchmarks
        out["error"] = f"{type(e).__name__}: {e}"
        print(f"!!! {b.name} failed: {out['error']}", flush=True)
        return out
    own = _children_cpu() - c0
    out["seconds"] = time.monotonic() - t0
    out["machine_busy_cores"] = sc.busy_seconds / sc.wall if sc.wall else None
    out["other_load_cores"] = max(0.0, (sc.busy_seconds - own) / sc.wall) if sc.wall else None
    out["data"] = data
    out["rows"] = [dataclasses.asdict(r) for r in an.rows]
    out["goals"] = [g.to_dict() for g in an.goals]
    out["notes"] = an.notes
    for row in an.rows:
        print(f"  {row.case:<40} {row.contender:<10} {row.metric:<14} {_fmt(row.median):>8}",
              flush=True)
    return out


def run_bench(b: Bench, mode: str, tmp: str) -> dict[str, Any]:
    """Run one script; its raw data, analysis, timing and the machine's other load."""
    out: dict[str, Any] = {"name": b.name, "script": f"benchmarks/{b.script}"}
    if b.func is not None:
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
            out["data"] = data
        else:
            data = stdout
        an = b.analyze(data, mode != "full")
    except (OSError, ValueError, KeyError, TypeError) as e:
        out["error"] = f"could not read its results: {type(e).__name__}: {e}"
        print(f"!!! {b.name}: {out['error']}", flush=True)
        return out
    out["rows"] = [dataclasses.asdict(r) for r in an.rows]
    out["goals"] = [g.to_dict() for g in an.goals]
    out["notes"] = an.notes
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


def render_md(doc: dict[str, Any]) -> str:
    meta = doc["metadata"]
    L = [f"# httpbench performance suite — {doc['date']}{'' if doc['mode'] == 'full' else ' (' + doc['mode'] + ')'}",
         "",
         f"Command: `{doc['command']}` — {doc['seconds'] / 60:.1f} min, "
         f"git {meta.get('git_commit')}, httpbench {meta.get('httpbench')}.",
         "",
         f"Machine: {meta['cpu_model']} × {meta['cpu_count']} cores, Linux {meta['kernel']}, "
         f"Python {meta['python']}, {meta['openssl_python']}; load average at start "
         f"{', '.join(f'{x:.2f}' for x in meta['loadavg'] or [])}.",
         "",
         "Peers: " + "; ".join(f"{k}: {v or 'MISSING'}" for k, v in meta["peers"].items()) + ".",
         ""]
    busy = [(r["name"], r.get("other_load_cores")) for r in doc["benchmarks"]
            if r.get("other_load_cores") is not None]
    if busy:
        L += ["Other load while each benchmark ran (CPU cores used by processes outside the "
              "suite, of " f"{meta['cpu_count']}): "
              + ", ".join(f"{n} {v:.2f}" for n, v in busy) + "."
              + (" **The machine was busy: ratios are side by side in the same conditions, "
                 "absolute figures are lower than on an idle machine.**"
                 if any(v > 0.3 for _, v in busy) else ""), ""]
    L += ["## Goals (issue 10)", "", *goal_table(doc["benchmarks"]), "",
          "† not one of issue 10's goals: a per-area issue's goal or informational. Ratios are "
          "ours ÷ peer's, computed from the medians.", ""]
    for r in doc["benchmarks"]:
        L += [f"## {r['name']}", "", f"`{r.get('command', r['script'])}`"
              + (f" — {r['seconds']:.0f} s" if "seconds" in r else ""), ""]
        if "error" in r:
            L += [f"**Did not run:** {r['error']}", ""]
            continue
        L += case_tables(r["rows"])
        L.append("")
        for n in r.get("notes", []):
            L.append(f"* {n}")
        L.append("")
    return "\n".join(L)


README = os.path.join(os.path.dirname(HERE), "README.md")
MARK_START, MARK_END = "<!-- perf-summary:start -->", "<!-- perf-summary:end -->"


def latest_results(directory: str = RESULTS) -> str | None:
    """The newest full-suite results JSON (a quick one if there is no full one)."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
    except OSError:
        return None
    full = [n for n in names if re.fullmatch(r"\d{4}-\d{2}-\d{2}\.json", n)]
    pick = full or [n for n in names if "-quick" in n and "+" not in n]
    return os.path.join(directory, pick[-1]) if pick else None


def readme_summary(doc: dict[str, Any], path: str) -> str:
    """The README's summary block: issue-10 goals with the measured ratios."""
    meta = doc["metadata"]
    rel = os.path.relpath(os.path.splitext(path)[0] + ".md", os.path.dirname(HERE))
    busy = [r.get("other_load_cores") or 0.0 for r in doc["benchmarks"]]
    lines = [
        f"Latest run: {doc['date']}, `{doc['command']}` ({doc['seconds'] / 60:.0f} min), "
        f"{meta['cpu_model']} × {meta['cpu_count']}, Linux {meta['kernel']}, "
        f"Python {meta['python']}, git {meta.get('git_commit')}; other load on the machine "
        f"up to {max(busy, default=0):.1f} cores. Full tables (medians, min–max, every peer): "
        f"[{rel}]({rel}).",
        "",
        *goal_table(doc["benchmarks"]),
        "",
        "† not an issue-10 goal (a per-area issue's, or informational).",
    ]
    return "\n".join(lines)


def update_readme(results_path: str, readme: str = README) -> None:
    """Replace the block between the perf-summary markers in README.md (nothing else)."""
    with open(results_path) as f:
        doc = json.load(f)
    block = readme_summary(doc, results_path)
    with open(readme) as f:
        text = f.read()
    i, j = text.find(MARK_START), text.find(MARK_END)
    if i < 0 or j < i:
        raise SystemExit(f"{readme} has no {MARK_START} ... {MARK_END} block to update")
    text = text[: i + len(MARK_START)] + "\n" + block + "\n" + text[j:]
    with open(readme, "w") as f:
        f.write(text)
    print(f"updated the performance summary in {readme} from {results_path}")


def check_peers(benches: list[Bench]) -> list[str]:
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
    ap.add_argument("--update-readme", nargs="?", const="latest", metavar="RESULTS.json",
                    help="only rewrite README's performance summary from a results file "
                         "(default: the latest full run)")
    a = ap.parse_args(argv)
    if a.update_readme:
        path = latest_results() if a.update_readme == "latest" else a.update_readme
        if path is None:
            ap.error("no results in benchmarks/results/ yet: run the suite first")
        update_readme(path)
        return 0
    if a.list:
        for b in BENCHES:
            print(f"{b.name:<11} benchmarks/{b.script} {' '.join(b.full)}")
        return 0
    benches = BENCHES
    if a.only:
        names = [n.strip() for n in a.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in {b.name for b in BENCHES}]
        if unknown:
            ap.error(f"unknown benchmark(s) {', '.join(unknown)}; "
                     f"known: {', '.join(b.name for b in BENCHES)}")
        benches = [b for b in BENCHES if b.name in names]
    missing = check_peers(benches)
    for m in missing:
        print(m, file=sys.stderr)
    if missing:
        print("the benchmarks needing them will report what they could not measure",
              file=sys.stderr)
    mode = "smoke" if a.smoke else "quick" if a.quick else "full"
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
    doc = {"schema": 1, "date": date, "mode": mode, "quick": mode != "full", "command": cmd,
           "seconds": time.monotonic() - t0, "metadata": meta,
           "loadavg_end": list(os.getloadavg()), "missing_peers": missing,
           "benchmarks": results}
    md = render_md(doc)
    print("\n" + "\n".join(goal_table(results)))
    if not a.no_write:
        os.makedirs(a.out, exist_ok=True)
        stem = os.path.join(a.out, date + (f"-{mode}" if mode != "full" else "")
                            + (f"-{a.only.replace(',', '+')}" if a.only else ""))
        with open(stem + ".json", "w") as f:
            json.dump(doc, f, indent=1, default=str)
        with open(stem + ".md", "w") as f:
            f.write(md)
        print(f"\nwrote {stem}.md and {stem}.json")
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
