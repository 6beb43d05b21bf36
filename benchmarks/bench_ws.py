"""Streaming: the WebSocket load generator and the server's pushed events, each vs a floor.

Target: the embedded server's /ws (its own process), C connections echoing
messages of SIZE bytes back to back for DURATION seconds. Contenders, each in
a fresh process and interleaved round by round:

* httpbench - ``bench(ws://..., concurrency=C, duration=D, ws_size=SIZE)``; CPU of the
  engine threads (their own rusage);
* floor - benchmarks/floor_ws.c: per message one send() of a prebuilt frame and
  recv()s until the echo's known length arrived (no frame parsing, no clock per
  message, no histogram): the least a generator can spend here;
* picows / websockets - C asyncio tasks, each sending a message and awaiting its
  echo in a loop (picows: its listener callback; websockets: ``recv()``); CPU of the
  process over the loop (getrusage), the interpreter's start excluded.

Rows: CPU µs per echoed message and messages/s per (case, contender); the
server counts every echo (a contender's count must match it).

Case "sse push": the server's CPU per pushed event. The embedded server's
``/sse?events=N&size=SIZE`` (its workers' CPU from its stats, the events
counted by them) over HTTP/1.1 (contender ``httpbench``) and over h2c
(``httpbench h2``: each event its own DATA frame) against
benchmarks/floor_push.c (one prebuilt event written N times, one write() each,
its process CPU), all read by ``curl -o /dev/null`` (``--http2-prior-knowledge``
for h2).

``--callgrind N1,N2`` also serves under valgrind's callgrind (``httpbench
serve``) and reads ``/sse?events=N1`` then ``events=N2`` with curl over HTTP/1.1
and over h2c (counters zeroed before and dumped after each stream): the server
process's instructions per event, (Ir(N2) - Ir(N1)) / (N2 - N1), exact, with the
connection and the request cancelled out (case "sse push instructions").

    python benchmarks/bench_ws.py [--duration 3] [--rounds 3] [--conns 4] [--size 1024]
        [--callgrind N1,N2] [--json f]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from httpbench import start_process

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _peers  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

HB = """
import json, sys
import httpbench
r = httpbench.bench(sys.argv[1], duration=float(sys.argv[2]), concurrency=int(sys.argv[3]),
                    ws_size=int(sys.argv[4]))
print(json.dumps({"ok": r.successes, "done": r.responses + r.errors,
                  "duration_s": r.duration_ns / 1e9, "cpu_ns": r.cpu_user_ns + r.cpu_sys_ns}))
"""

# The Python clients: a loop per connection for the duration; CPU over the loops only.
PY = """
import asyncio, json, resource, sys, time
url, dur, conns, size, lib = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
msg = b"x" * size

def cpu():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime

async def with_websockets():
    import websockets
    socks = [await websockets.connect(url, compression=None, max_size=None) for _ in range(conns)]
    end = time.monotonic() + dur
    async def loop(ws):
        n = 0
        while time.monotonic() < end:
            await ws.send(msg)
            await ws.recv()
            n += 1
        return n
    c0, t0 = cpu(), time.monotonic()
    counts = await asyncio.gather(*(loop(ws) for ws in socks))
    c1, t1 = cpu(), time.monotonic()
    for ws in socks:
        await ws.close()
    return sum(counts), t1 - t0, c1 - c0

async def with_picows():
    from picows import WSListener, WSMsgType, ws_connect
    end = time.monotonic() + dur
    done = asyncio.get_running_loop().create_future()
    left = [conns]
    total = [0]
    class Echo(WSListener):
        def on_ws_connected(self, transport):
            self.t = transport
        def on_ws_frame(self, transport, frame):
            if frame.msg_type != WSMsgType.BINARY:
                return
            total[0] += 1
            if time.monotonic() < end:
                transport.send(WSMsgType.BINARY, msg)
            else:
                left[0] -= 1
                if not left[0] and not done.done():
                    done.set_result(None)
    pairs = [await ws_connect(Echo, url) for _ in range(conns)]
    c0, t0 = cpu(), time.monotonic()
    for t, _ in pairs:
        t.send(WSMsgType.BINARY, msg)
    await done
    c1, t1 = cpu(), time.monotonic()
    for t, _ in pairs:
        t.disconnect()
    return total[0], t1 - t0, c1 - c0

n, secs, c = asyncio.run(with_picows() if lib == "picows" else with_websockets())
print(json.dumps({"ok": n, "done": n, "duration_s": secs, "cpu_ns": int(c * 1e9)}))
"""


def run_python(lib: str, url: str, conns: int, dur: float, size: int) -> dict:
    return _peers.run_bench_script(PY, [url, str(dur), str(conns), str(size), lib], dur)


def run_floor(exe: str, port: int, conns: int, dur: float, size: int) -> dict:
    p = subprocess.run([exe, "127.0.0.1", str(port), "/ws", str(conns), f"{dur:g}", str(size)],
                       capture_output=True, text=True, timeout=dur + 60)
    if p.returncode != 0:
        raise RuntimeError(f"floor_ws failed: {p.stderr.strip()}")
    import json

    d = json.loads(p.stdout)
    return {"ok": d["messages"], "done": d["messages"], "duration_s": d["seconds"],
            "cpu_s": d["cpu_user_s"] + d["cpu_sys_s"]}


CURL_PROTO = {"http/1.1": "--http1.1", "h2": "--http2-prior-knowledge"}


def push_server(srv, n: int, size: int, proto: str = "http/1.1") -> dict:
    """The embedded server pushing n events to curl: its workers' CPU over the stream."""
    st0 = srv.stats()
    subprocess.run(["curl", "-sS", CURL_PROTO[proto], "-o", "/dev/null",
                    f"{srv.url}/sse?events={n}&size={size}"], check=True, timeout=300)
    st1 = srv.stats()
    sent = st1["sse"]["events"] - st0["sse"]["events"]
    if sent != n:
        raise RuntimeError(f"the server wrote {sent} events, not {n}")
    return {"ok": n, "done": n, "duration_s": 1.0, "cpu_s": (st1["cpu_ns"] - st0["cpu_ns"]) / 1e9}


def push_floor(exe: str, n: int, size: int) -> dict:
    import json

    p = subprocess.Popen([exe, "0", str(n), str(size)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    port = int(p.stdout.readline())
    subprocess.run(["curl", "-sS", "--http1.1", "-o", "/dev/null",
                    f"http://127.0.0.1:{port}/sse"], check=True, timeout=300)
    d = json.loads(p.stdout.readline())
    p.wait(60)
    return {"ok": n, "done": n, "duration_s": 1.0, "cpu_s": d["cpu_user_s"] + d["cpu_sys_s"]}


def callgrind_push(n1: int, n2: int, size: int) -> dict[str, float] | str:
    """The server's instructions per pushed event by protocol (see the module
    doc), or why they were not counted."""
    import re

    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        return "valgrind (callgrind) is not installed"
    cli = [sys.executable, "-m", "httpbench"]
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cg = os.path.join(tmp, "cg.out")
        srv = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}",
                                *cli, "serve", "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            url = None
            assert srv.stdout is not None
            for line in srv.stdout:  # valgrind slows start-up: the URL line says it is up
                m = re.search(r"listening on (http://\S+)", line)
                if m:
                    url = m.group(1)
                    break
            if url is None:
                raise RuntimeError("the server under callgrind did not start")

            def ctl(cmd: str) -> None:
                subprocess.run(["callgrind_control", cmd, str(srv.pid)], check=True,
                               capture_output=True, timeout=60)

            dump = 0
            for proto in ("http/1.1", "h2"):
                irs = []
                for n in (n1, n2):
                    ctl("-z")
                    subprocess.run(["curl", "-sS", CURL_PROTO[proto], "-o", "/dev/null",
                                    f"{url}/sse?events={n}&size={size}"], check=True, timeout=600)
                    ctl("-d")
                    dump += 1
                    with open(f"{cg}.{dump}") as f:
                        irs.append(int(re.search(r"^summary: (\d+)", f.read(), re.M).group(1)))
                out[proto] = (irs[1] - irs[0]) / (n2 - n1)
        finally:
            srv.terminate()
            srv.wait(60)
    return out


def have(mod: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(mod) is not None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--events", type=int, default=100000, help="events per push run")
    ap.add_argument("--quick", action="store_true", help="1 s, 1 round, 20000 events")
    ap.add_argument("--callgrind", metavar="N1,N2",
                    help="also count the server's instructions per pushed event (h1, h2)")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args()
    if a.quick:
        a.duration, a.rounds, a.events = 1.0, 1, 20000
    tmp = tempfile.mkdtemp(prefix="hb-ws-")
    floor = _peers.build_floor(os.path.join(HERE, "floor_ws.c"), tmp)
    fpush = _peers.build_floor(os.path.join(HERE, "floor_push.c"), tmp)
    tools = ["httpbench"] + (["floor"] if floor else [])
    tools += [lib for lib in ("picows", "websockets") if have(lib)]
    tools.append("httpbench h2")  # the push case only
    srv = start_process()
    port = int(srv.url.rsplit(":", 1)[1])
    url = f"ws://127.0.0.1:{port}/ws"
    case = f"echo {a.size} B c{a.conns}"
    pcase = f"sse push {a.size} B"
    notes = []
    try:
        def run(tool: str, keys: dict) -> dict | None:
            if keys["case"] == pcase:
                if tool == "httpbench":
                    return push_server(srv, a.events, a.size)
                if tool == "httpbench h2":
                    return push_server(srv, a.events, a.size, "h2")
                return push_floor(fpush, a.events, a.size) if tool == "floor" and fpush else None
            if tool == "httpbench h2":
                return None
            before = srv.stats()["ws"]["messages_out"]
            if tool == "httpbench":
                r = _peers.run_bench_script(HB, [url, str(a.duration), str(a.conns),
                                                 str(a.size)], a.duration)
            elif tool == "floor":
                r = run_floor(floor, port, a.conns, a.duration, a.size)
            else:
                r = run_python(tool, url, a.conns, a.duration, a.size)
            echoed = srv.stats()["ws"]["messages_out"] - before
            # the server's count: every echo a contender counted (+ those in flight at its end)
            if not r["ok"] <= echoed <= r["ok"] + a.conns:
                raise RuntimeError(f"{tool}: counted {r['ok']} echoes, the server {echoed}")
            return r

        cases = [(case, {"case": case})]
        if shutil.which("curl"):
            cases.append((pcase, {"case": pcase}))
        runs = _peers.round_robin(a.rounds, cases, tools, run)
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    rows = []
    for c, _ in cases:
        for tool in tools:
            rs = [r for r in runs if r["tool"] == tool and r["case"] == c]
            if not rs:
                continue
            rows.append({"case": c, "contender": tool, "metric": "CPU/msg", "unit": "µs",
                         "values": [r["cpu_us_per_req"] for r in rs]})
            if c == case:
                rows.append({"case": c, "contender": tool, "metric": "msg/s", "unit": "1/s",
                             "values": [r["rps"] for r in rs]})
            print(f"{c:16} {tool:11} "
                  f"{statistics.median(r['cpu_us_per_req'] for r in rs):7.2f} µs CPU/msg",
                  file=sys.stderr)
    notes.append("every contender's echo count matched the server's (within the messages in "
                 "flight at its end)")
    if a.callgrind:
        n1, n2 = map(int, a.callgrind.split(","))
        ir = callgrind_push(n1, n2, a.size)
        if isinstance(ir, str):
            notes.append(f"instructions per pushed event not counted: {ir}")
        else:
            for proto, v in ir.items():
                rows.append({"case": "sse push instructions", "contender": f"server {proto}",
                             "metric": "Ir/event", "unit": "Ir", "values": [v]})
                print(f"sse push Ir      server {proto:8} {v:9.0f} Ir/event", file=sys.stderr)
    _peers.write_rows(rows, notes, a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
