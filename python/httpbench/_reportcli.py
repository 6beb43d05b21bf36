"""The ``httpbench report`` and ``httpbench diff`` commands."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from . import _units as U
from ._baseline import diff
from ._hdrexport import export_hdr_log, export_histogram
from ._htmlreport import html_diff_fragment, html_fragment
from ._results import load
from ._resulttables import format_result
from ._rows import entries

__all__ = [
    "cli_main",
    "diff_main",
]


# --------------------------------------------------------------------------
# CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="httpbench report",
        description="Print saved httpbench results, compare them with a baseline, plot them.",
    )
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="results JSON file(s), or `httpbench compare --out` directories")
    p.add_argument("--format", choices=("text", "md", "json"), default="text")
    p.add_argument("--plot", metavar="DIR", help="write PNG and SVG figures into DIR")
    p.add_argument("--html", metavar="OUT_HTML",
                   help="write one self-contained HTML page (tables, figures, machine and run; "
                        "with --baseline the two runs side by side) to OUT_HTML")
    p.add_argument("--baseline", metavar="FILE",
                   help="compare FILE(s) against this baseline results file")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (0.05)")
    p.add_argument("--min-change", type=U.parse_percent, default=0.02,
                   help="ignore relative changes below this (default 2%%)")
    p.add_argument("--run-noise", type=U.parse_percent, default=0.08,
                   help="a timing must move more than two runs of one command do "
                        "(default 8%%)")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when a significant regression is found")
    p.add_argument("--all", action="store_true",
                   help="with --baseline: list every compared metric, not only the "
                        "significant changes")
    p.add_argument("--export-hdr", metavar="FILE",
                   help="write latency histograms for HdrHistogram tools: an interval "
                        "log with one interval per record, or for a .hgrm path the "
                        "percentile text of the first client/scenario (repeats merged)")
    return p


def cli_main(argv: Sequence[str]) -> int:
    """``httpbench report FILE... [--format text|md|json] [--plot DIR] [--baseline A.json]``."""
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    records = []
    for f in [*([args.baseline] if args.baseline else []), *args.files]:
        if os.path.isdir(f):  # a `httpbench compare --out` directory
            f = os.path.join(f, "results.json")
        try:
            records.append(load(f))
        except (OSError, ValueError) as exc:
            sys.stderr.write(f"httpbench report: {exc}\n")
            return 2
    rc = 0
    pages: list[str] = []  # the HTML of each report or diff, when --html
    if args.baseline:
        base, currents = records[0], records[1:]
        for path, cur in zip(args.files, currents, strict=True):
            cmp = diff(base, cur, alpha=args.alpha, min_change=args.min_change,
                       run_noise=args.run_noise)
            if args.html:
                pages.append(html_diff_fragment(base, cur, cmp, names=(args.baseline, path),
                                                prefix=f"d{len(pages)}-"))
            if len(currents) > 1 and args.format != "json":
                sys.stdout.write(f"{args.baseline} -> {path}\n\n")
            sys.stdout.write(cmp.format(args.format, full=args.all))
            if args.fail_on_regression and cmp.regressions:
                rc = 1
    else:
        for path, rec in zip(args.files, records, strict=True):
            if len(records) > 1 and args.format != "json":
                sys.stdout.write(f"# {path}\n\n")
            sys.stdout.write(format_result(rec, args.format))
            if args.html:
                pages.append(html_fragment(rec, prefix=f"r{len(pages)}-"))
    if args.html:
        from ._html import page

        try:
            with open(args.html, "w", encoding="utf-8") as f:
                f.write(page("httpbench " + ("diff" if args.baseline else "report"), pages))
        except OSError as exc:
            sys.stderr.write(f"httpbench report: cannot write {args.html}: {exc.strerror}\n")
            return 2
        sys.stderr.write(f"wrote {args.html}\n")
    if args.export_hdr:
        rec = records[-1]
        if args.export_hdr.endswith(".hgrm"):
            c, sc, _i, first = next(iter(entries(rec)))
            hists = [r.latency for cc, ss, _, r in entries(rec) if (cc, ss) == (c, sc)]
            merged = hists[0].copy()
            for h in hists[1:]:
                merged.merge(h)
            export_histogram(merged, args.export_hdr, fmt="hgrm")
            sys.stderr.write(f"wrote {args.export_hdr} (hgrm of {c}"
                             f"{'/' + sc if sc else ''}, {len(hists)} repeat(s) merged)\n")
        else:
            n = export_hdr_log(rec, args.export_hdr)
            sys.stderr.write(f"wrote {args.export_hdr} (interval log, {n} intervals)\n")
    if args.plot:
        try:
            from .plot import save_plots
        except ImportError as exc:
            sys.stderr.write(f"httpbench report: --plot needs matplotlib ({exc}); "
                             "pip install matplotlib\n")
            return 2
        written = []
        for rec in records[-1:] if not args.baseline else records:
            written += save_plots(rec, args.plot)
        sys.stderr.write(f"wrote {len(written)} files into {args.plot}\n")
    return rc


def diff_main(argv: Sequence[str]) -> int:
    """``httpbench diff BASELINE CURRENT``: what ``httpbench report CURRENT --baseline
    BASELINE`` prints (a significance-tested change per metric)."""
    p = argparse.ArgumentParser(
        prog="httpbench diff",
        description="Compare two saved results metric by metric, with a significance test "
                    "across repeats (same as httpbench report CURRENT --baseline BASELINE).")
    p.add_argument("baseline", metavar="BASELINE", help="baseline results file or directory")
    p.add_argument("current", metavar="CURRENT", help="current results file or directory")
    p.add_argument("--format", choices=("text", "md", "json"), default="text")
    p.add_argument("--alpha", default="0.05", help="significance level (0.05)")
    p.add_argument("--min-change", default="2%",
                   help="ignore relative changes below this (default 2%%)")
    p.add_argument("--run-noise", default="8%",
                   help="a timing must move more than two runs of one command do "
                        "(default 8%%)")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when a significant regression is found")
    p.add_argument("--all", action="store_true",
                   help="list every compared metric, not only the significant changes")
    p.add_argument("--html", metavar="OUT_HTML",
                   help="also write the two runs side by side as one self-contained HTML page")
    try:
        args = p.parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    return cli_main([args.current, "--baseline", args.baseline, "--format", args.format,
                     "--alpha", args.alpha, "--min-change", args.min_change,
                     "--run-noise", args.run_noise,
                     *(["--fail-on-regression"] if args.fail_on_regression else []),
                     *(["--all"] if args.all else []),
                     *(["--html", args.html] if args.html else [])])
