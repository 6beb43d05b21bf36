"""``httpbench compare``: put HTTP client libraries side by side (the main job).

``httpbench.compare()`` runs every requested client on every requested
scenario in isolated worker processes against the embedded server (see
``_runner``), and returns a :class:`~httpbench.ResultSet`. The CLI prints the
tables ``httpbench.report.format_tables`` renders (one per scenario, medians
over the repeats, then the anomaly notes) and writes ``results.json``,
``tables.txt`` and PNG plots to ``--out``.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import _machine, _versions
from ._adapters import ADAPTERS, DEFAULT_CLIENTS, adapter_status, is_custom
from ._cmptables import format_tables
from ._core import FeatureUnavailable
from ._deterministic import ToolMissing, require_tool
from ._features import require_h2_server, require_h3_server
from ._results import ResultSet
from ._rows import THIN_CALLS, THIN_REPEATS, is_thin  # noqa: F401  (public names here before)
from ._runner import Runner, RunOptions
from ._scenarios import QUICK_SCENARIOS, SCENARIOS, Scenario, resolve_scenarios
from ._specs import parse_spec, split_specs

__all__ = ["compare", "cli_main"]

QUICK_SCALE = 0.2
# odd, so the median is one of the measured rounds
QUICK_REPEAT = 3
DEFAULT_REPEAT = 3
# a timed round is taken in this many slices, in turn with the other rounds and
# clients: each round then samples the machine over the whole scenario
DEFAULT_SLICES = 8


def compare(
    clients: Sequence[str] | None = None,
    scenarios: Sequence[str | Scenario] | None = None,
    repeat: int | None = None,
    n: int | None = None,
    quick: bool = False,
    out: str | os.PathLike[str] | None = None,
    plots: bool = True,
    *,
    commands: dict[str, Sequence[str]] | None = None,
    native_allocs: bool | None = None,
    pin: bool = True,
    placement: str = "auto",
    timeout: float = 120.0,
    warmup: int = 3,
    zygote: bool = True,
    scale: float | None = None,
    progress: Callable[[str], None] | None = None,
    server_factory: Callable[[bool, int], Any] | None = None,
    baseline: str | None = None,
    min_requests: int = 10,
    reruns: int = 2,
    slices: int | None = None,
    baseline_file: str | os.PathLike[str] | None = None,
    pythons: Sequence[str] | None = None,
    deterministic: bool = False,
    deterministic_n: int = 200,
    history: str | os.PathLike[str] | None = None,
) -> ResultSet:
    """Compare HTTP clients on scenarios; returns the :class:`ResultSet`.

    ``clients``: adapter names (default: every installed one of
    ``DEFAULT_CLIENTS``; names in ``commands`` run that argv per request,
    placeholders ``{url}``, ``{out}``, ``{ca_file}``, ``{body_file}``);
    ``scenarios``: names, ``NAME:key=value,...`` specs or :class:`Scenario`
    objects (default: all built-in scenarios, or the quick set); ``repeat``:
    interleaved rounds per pair (default 3, also with ``quick``); ``n``:
    requests per round (default: each scenario's duration budget); ``quick``:
    fewer scenarios and shorter rounds (about a minute in all); ``out``: directory
    for ``results.json`` and, if ``plots``, PNG figures (None: write
    nothing). Keywords: ``native_allocs`` (preload the malloc counter; None:
    when available on Linux), ``pin`` (CPU pinning; False: ``placement="unpinned"``),
    ``placement`` (where server and client run, per scenario: ``"auto"`` puts
    sequential scenarios on one CPU when the machine's calibrated cross-CPU
    wake-up costs more than a same-CPU one, and concurrent ones on two;
    ``"same"``, ``"split"``, ``"unpinned"`` force one; recorded in
    ``metadata["placement"]`` with ``metadata["wakeup_ns"]``), ``timeout`` (seconds per
    worker step before it counts as hung), ``warmup`` (requests per worker
    before measuring), ``zygote`` (fork workers from a pre-imported process;
    False: a new interpreter per worker), ``scale`` (factor on round durations), ``progress``
    (callable receiving progress lines), ``server_factory`` (``(tls, threads)
    -> handle``; default ``httpbench._server.start_process``). Clients that are not installed are listed in
    ``result.skipped``; failed workers and anomalies in ``result.notes``.

    A client may be a spec with a version or source (``urllib3==1.26.20``,
    ``httpx[http2]==0.28.1``, ``requests@./checkout``): it runs in a cached
    environment of its own (made before any measurement; ``ValueError`` when
    it cannot be), its row is labelled with the version it imported, and each
    row gets deltas against ``baseline`` (a spec or label; default: the first).

    ``baseline_file``: a saved ``results.json`` of an earlier compare run;
    every row also gets deltas against the saved run's matching row (same
    label, else the same client) on the scenarios both runs have, flagged as
    not interleaved (``metadata["baseline_file"]``). ``ValueError`` before any
    measurement when the file cannot be read or shares no scenario.

    ``history``: also record the run (every cell, its CI, the commits of the working
    directory and of ``NAME@PATH`` clients, the machine) in a history: a SQLite file,
    created when missing, or a ``postgresql://`` URL (docs/history.md); the run's id
    is ``metadata["history_run"]``. ``HistoryError`` before any measurement when the
    store cannot be used.

    ``pythons``: interpreter paths; every versioned spec then runs once per
    interpreter, in an environment made from it (rows ``urllib3 2.2.3
    (python3.12)``); plain names keep running in this interpreter.

    A timed round runs until its time and ``min_requests`` requests; a round
    short of them, or disturbed by other processes or CPU steal, runs again
    up to ``reruns`` times (docs/metrics.md). ``slices``: each timed round is
    taken in this many pieces (default ``DEFAULT_SLICES``, none under 25 ms),
    slice k of every round and client before slice k + 1 of any, so every
    round samples the machine over the whole scenario.

    ``deterministic``: after each scenario's timing rounds, every client
    counts instructions (callgrind) and syscalls (strace) of
    ``deterministic_n`` requests, one at a time, in children of its worker;
    the instr/req and syscalls/req columns appear. Process clients are
    skipped with a note.
    """
    if repeat is None:
        repeat = QUICK_REPEAT if quick else DEFAULT_REPEAT
    if repeat < 1:
        raise ValueError("repeat must be >= 1")
    if n is not None and n < 1:
        raise ValueError("n must be >= 1")
    if min_requests < 1 or reruns < 0:
        raise ValueError("min_requests must be >= 1 and reruns >= 0")
    if slices is None:
        slices = DEFAULT_SLICES
    if slices < 1:
        raise ValueError("slices must be >= 1")
    if placement not in _machine.PLACEMENTS:
        raise ValueError(f"placement must be one of {', '.join(_machine.PLACEMENTS)}, "
                         f"got {placement!r}")
    if deterministic:
        if deterministic_n < 1:
            raise ValueError("deterministic_n must be >= 1")
        require_tool("valgrind")
        require_tool("strace")
    commands = {str(k): [str(a) for a in v] for k, v in (commands or {}).items()}
    for name, argv in commands.items():
        if not argv:
            raise ValueError(f"command client {name!r} needs a non-empty argv")
        if name in ADAPTERS:
            raise ValueError(f"command client name {name!r} clashes with a built-in client")
    explicit = clients is not None
    if clients is None:
        names = [c for c in DEFAULT_CLIENTS if adapter_status(c)[0]] + list(commands)
        missing = {c: adapter_status(c) for c in DEFAULT_CLIENTS if not adapter_status(c)[0]}
    else:
        names = list(dict.fromkeys(str(c) for c in clients))
        missing = {}
        if not names:
            raise ValueError("no clients given")
    if history is not None:  # a store that cannot be used fails before the long run
        from ._history import check_target

        check_target(history)
    scs = resolve_scenarios(list(scenarios) if scenarios is not None else None, quick=quick)
    h2 = [s.name for s in scs if s.is_h2]
    if h2:
        require_h2_server(f"scenario {', '.join(h2)}")
    h3 = [s.name for s in scs if s.is_h3]
    if h3:
        require_h3_server(f"scenario {', '.join(h3)}")
    saved = (_versions.load_baseline_file(baseline_file, [s.name for s in scs])
             if baseline_file is not None else None)
    if saved is not None and progress:
        gone = [s.name for s in scs if s.name not in saved.scenarios]
        if gone:
            progress(f"baseline file has no {', '.join(gone)}: not compared there")
    specs = _versions.specs_of(names)
    if pythons:
        specs, baseline = _versions.with_pythons(specs, list(pythons), baseline)
        names = [s.text for s in specs]
    envs = _versions.prepare(specs, progress, baseline) if specs else {}
    opts = RunOptions(
        repeat=repeat, n=n, scale=scale if scale is not None else (QUICK_SCALE if quick else 1.0),
        timeout=timeout, native_allocs=native_allocs, pin=pin, placement=placement, commands=commands,
        progress=progress, warmup=warmup, zygote=zygote, min_requests=min_requests,
        reruns=reruns, slices=slices,
        deterministic=deterministic, deterministic_n=deterministic_n,
    )
    if envs:
        opts.interpreters = {k: (e.spec.client, e.python) for k, e in envs.items()}
    runner = Runner(opts, server_factory=server_factory)
    rs = runner.run(names, scs)
    if specs:
        rs = _versions.relabel(rs, specs, envs, baseline)
    if saved is not None and baseline_file is not None:
        rs = _versions.against_file(rs, saved, baseline_file)
    for c, (_, reason, pip) in missing.items():
        rs = rs.with_skipped(c, f"not installed: {reason}" + (f" (pip install {pip})" if pip else ""))
    rs = rs.with_metadata(quick=quick, explicit_clients=explicit,
                          scenario_order=[s.name for s in scs])
    if history is not None:
        from ._history import record_results

        run_id = record_results(history, rs, "compare", clients=names)
        rs = rs.with_metadata(history_run=run_id)
    if out is not None:
        write_outputs(rs, out, plots=plots, progress=progress)
    return rs


def write_outputs(rs: ResultSet, out: str | os.PathLike[str], plots: bool = True,
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Write ``results.json``, ``tables.txt``, ``report.html`` (one self-contained page)
    and (if possible) PNG plots into ``out``."""
    d = os.fspath(out)
    os.makedirs(d, exist_ok=True)
    written: dict[str, Any] = {"json": os.path.join(d, "results.json")}
    rs.save(written["json"])
    with open(os.path.join(d, "tables.txt"), "w", encoding="utf-8") as f:
        f.write(format_tables(rs))
    written["tables"] = os.path.join(d, "tables.txt")
    if plots:
        try:
            from .plot import save_plots
        except ImportError as exc:
            written["plots_error"] = f"plots unavailable ({exc})"
        else:
            try:
                written["plots"] = save_plots(rs, d, formats=("png",))
            except Exception as exc:  # plotting must never lose the measured results
                written["plots_error"] = f"plotting failed: {type(exc).__name__}: {exc}"
        if "plots_error" in written and progress:
            progress(written["plots_error"])
    try:  # one file to open or share: tables, figures (when plots), machine and run
        from ._htmlreport import write_html

        written["html"] = write_html(rs, os.path.join(d, "report.html"), plots=plots)
    except Exception as exc:  # the report must never lose the measured results
        written["html_error"] = f"report.html failed: {type(exc).__name__}: {exc}"
        if progress:
            progress(written["html_error"])
    return written


# ---------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="httpbench compare",
        description="Compare HTTP client libraries against the embedded server: one table per "
                    "scenario (medians over interleaved repeats), anomaly notes, results JSON "
                    "and PNG plots.",
    )
    ap.add_argument("--clients", help="comma-separated clients (default: every installed one); "
                    f"known: {', '.join(ADAPTERS)}; NAME==VERSION, NAME[extra]==VERSION or "
                    "NAME@PATH runs that release or source tree in a cached environment of its own")
    ap.add_argument("--scenarios", help="comma-separated scenarios (default: all built-in; "
                    "NAME:key=value;... defines one, e.g. big:method=POST;path=/sink;body=2m)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="interleaved rounds per client and scenario (default 3, an odd count so the median is a round)")
    ap.add_argument("--n", type=int, default=None,
                    help="requests per round (default: a time budget per scenario)")
    ap.add_argument("--slices", type=int, default=None, metavar="K",
                    help=f"take each timed round in K slices, in turn with every other round "
                         f"and client (default {DEFAULT_SLICES}, each at least 25 ms; 1: one "
                         "contiguous piece)")
    ap.add_argument("--quick", action="store_true",
                    help=f"{len(QUICK_SCENARIOS)} scenarios, short rounds: about a minute")
    ap.add_argument("--out", help="output directory (default ./httpbench-results/<timestamp>/)")
    ap.add_argument("--no-out", action="store_true", help="write no files")
    ap.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    ap.add_argument("--json", action="store_true",
                    help="print the results JSON on stdout instead of the tables")
    ap.add_argument("--command", action="append", default=[], metavar="NAME=ARGV",
                    help="add a process-level client running ARGV per request, e.g. "
                         "'wget=wget -q -O {out} {url}' (placeholders {url} {out} {ca_file} "
                         "{body_file} {method})")
    ap.add_argument("--no-native-allocs", action="store_true",
                    help="do not preload the native malloc counter in workers")
    ap.add_argument("--no-pin", action="store_true",
                    help="no CPU pinning of server and workers (--placement unpinned)")
    ap.add_argument("--placement", choices=_machine.PLACEMENTS, default="auto",
                    help="where server and client run per scenario: auto (default: sequential "
                         "scenarios on one CPU when the calibrated cross-CPU wake-up costs "
                         "more, concurrent ones on two), same, split, unpinned")
    ap.add_argument("--no-zygote", action="store_true",
                    help="start every worker as a new interpreter (slower) instead of forking "
                         "it from a pre-imported one")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds a worker may take for one step before it is killed (120)")
    ap.add_argument("--baseline", metavar="SPEC",
                    help="with versioned client specs (NAME==VERSION, NAME@PATH): the spec the "
                         "others are compared with (default: the first)")
    ap.add_argument("--baseline-file", metavar="RESULTS_JSON",
                    help="also compare every row with the matching row of a saved results.json "
                         "(same scenarios; not interleaved: measured at another time)")
    ap.add_argument("--python", action="append", default=[], metavar="PATH",
                    help="run every versioned client spec in an environment made from this "
                         "interpreter (repeat or comma-separate for several: a second "
                         "dimension)")
    ap.add_argument("--deterministic", action="store_true",
                    help="after the timing rounds, count instructions (callgrind) and syscalls "
                         "(strace) per request in children of each worker: instr/req and "
                         "syscalls/req columns (needs valgrind and strace)")
    ap.add_argument("--deterministic-n", type=int, default=200, metavar="N",
                    help="requests counted per client and scenario with --deterministic (200)")
    ap.add_argument("--history", metavar="PATH_OR_URL",
                    help="also record the run in a history: a SQLite file or postgresql:// URL "
                         "(default: $HTTPBENCH_HISTORY; see `httpbench history`)")
    ap.add_argument("--list", action="store_true", help="list clients and scenarios, then exit")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    return ap


def _list() -> str:
    lines = ["Clients:"]
    for c in ADAPTERS:
        ok, reason, pip = adapter_status(c)
        extra = "" if ok else f"  (not available: {reason}" + (f"; pip install {pip}" if pip else "") + ")"
        if c == "command":
            extra = "  (any argv, via --command NAME=ARGV)"
        lines.append(f"  {c}{extra}")
    lines.append("Scenarios:" + "  (* = --quick)")
    for name, sc in SCENARIOS.items():
        mark = "*" if name in QUICK_SCENARIOS else " "
        h2 = {"h2": "  (HTTP/2: runs when named)",
              "h3": "  (HTTP/3: runs when named; a build with HTTP/3)"}.get(sc.protocol, "")
        lines.append(f" {mark} {name:<22} {sc.description}{h2}")
    return "\n".join(lines) + "\n"


class _Progress:
    """Progress on stderr: one line rewritten in place on a terminal; elsewhere (a log
    file, CI) only failures and skipped clients as they happen, then one summary line."""

    # messages worth a line of their own even in a log
    _KEEP = ("FAILED", "skip", "h1-fallback", "h3-fallback")

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()
        self.width = 0
        self.rounds = self.reruns = self.failed = 0

    def __call__(self, msg: str) -> None:
        if " req/s  p50 " in msg:
            self.rounds += 1
        elif msg.startswith("re-run"):
            self.reruns += 1
        elif msg.startswith("FAILED"):
            self.failed += 1
        text = f"[{time.monotonic() - self.t0:6.1f}s] {msg}"
        if not self.tty:
            if msg.startswith(self._KEEP):
                self.stream.write(text + "\n")
                self.stream.flush()
            return
        if not msg.startswith(self._KEEP):
            pad = max(0, self.width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self.width = len(text)
        else:
            if self.width:
                self.stream.write("\n")
                self.width = 0
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()
            self.width = 0

    def summary(self) -> None:
        """The one line a log gets for the whole run (a terminal saw it as it went)."""
        if self.tty:
            return
        self.stream.write(f"compare: {self.rounds} rounds "
                          f"measured, {self.reruns} re-run(s) for noise or too few requests, "
                          f"{self.failed} failure(s) (progress is shown on a terminal; "
                          "-q: none)\n")
        self.stream.flush()


def _split_scenarios(text: str) -> list[str]:
    """Split --scenarios: ',' between scenarios; a NAME:k=v spec's keys use ';' or ','."""
    out: list[str] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" in part and ":" not in part and out:
            out[-1] += "," + part  # a key=value continuing the previous spec
        else:
            out.append(part)
    return [s.replace(";", ",") for s in out]


def unknown_client_error(clients: Sequence[str], commands: Sequence[str] = ()) -> str | None:
    """A message naming the first client that is no adapter, with the closest known names.

    Custom ``module:Class`` names, ``--command`` names and versioned specs of a
    known adapter pass; a spec that does not parse is left to ``compare()``.
    """
    known = [c for c in ADAPTERS if c != "command"]
    for text in clients:
        try:
            name = parse_spec(text).client
        except ValueError:
            continue
        if name in ADAPTERS or name in commands or is_custom(name):
            continue
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        if not close:
            close = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.4)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return (f"unknown client {name!r}{hint} (known: {', '.join(known)}; or "
                "package.module:Class, or --command NAME=ARGV)")
    return None


def out_dir_error(path: str) -> str | None:
    """Why results could not be written into directory ``path`` (None: they can).

    Probes the directory, or its nearest existing ancestor, with a real
    temporary file, so read-only filesystems fail too; nothing is left behind.
    """
    target = os.path.abspath(path)
    if os.path.exists(target) and not os.path.isdir(target):
        return f"--out {path}: exists and is not a directory"
    probe = target
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        return f"--out {path}: {probe} is not a directory"
    try:
        fd, tmp = tempfile.mkstemp(prefix=".httpbench-probe-", dir=probe)
    except OSError as exc:
        why = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        return f"--out {path}: cannot write in {probe} ({why})"
    os.close(fd)
    os.unlink(tmp)
    return None


def _history_page(target: str, rs: ResultSet, out_dir: str) -> str | None:
    """The run's history trends beside its report (history.html); None when there is
    nothing to draw or drawing failed (the results are written either way)."""
    try:
        from ._history import History
        from ._historyplot import write_history_page

        with History(target) as h:
            return write_history_page(h, rs, out_dir)
    except Exception as exc:  # a page of trends must never cost the run's own outputs
        sys.stderr.write(f"httpbench compare: no history page ({type(exc).__name__}: {exc})\n")
        return None


def cli_main(argv: list[str]) -> int:
    """``httpbench compare ...``; returns the exit code."""
    from ._historystore import HistoryError, display_name

    ap = _parser()
    args = ap.parse_args(argv)
    if args.list:
        sys.stdout.write(_list())
        return 0
    commands: dict[str, list[str]] = {}
    for spec in args.command:
        name, eq, cmd = spec.partition("=")
        if not eq or not name.strip() or not cmd.strip():
            ap.error(f"--command needs NAME=ARGV, got {spec!r}")
        commands[name.strip()] = shlex.split(cmd)
    clients = split_specs(args.clients) if args.clients else None
    if clients is not None and commands:
        clients += [c for c in commands if c not in clients]
    if clients is not None:
        err = unknown_client_error(clients, list(commands))
        if err:
            sys.stderr.write(f"httpbench compare: {err}\n")
            return 2
    scenarios = _split_scenarios(args.scenarios) if args.scenarios else None
    out = None
    if not args.no_out:
        out = args.out or os.path.join("httpbench-results", time.strftime("%Y%m%d-%H%M%S"))
        err = out_dir_error(out)
        if err:
            sys.stderr.write(f"httpbench compare: {err}\n")
            return 2
    progress = None if args.quiet else _Progress()
    t0 = time.monotonic()
    try:
        rs = compare(
            clients=clients, scenarios=scenarios, repeat=args.repeat, n=args.n,
            slices=args.slices,
            quick=args.quick, out=None, plots=not args.no_plots, commands=commands,
            native_allocs=False if args.no_native_allocs else None, pin=not args.no_pin,
            placement=args.placement,
            timeout=args.timeout, progress=progress, zygote=not args.no_zygote,
            baseline=args.baseline, baseline_file=args.baseline_file,
            pythons=[p.strip() for v in args.python for p in v.split(",") if p.strip()],
            deterministic=args.deterministic,
            deterministic_n=args.deterministic_n,
            history=args.history or os.environ.get("HTTPBENCH_HISTORY") or None,
        )
    except (ValueError, KeyError, ToolMissing, FeatureUnavailable, HistoryError) as exc:
        if progress:
            progress.done()
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        sys.stderr.write(f"httpbench compare: {msg}\n")
        return 2
    if progress:
        progress.done()
    # one total time: the whole command up to the last measurement (environments, workers)
    rs = rs.with_metadata(duration_s=round(time.monotonic() - t0, 3))
    written: dict[str, Any] = {}
    if out is not None:
        if progress:
            progress("writing results" + ("" if args.no_plots else " and plots"))
            progress.done()
        written = write_outputs(rs, out, plots=not args.no_plots, progress=progress)
    history_page = None
    if written and rs.metadata.get("history_run"):
        history_page = _history_page(args.history or os.environ["HTTPBENCH_HISTORY"], rs,
                                     os.path.dirname(written["json"]))
    if progress:
        progress.summary()
    if args.json:
        sys.stdout.write(rs.to_json(indent=1) + "\n")
    else:
        sys.stdout.write(format_tables(rs))
        if written:
            sys.stdout.write(f"Wrote {written['json']}")
            if written.get("html"):
                sys.stdout.write(f", {written['html']}")
            plots = written.get("plots")
            if plots:
                n = len(plots) if isinstance(plots, (list, tuple, dict)) else 1
                sys.stdout.write(f" and {n} plot file(s) in {os.path.dirname(written['json'])}")
            sys.stdout.write("\n")
    if rs.metadata.get("history_run"):
        sys.stdout.write(f"Recorded run {rs.metadata['history_run']} in history "
                         f"{display_name(args.history or os.environ['HTTPBENCH_HISTORY'])}"
                         + (f"; its trends: {history_page}" if history_page else "") + "\n")
    if rs.metadata.get("interrupted"):
        return 130  # Ctrl-C: partial results were printed and saved
    if not rs.results:
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(cli_main(sys.argv[1:]))
