"""Streaming: a client's CPU per server-sent event, the native client vs the Python clients.

Target: the embedded server's ``/sse?events=E&size=SIZE`` (its own process), a flood
(no interval) of 1 KiB events by default. Contenders, each in a fresh process and
interleaved round by round, read STREAMS streams one after the other after one
warm-up stream; CPU is the process's (getrusage) over those streams only:

* httpbench - the native client, ``Client.stream().iter_events()`` (events parsed in
  C into ServerSentEvent tuples);
* py:<client> - every Python client with an event stream reader in compare
  (``httpbench._adapters.sse_``: httpx + httpx-sse, requests / niquests
  ``iter_lines``, urllib3, aiohttp, pycurl, http.client, curl_cffi, wreq and
  pyreqwest chunk streams split into lines), through the
  same adapter code compare runs;
* floor - benchmarks/floor_sse.c: per stream one prebuilt GET, recv() until the
  close into one buffer, "\\n\\n" counted; no HTTP parsing, no event objects.

Every contender's event count is checked (E per stream; the floor's blocks E + 1,
the preamble included) and the server's own event count must grow by all of them.
With valgrind, instruction counts per event for httpbench and the cheapest Python
client: two runs of K and 2K streams under callgrind, the difference divided by the
K x E events between them (the interpreter's start cancels out).

    python benchmarks/bench_sse_client.py [--rounds 5] [--streams 20] [--events 2000]
        [--size 1024] [--no-callgrind] [--json f]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from httpbench import start_process

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _peers  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PY_CLIENTS = ("requests", "httpx", "urllib3", "aiohttp", "pycurl", "http.client", "curl_cffi",
              "niquests", "wreq", "pyreqwest")

CHILD = """
import asyncio, json, resource, sys
base, path, events, streams, client = sys.argv[1], sys.argv[2], int(sys.argv[3]), \\
    int(sys.argv[4]), sys.argv[5]

def cpu():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return int((ru.ru_utime + ru.ru_stime) * 1e9)

if client == "httpbench":
    import httpbench
    c = httpbench.Client(timeout=30)
    url = base + path
    def one():
        with c.stream("GET", url) as r:
            for _ in r.iter_events():
                pass
        return r.events
else:
    from httpbench._adapters import load_adapter
    a = load_adapter(client)()
    loop = None
    if a.kind == "async":
        loop = asyncio.new_event_loop()
        loop.run_until_complete(a.asetup(base, None, path=path, events=events, timeout=30.0))
    else:
        a.setup(base, None, path=path, events=events, timeout=30.0)
    def one():
        if loop is not None:
            loop.run_until_complete(a.request())
        else:
            a.request()
        return a.last_events
assert one() == events
c0 = cpu()
got = [one() for _ in range(streams)]
c1 = cpu()
assert got == [events] * streams, got
print(json.dumps({"events": sum(got), "cpu_ns": c1 - c0}))
"""


def run_child(tool: str, base: str, path: str, events: int, streams: int,
              prefix: tuple[str, ...] = ()) -> dict:
    client = "httpbench" if tool == "httpbench" else tool.removeprefix("py:")
    p = subprocess.run([*prefix, sys.executable, "-c", CHILD, base, path, str(events),
                        str(streams), client], capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"{tool}: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def instructions(tool: str, base: str, path: str, events: int, k: int, tmp: str) -> float:
    """Instructions per event under callgrind: runs of k and 2k streams, differenced."""
    totals = []
    for streams in (k, 2 * k):
        out = os.path.join(tmp, f"cg.{tool.replace(':', '_')}.{streams}")
        run_child(tool, base, path, events, streams,
                  ("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"))
        with open(out) as f:
            m = re.search(r"^summary:\s+(\d+)", f.read(), re.M)
        if not m:
            raise RuntimeError(f"{tool}: no callgrind summary")
        totals.append(int(m.group(1)))
    return (totals[1] - totals[0]) / (k * events)


def have(client: str) -> bool:
    from httpbench._adapters import AdapterUnavailable, load_adapter

    try:
        return bool(load_adapter(client).sse)
    except (AdapterUnavailable, ImportError, KeyError):
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--streams", type=int, default=20)
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--quick", action="store_true", help="3 rounds of 5 streams")
    ap.add_argument("--smoke", action="store_true", help="1 round of 2 streams, no callgrind")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.streams = 3, 5
    if a.smoke:
        a.rounds, a.streams, a.no_callgrind = 1, 2, True
    path = f"/sse?events={a.events}&size={a.size}"
    tmp = tempfile.mkdtemp(prefix="hb-sse-")
    floor = _peers.build_floor(os.path.join(HERE, "floor_sse.c"), tmp)
    tools = ["httpbench"] + (["floor"] if floor else [])
    tools += [f"py:{c}" for c in PY_CLIENTS if have(c)]
    srv = start_process()
    base = srv.url
    port = int(base.rsplit(":", 1)[1])
    case = f"sse {a.size} B x{a.events}"
    notes: list[str] = []
    icount: dict[str, float] = {}
    try:
        def run(tool: str, keys: dict) -> dict | None:
            before = srv.stats()["sse"]["events"]
            if tool == "floor":
                p = subprocess.run([floor, str(port), path, str(a.streams)], capture_output=True,
                                   text=True, timeout=600, check=True)
                d = json.loads(p.stdout)
                if d["blocks"] != a.streams * (a.events + 1):
                    raise RuntimeError(f"floor: {d['blocks']} blocks of "
                                       f"{a.streams * (a.events + 1)}")
                got, warm = a.streams * a.events, 0
            else:
                d = run_child(tool, base, path, a.events, a.streams)
                got, warm = d["events"], a.events
            served = srv.stats()["sse"]["events"] - before
            if served != got + warm:
                raise RuntimeError(f"{tool}: read {got + warm} events, the server sent {served}")
            return {"ok": got, "done": got, "duration_s": 1.0, "cpu_s": d["cpu_ns"] / 1e9}

        runs = _peers.round_robin(a.rounds, [(case, {"case": case})], tools, run)
        med = {t: statistics.median(r["cpu_us_per_req"] for r in runs if r["tool"] == t)
               for t in tools}
        py = [t for t in tools if t.startswith("py:")]
        if not a.no_callgrind and shutil.which("valgrind") and py:
            cheapest = min(py, key=lambda t: med[t])
            k = max(1, min(a.streams, 3))
            for t in ("httpbench", cheapest):
                icount[t] = instructions(t, base, path, a.events, k, tmp)
            notes.append(f"instructions per event (callgrind, runs of {k} and {2 * k} streams "
                         f"differenced): " + ", ".join(f"{t} {v:,.0f}" for t, v in
                                                      icount.items()))
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    rows = []
    for tool in tools:
        rs = [r for r in runs if r["tool"] == tool]
        rows.append({"case": case, "contender": tool, "metric": "CPU/event", "unit": "µs",
                     "values": [r["cpu_us_per_req"] for r in rs]})
        if tool in icount:
            rows.append({"case": case, "contender": tool, "metric": "instructions/event",
                         "unit": "instr", "values": [icount[tool]]})
        vals = [r["cpu_us_per_req"] for r in rs]
        print(f"{tool:16} {statistics.median(vals):7.3f} µs CPU/event "
              f"(min {min(vals):.3f}, max {max(vals):.3f})"
              + (f"  {icount[tool]:,.0f} instr/event" if tool in icount else ""),
              file=sys.stderr)
    notes.append("every contender's event count matched the server's")
    _peers.write_rows(rows, notes, a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
