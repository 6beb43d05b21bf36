"""``httpbench history list|show|plot|check|export|prune``: read and maintain a history.

The store is ``--history PATH_OR_URL``, else ``$HTTPBENCH_HISTORY``. Exit codes:
0 fine, 1 ``check`` found a regression, 2 bad input (no store, a store that cannot
be read, a filter that matches no series, bad options).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import time
from typing import Any

from . import _units as U
from ._changepoints import DEFAULT_MAX_PVALUE, DEFAULT_WINDOW, DetectorUnavailable
from ._history import (
    DEFAULT_LAST,
    DEFAULT_MIN_AFTER,
    DEFAULT_MIN_BEFORE,
    ROW_COLUMNS,
    History,
    Series,
    short,
)
from ._historystore import ENV, HistoryError
from ._tables import render_table

__all__ = ["cli_main", "format_value"]


def format_value(metric: str, v: float | None) -> str:
    """A series value in the unit its metric name says."""
    if v is None:
        return "-"
    base = metric.split("@", 1)[0]
    if base.endswith("_ns") or base.startswith("cpu_ns") or base == "gc_pause_ns":
        return U.format_duration(v)
    if "bytes" in base:
        return U.format_bytes(v)
    if base in ("rps",) or base.endswith("_per_s"):
        return U.format_rate(v)
    return U.format_count(v, digits=4)


def _when(ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ns / 1e9)) if ns else "-"


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--subject", help="client name, test id or load-test label")
    p.add_argument("--scenario")
    p.add_argument("--metric", help="e.g. cpu_ns_per_request, instructions_per_request; "
                   "METRIC@speed for the speed-adjusted series")
    p.add_argument("--machine", help="machine fingerprint (see `history list`)")


def _detection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-pvalue", type=float, default=DEFAULT_MAX_PVALUE,
                   help=f"significance a change point needs (default {DEFAULT_MAX_PVALUE})")
    p.add_argument("--min-change", default="0%",
                   help="smallest relative change reported, e.g. 2%% (default 0%%)")
    p.add_argument("--last", type=int, default=DEFAULT_LAST,
                   help=f"newest runs of each series examined (default {DEFAULT_LAST})")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW,
                   help=f"runs a change is judged among (default {DEFAULT_WINDOW})")


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--history", metavar="PATH_OR_URL", default=None,
                        help=f"the store: a SQLite file or postgresql:// URL (default ${ENV})")
    ap = argparse.ArgumentParser(prog="httpbench history", parents=[common],
                                 description="Read and maintain a history of runs.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("list", parents=[common], help="the recorded runs")
    p.add_argument("--last", type=int, default=None, help="only the newest N runs")
    p.add_argument("--branch")
    p.add_argument("--commit", help="commit hash or its prefix")
    p.add_argument("--source", choices=("compare", "bench", "pytest"))
    p.add_argument("--machine")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("show", parents=[common], help="series as tables, one row per run")
    _filters(p)
    p.add_argument("--last", type=int, default=None)
    p = sub.add_parser("plot", parents=[common], help="trend with CI bands and change points")
    _filters(p)
    p.add_argument("-o", "--output", required=True, help="PNG file to write")
    p.add_argument("--html", metavar="PATH", help="also write an HTML page with the plot")
    _detection(p)
    p = sub.add_parser("check", parents=[common],
                       help="change points of every series; exit 1 on a regression")
    _filters(p)
    _detection(p)
    p.add_argument("--min-after", type=int, default=DEFAULT_MIN_AFTER,
                   help="runs after a change before it counts as a regression "
                        f"(default {DEFAULT_MIN_AFTER}: one noisy run never does)")
    p.add_argument("--min-before", type=int, default=DEFAULT_MIN_BEFORE,
                   help=f"runs before a change it needs to count (default {DEFAULT_MIN_BEFORE})")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("export", parents=[common], help="every point as CSV or JSON")
    _filters(p)
    p.add_argument("--format", choices=("csv", "json"), default="csv")
    p.add_argument("-o", "--output", help="file to write (default: standard output)")
    p = sub.add_parser("prune", parents=[common], help="delete old runs")
    p.add_argument("--keep-last", type=int, help="keep only the newest N runs")
    p.add_argument("--older-than", metavar="DAYS", type=float,
                   help="delete runs recorded more than DAYS days ago")
    return ap


def _series_table(s: Series) -> str:
    rows = []
    for p in s.points:
        ci = (f"{format_value(s.metric, p.ci_low)} .. {format_value(s.metric, p.ci_high)}"
              if p.ci_low is not None and p.ci_high is not None else "-")
        speed = f"{p.speed_change * 100:+.1f} %" if p.speed_change is not None else "-"
        rows.append([str(p.run_id), p.where, p.branch or "-", _when(p.recorded_unix_ns),
                     format_value(s.metric, p.value), ci, str(p.samples or "-"), speed,
                     p.notes or ""])
    return render_table(["run", "commit", "branch", "recorded (UTC)", "value", "95% CI", "n",
                         "speed", "notes"], rows)


def _cmd_list(h: History, a: argparse.Namespace) -> int:
    runs = h.runs(last=a.last, source=a.source, branch=a.branch, commit=a.commit,
                  machine=a.machine)
    if a.json:
        sys.stdout.write(json.dumps(runs, indent=1, default=str) + "\n")
        return 0
    rows = [[str(r["id"]), _when(r["recorded_unix_ns"]), r["source"],
             short(r["commit_sha"]) + ("*" if r["dirty"] else ""), r["branch"] or "-",
             r["host"] or "-", r["machine"],
             f"{r['speed_ns']:.4g}" if r["speed_ns"] else "-", r["label"] or ""] for r in runs]
    sys.stdout.write(render_table(["run", "recorded (UTC)", "source", "commit", "branch", "host",
                                   "machine", "speed", "label"], rows) + "\n")
    machines = h.machines()
    for fp in sorted({r["machine"] for r in runs}):
        m = machines.get(fp, {})
        sys.stdout.write(f"machine {fp}: {m.get('cpu_model')}, {m.get('cores')} CPUs, "
                         f"{m.get('kernel')}, Python {m.get('python')}, {m.get('openssl')}\n")
    return 0


def _cmd_show(h: History, a: argparse.Namespace) -> int:
    found = h.series(a.subject, a.scenario, a.metric, a.machine, last=a.last)
    for s in found:
        sys.stdout.write(f"{s.name}\n{_series_table(s)}\n\n")
    return 0


def _check_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    return {"max_pvalue": a.max_pvalue, "min_change": U.parse_percent(a.min_change),
            "last": a.last, "window": a.window}


def _cmd_check(h: History, a: argparse.Namespace) -> int:
    rep = h.check(a.subject, a.scenario, a.metric, a.machine, min_after=a.min_after,
                  min_before=a.min_before, **_check_kwargs(a))
    if a.json:
        sys.stdout.write(json.dumps(rep.to_dict(), indent=1) + "\n")
    else:
        for f in rep.findings:
            sys.stdout.write(f"{f.series.name}: {f.describe()}\n")
        n = len(rep.regressions)
        sys.stdout.write(f"history {rep.store}: {rep.series_checked} series checked, "
                         f"{len(rep.findings)} change point(s), {n} regression(s)\n")
    return 1 if rep.regressions else 0


def _cmd_plot(h: History, a: argparse.Namespace) -> int:
    kw = _check_kwargs(a)
    kw.pop("window")
    h.plot(a.subject, a.scenario, a.metric, a.machine, path=a.output, **kw)
    sys.stdout.write(f"Wrote {a.output}\n")
    if a.html:
        from ._historyplot import html_page

        with open(a.html, "w", encoding="utf-8") as f:
            f.write(html_page(h.name, [a.output]))
        sys.stdout.write(f"Wrote {a.html}\n")
    return 0


def _cmd_export(h: History, a: argparse.Namespace) -> int:
    rows = h.rows(a.subject, a.scenario, a.metric, a.machine)
    if a.format == "json":
        text = json.dumps({"format": "httpbench-history-export", "version": 1,
                           "store": h.name, "points": rows}, indent=1) + "\n"
    else:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(ROW_COLUMNS), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        text = buf.getvalue()
    if a.output:
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def _cmd_prune(h: History, a: argparse.Namespace) -> int:
    if a.keep_last is None and a.older_than is None:
        raise ValueError("prune needs --keep-last N or --older-than DAYS")
    if a.keep_last is not None and a.keep_last < 0:
        raise ValueError("--keep-last must be >= 0")
    before = (time.time_ns() - int(a.older_than * 86400e9)) if a.older_than is not None else None
    n = h.store.prune(keep_last=a.keep_last, before_unix_ns=before)
    sys.stdout.write(f"history {h.name}: deleted {n} run(s)\n")
    return 0


_COMMANDS = {"list": _cmd_list, "show": _cmd_show, "plot": _cmd_plot, "check": _cmd_check,
             "export": _cmd_export, "prune": _cmd_prune}


def cli_main(argv: list[str]) -> int:
    """``httpbench history ...``; returns the exit code."""
    ap = _parser()
    try:
        a = ap.parse_args(argv)
    except SystemExit as exc:  # argparse: 2 on bad usage, 0 on --help
        return int(exc.code or 0)
    target = a.history or os.environ.get(ENV) or None
    try:
        with History(target) as h:
            return _COMMANDS[a.cmd](h, a)
    except (HistoryError, DetectorUnavailable, ValueError, OSError) as exc:
        sys.stderr.write(f"httpbench history: {exc}\n")
        return 2
