"""History: recording one compare run, and checking a large history, on SQLite and PostgreSQL.

* record: ``History.record(rs)`` of a compare ResultSet of 20 clients x 10 scenarios x
  3 repeats (the cells' rows, the git state, the machine fingerprint and one
  transaction with ~2,000 points), ms per run, into a store already holding runs.
* check: ``httpbench history check`` (a fresh interpreter: start-up, imports,
  reading the newest 200 runs of every series, Otava on each) over a store of
  10,000 runs x 50 series (5 of them with a step), s per command.

PostgreSQL runs against a server the script starts itself (Debian's postgresql,
as the ``postgres`` user when run as root), skipped with a note where absent.

usage: python benchmarks/bench_history.py [--rounds 5] [--runs 10000] [--json out.json]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pwd
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import machine_metadata  # noqa: E402

SERIES = 50
STEPPED = 5


def start_postgres() -> tuple[str, Any] | None:
    """(URL, stop function) of a throw-away PostgreSQL server, or None without one."""
    initdb = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return None
    if not initdb:
        return None
    bindir = os.path.dirname(initdb[-1])
    root = tempfile.mkdtemp(prefix="hb-bench-pg-")
    prefix: list[str] = []
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(root, pw.pw_uid, pw.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = os.path.join(root, "data")
    subprocess.run([*prefix, f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres",
                    "--no-sync"], check=True, capture_output=True)
    subprocess.run([*prefix, f"{bindir}/pg_ctl", "-D", data, "-l", os.path.join(root, "log"),
                    "-w", "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1", "start"],
                   check=True, capture_output=True)

    def stop() -> None:
        subprocess.run([*prefix, f"{bindir}/pg_ctl", "-D", data, "-m", "fast", "stop"],
                       capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)

    return f"postgresql://postgres@127.0.0.1:{port}/postgres", stop


def compare_like_resultset() -> Any:
    import httpbench

    r = httpbench.measure(lambda: None, n=50)
    rs = httpbench.ResultSet()
    for c in range(20):
        for s in range(10):
            for i in range(3):
                rs = rs.with_result(f"client{c}", f"scenario{s}", i, r)
    return rs


def fill(target: str, runs: int) -> None:
    """A store of ``runs`` runs x SERIES series, written in bulk (setup, not measured)."""
    from httpbench._historyrun import fingerprint
    from httpbench._historystore import NewRun, Point, open_store

    rnd = random.Random(1)
    m = fingerprint()
    with open_store(target) as st:  # creates the schema, the machine and the series
        st.record(NewRun("pytest", m, [Point(f"t{k}", "", "cpu_ns_per_request", 1000.0)
                                       for k in range(SERIES)]))
        db = st._db
        cur = db.cursor()
        cur.execute("SELECT id FROM series ORDER BY subject")
        sids = [r[0] for r in cur.fetchall()]
        now = time.time_ns()
        run_rows = [(now + i, now + i, "pytest", "", f"{i:040x}", "main", 0, "vm",
                     m["fingerprint"], 1000.0) for i in range(runs - 1)]
        q = ("INSERT INTO runs (recorded_unix_ns, started_unix_ns, source, label, commit_sha, "
             "branch, dirty, host, machine, speed_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        if st.pg:
            db.autocommit = False
            with cur.copy("COPY runs (recorded_unix_ns, started_unix_ns, source, label, "
                          "commit_sha, branch, dirty, host, machine, speed_ns) FROM STDIN") as cp:
                for row in run_rows:
                    cp.write_row(row)
            db.commit()
        else:
            cur.execute("BEGIN")
            cur.executemany(q, run_rows)
            cur.execute("COMMIT")
        cur.execute("SELECT id FROM runs ORDER BY id")
        rids = [r[0] for r in cur.fetchall()][1:]
        pts = []
        for k, sid in enumerate(sids):
            for j, rid in enumerate(rids):
                step = 1.08 if k < STEPPED and j >= len(rids) - 40 else 1.0
                pts.append((sid, rid, 1000.0 * step * (1 + rnd.gauss(0, 0.03))))
        if st.pg:
            with cur.copy("COPY points (series_id, run_id, value) FROM STDIN") as cp:
                for row in pts:
                    cp.write_row(row)
            db.commit()
            db.autocommit = True
        else:
            cur.execute("BEGIN")
            cur.executemany("INSERT INTO points (series_id, run_id, value) VALUES (?, ?, ?)", pts)
            cur.execute("COMMIT")


def time_record(target: str, rounds: int) -> list[float]:
    import httpbench

    rs = compare_like_resultset()
    out = []
    with httpbench.history(target, create=True) as h:
        h.record(rs)  # the first run creates the series
        for _ in range(rounds):
            t = time.perf_counter()
            h.record(rs)
            out.append((time.perf_counter() - t) * 1e3)
    return out


def time_check(target: str, rounds: int) -> tuple[list[float], str]:
    out, last = [], ""
    for _ in range(rounds):
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "httpbench", "history", "check", "--history",
                            target], capture_output=True, text=True, check=False)
        out.append(time.perf_counter() - t)
        if p.returncode not in (0, 1):
            raise SystemExit(f"history check failed: {p.stderr}")
        last = p.stdout.strip().splitlines()[-1]
    return out, last


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--json", metavar="FILE", help="write {rows, notes} here")
    a = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    tmp = tempfile.mkdtemp(prefix="hb-bench-history-")
    pg = start_postgres()
    if pg is None:
        notes.append("PostgreSQL rows skipped: no /usr/lib/postgresql/*/bin/initdb or no psycopg")
    try:
        stores = [("sqlite", os.path.join(tmp, "record.db"), os.path.join(tmp, "check.db"))]
        if pg is not None:
            import psycopg

            with psycopg.connect(pg[0], autocommit=True) as db:
                db.execute("CREATE DATABASE hb_record")
                db.execute("CREATE DATABASE hb_check")
            base = pg[0].rsplit("/", 1)[0]
            stores.append(("postgresql", f"{base}/hb_record", f"{base}/hb_check"))
        for kind, rec_target, check_target in stores:
            ms = time_record(rec_target, a.rounds)
            rows.append({"case": f"record one compare run, {kind}", "contender": "httpbench",
                         "metric": "time", "unit": "ms", "values": ms})
            print(f"{kind}: record one compare run (20 clients x 10 scenarios): median "
                  f"{statistics.median(ms):.1f} ms (min {min(ms):.1f}, max {max(ms):.1f})")
            t0 = time.perf_counter()
            fill(check_target, a.runs)
            print(f"{kind}: filled {a.runs} runs x {SERIES} series in "
                  f"{time.perf_counter() - t0:.1f} s")
            s, last = time_check(check_target, a.rounds)
            rows.append({"case": f"history check {a.runs} runs x {SERIES} series, {kind}",
                         "contender": "httpbench", "metric": "time", "unit": "s", "values": s})
            print(f"{kind}: httpbench history check: median {statistics.median(s):.2f} s "
                  f"(min {min(s):.2f}, max {max(s):.2f}); {last}")
    finally:
        if pg is not None:
            pg[1]()
        shutil.rmtree(tmp, ignore_errors=True)
    notes.append(f"check: a fresh `python -m httpbench history check` (interpreter start-up, "
                 f"imports of numpy/scipy/Otava included) over the newest 200 runs of each of "
                 f"{SERIES} series; {STEPPED} series step +8 % 40 runs before the end")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "notes": notes, "machine": machine_metadata()}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
