"""Figures that measure the client, not the machine: placement, drift and harness tax.

Parts (``--parts``, all by default), each interleaving its contenders round by round:

* ``placement``: native GETs of get-150b through the default ``compare`` (placement
  chosen by the wake-up calibration), through ``compare --placement split`` (the
  old default: server and worker on two CPUs), and ``measure()`` directly with the
  client and a ``start_process()`` server on one CPU. CPU/req and p50 per round.
* ``drift``: ``--trials`` consecutive default ``compare(clients, ["get-150b"])``
  runs; per client the run-to-run CV of CPU/req, and each run's machine-speed
  index against the first run's (a run that moved > 3 % is flagged).
* ``tax``: one fixed statement per library (``_tax_adapters``: a prepared requests
  send, urllib3 urlopen, a reused pycurl handle) timed through ``compare`` (sliced
  and unsliced), through ``measure()`` directly and by a plain ``for`` loop with gc
  on, on the same CPU as a ``start_process()`` server on that CPU.
* ``wall``: one default ``compare()`` (every installed client, every scenario).

usage: python benchmarks/bench_placement.py [--rounds 3] [--trials 5] [--scale F]
        [--parts placement,drift,tax,wall] [--clients native,pycurl,requests,httpx]
        [--json out]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

import httpbench
from httpbench import _machine, _server

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _peers import write_rows  # noqa: E402

SCENARIO = "get-150b"
CPUS = sorted(os.sched_getaffinity(0))
CPU = CPUS[-1]  # where compare puts its workers (and, placed "same", its server)
TAX = {"requests": "_tax_adapters:RequestsSend", "urllib3": "_tax_adapters:Urllib3Open",
       "pycurl": "_tax_adapters:PycurlReused"}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _med(rs: httpbench.ResultSet, client: str, attr: str) -> float:
    reps = [r for r in rs.repeats(client, SCENARIO) if isinstance(r, httpbench.MeasureResult)]
    return statistics.median(getattr(r, attr) for r in reps) if reps else float("nan")


def _cv(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    if len(xs) < 2 or not statistics.mean(xs):
        return float("nan")
    return statistics.stdev(xs) / statistics.mean(xs) * 100


def _row(case: str, contender: str, metric: str, unit: str, values: list[float]) -> dict:
    return {"case": case, "contender": contender, "metric": metric, "unit": unit,
            "values": [v for v in values if v == v]}


def part_placement(rounds: int, scale: float | None) -> tuple[list[dict], list[str]]:
    case = f"{SCENARIO}, native Client"
    got: dict[str, dict[str, list[float]]] = {}

    def add(who: str, cpu_ns: float, p50_ns: float) -> None:
        d = got.setdefault(who, {"cpu": [], "p50": []})
        d["cpu"].append(cpu_ns / 1e3)
        d["p50"].append(p50_ns / 1e3)

    chosen = None
    for r in range(rounds):
        rs = httpbench.compare(["native"], [SCENARIO], plots=False, scale=scale)
        chosen = rs.metadata["placement"][SCENARIO]
        add("compare (default)", _med(rs, "native", "cpu_ns_per_call"), _med(rs, "native", "p50"))
        rs = httpbench.compare(["native"], [SCENARIO], plots=False, scale=scale,
                               placement="split")
        add("compare --placement split", _med(rs, "native", "cpu_ns_per_call"),
            _med(rs, "native", "p50"))
        with _server.start_process(cpu=CPU) as srv:
            c = httpbench.Client()
            url = srv.url + "/bytes/150"
            mine = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {CPU})
            try:
                m = httpbench.measure(functools.partial(c.get, url),
                                      duration=0.6 * (scale or 1.0), placement="unpinned")
            finally:
                os.sched_setaffinity(0, mine)
                c.close()
        add("measure() same CPU, start_process()", m.cpu_ns_per_call, m.p50)
        print(f"placement round {r + 1}/{rounds}", file=sys.stderr)
    rows = []
    for who, d in got.items():
        rows.append(_row(case, who, "CPU/req", "µs", d["cpu"]))
        rows.append(_row(case, who, "latency p50", "µs", d["p50"]))
    notes = [f"default compare placed {SCENARIO}: {_machine.placement_text(chosen)} "
             f"({(chosen or {}).get('mode')}); "
             f"{_machine.wakeup_text(_machine.wakeup_cost())}"]
    return rows, notes


def part_drift(trials: int, clients: list[str], scale: float | None
               ) -> tuple[list[dict], list[str]]:
    case = f"{trials} consecutive default compare {SCENARIO} runs"
    runs = []
    for t in range(trials):
        runs.append(httpbench.compare(clients, [SCENARIO], plots=False, scale=scale))
        print(f"drift run {t + 1}/{trials}", file=sys.stderr)
    rows, cvs = [], []
    for c in clients:
        cv = _cv([_med(rs, c, "cpu_ns_per_call") for rs in runs])
        cvs.append(cv)
        rows.append(_row(case, c, "run-to-run CV of CPU/req", "%", [cv]))
    rows.append(_row(case, "median over clients", "run-to-run CV of CPU/req", "%",
                     [statistics.median([v for v in cvs if v == v])]))
    idx = [(rs.metadata.get("speed_index") or {}).get("median") for rs in runs]
    rows.append(_row(case, "machine speed index", "speed index", "µs",
                     [v / 1e3 for v in idx if v]))
    flagged = []
    for k, rs in enumerate(runs[1:], 2):
        ch = _machine.machine_change(runs[0].metadata, rs.metadata)
        if ch is not None and abs(ch) > _machine.DRIFT_LIMIT:
            flagged.append(f"run {k} ({ch:+.0%})")
    notes = ["runs whose machine-speed index moved > 3 % from run 1 (flagged as "
             "'machine N % slower/faster' by httpbench diff): "
             + (", ".join(flagged) if flagged else "none")]
    return rows, notes


def _timed(mode: str, url: str, secs: float, names: list[str]) -> dict[str, float]:
    """Calls/s of each statement in a fresh process on CPU: a plain loop or measure()."""
    p = subprocess.run([sys.executable, os.path.join(HERE, "_tax_adapters.py"), mode, str(CPU),
                        url, str(secs), *names], capture_output=True, text=True, timeout=600,
                       check=True)
    return json.loads(p.stdout)


def part_tax(rounds: int, scale: float | None) -> tuple[list[dict], list[str]]:
    names = [n for n in TAX if _installed(n)]
    notes = [f"{n}: not installed" for n in TAX if n not in names]
    got: dict[tuple[str, str, str], list[float]] = {}
    secs = 0.6 * (scale or 1.0)
    for r in range(rounds):
        for label, kw in (("compare", {}), ("compare, unsliced", {"slices": 1})):
            rs = httpbench.compare([TAX[n] for n in names], [SCENARIO], plots=False,
                                   scale=scale, **kw)
            for n in names:
                got.setdefault((n, label, "req/s"), []).append(_med(rs, TAX[n], "calls_per_s"))
                got.setdefault((n, label, "CPU/req"), []).append(
                    _med(rs, TAX[n], "cpu_ns_per_call") / 1e3)
        with _server.start_process(cpu=CPU) as srv:
            for label, mode in (("plain loop (gc on)", "loop"), ("measure()", "measure")):
                for n, (rate, cpu_us) in _timed(mode, srv.url, secs, names).items():
                    got.setdefault((n, label, "req/s"), []).append(rate)
                    got.setdefault((n, label, "CPU/req"), []).append(cpu_us)
        print(f"tax round {r + 1}/{rounds}", file=sys.stderr)
    rows = [_row(f"{n}: the same statement on CPU {CPU}, server on it too", label, metric,
                 "req/s" if metric == "req/s" else "µs", v)
            for (n, label, metric), v in got.items()]
    notes.append("statements (benchmarks/_tax_adapters.py): requests Session.send of a "
                 "prepared request, urllib3 PoolManager.urlopen, a reused pycurl handle")
    return rows, notes


def part_wall() -> tuple[list[dict], list[str]]:
    t0 = time.perf_counter()
    rs = httpbench.compare(out=None, plots=False)
    wall = time.perf_counter() - t0
    return ([_row("default compare", "compare()", "time", "s", [wall])],
            [f"default compare: {len(rs.clients)} clients, {len(rs.scenarios)} scenarios, "
             f"{wall:.0f} s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--scale", type=float, default=None, help="factor on round durations")
    ap.add_argument("--parts", default="placement,drift,tax,wall")
    ap.add_argument("--clients", default="native,pycurl,requests,httpx")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    # the workers import the statements' adapters from this directory
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = HERE + (os.pathsep + old if old else "")
    parts = [p for p in a.parts.split(",") if p]
    clients = [c for c in a.clients.split(",") if c]
    rows: list[dict] = []
    notes: list[str] = []
    if len(CPUS) < 2:
        notes.append("one CPU: every placement is the same")
    for p in parts:
        if p == "placement":
            r, n = part_placement(a.rounds, a.scale)
        elif p == "drift":
            r, n = part_drift(a.trials, [c for c in clients if c == "native" or _installed(c)],
                              a.scale)
        elif p == "tax":
            r, n = part_tax(a.rounds, a.scale)
        elif p == "wall":
            r, n = part_wall()
        else:
            raise SystemExit(f"unknown part {p!r}")
        rows += r
        notes += n
    load = os.getloadavg()[0]
    notes.append(f"load average at the end: {load:.1f} on {os.cpu_count()} CPUs"
                 + ("; the machine was busy" if load > 0.5 else ""))
    write_rows(rows, notes, a.json)


if __name__ == "__main__":
    main()
