"""The history store: every recorded run, in one SQLite file or a PostgreSQL database.

One schema for both, versioned: ``schema_version`` holds the version the store was
last migrated to, and :data:`MIGRATIONS` brings an older store forward inside the
transaction that opens it. A store written by a newer httpbench is refused
before anything is written. Tables:

* ``machines``: one row per machine fingerprint (CPU model, cores, kernel, Python,
  OpenSSL), the key that keeps series of different machines apart;
* ``runs``: one row per recorded run (time, git state, host, machine, speed index,
  wake-up calibration, placement, versions, the rest as JSON);
* ``series``: (subject, scenario, metric, machine), a subject being a client or a test;
* ``points``: one figure of one series in one run, with its CI, sample count and notes.

A run is written in one transaction (SQLite: ``BEGIN IMMEDIATE`` with a busy
timeout; PostgreSQL: series created with ``ON CONFLICT DO NOTHING``), so any
number of processes can record at once and none loses a run. Every database
error comes out as :class:`HistoryError` naming the store.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["ENV", "SCHEMA_VERSION", "HistoryError", "NewRun", "Point", "Store", "display_name",
           "is_url", "open_store"]

ENV = "HTTPBENCH_HISTORY"
SCHEMA_VERSION = 1
_BUSY_S = 60.0  # how long a writer waits for another one's transaction (SQLite)
_PG_LOCK = 0x68747462  # advisory lock id held while a PostgreSQL store is migrated


class HistoryError(Exception):
    """A history store that cannot be opened, read or written; the message names it."""

    def __init__(self, store: str, message: str) -> None:
        super().__init__(f"history {store}: {message}")
        self.store = store


class Point(NamedTuple):
    """One figure of a run: the series it belongs to and its evidence (a tuple: a compare
    run makes ~2,000 of them, and a frozen dataclass costs 5x more to build)."""

    subject: str  # client name, test id, or load-test label
    scenario: str
    metric: str
    value: float
    ci_low: float | None = None
    ci_high: float | None = None
    samples: int | None = None  # repeats (compare) or calls (a single measurement)
    notes: str = ""


@dataclass
class NewRun:
    """A run about to be recorded."""

    source: str  # "compare", "bench" or "pytest"
    machine: dict[str, Any]  # fingerprint() of the machine, with its "fingerprint" key
    points: list[Point]
    label: str = ""
    started_unix_ns: int = 0
    git: dict[str, Any] | None = None
    host: str = ""
    speed_ns: float | None = None
    wakeup: dict[str, Any] | None = None
    placement: dict[str, Any] | None = None
    versions: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


def _ddl(pg: bool) -> list[str]:
    pk = "BIGSERIAL PRIMARY KEY" if pg else "INTEGER PRIMARY KEY AUTOINCREMENT"
    real = "DOUBLE PRECISION" if pg else "REAL"
    big = "BIGINT"
    return [
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
        "CREATE TABLE IF NOT EXISTS machines (fingerprint TEXT PRIMARY KEY, cpu_model TEXT, "
        "cores INTEGER, kernel TEXT, python TEXT, openssl TEXT)",
        f"CREATE TABLE IF NOT EXISTS runs (id {pk}, recorded_unix_ns {big} NOT NULL, "
        f"started_unix_ns {big}, source TEXT NOT NULL, label TEXT, commit_sha TEXT, "
        "branch TEXT, dirty INTEGER, host TEXT, machine TEXT NOT NULL "
        f"REFERENCES machines(fingerprint), speed_ns {real}, wakeup TEXT, placement TEXT, "
        "versions TEXT, meta TEXT)",
        "CREATE INDEX IF NOT EXISTS runs_commit ON runs (commit_sha)",
        f"CREATE TABLE IF NOT EXISTS series (id {pk}, subject TEXT NOT NULL, "
        "scenario TEXT NOT NULL, metric TEXT NOT NULL, machine TEXT NOT NULL, "
        "UNIQUE (subject, scenario, metric, machine))",
        # no foreign keys on points: a run's points are written with it in one transaction,
        # and PostgreSQL's per-row key checks cost ~20 ms per compare run (1,800 points)
        f"CREATE TABLE IF NOT EXISTS points (series_id {big} NOT NULL, "
        f"run_id {big} NOT NULL, value {real} NOT NULL, "
        f"ci_low {real}, ci_high {real}, samples INTEGER, notes TEXT, "
        "PRIMARY KEY (series_id, run_id))",
        "CREATE INDEX IF NOT EXISTS points_run ON points (run_id)",
    ]


# version -> statements bringing a store of version - 1 to it (both dialects)
MIGRATIONS: dict[int, Any] = {1: _ddl}

RUN_COLUMNS = ("id", "recorded_unix_ns", "started_unix_ns", "source", "label", "commit_sha",
               "branch", "dirty", "host", "machine", "speed_ns", "wakeup", "placement",
               "versions", "meta")
_JSON_COLUMNS = ("wakeup", "placement", "versions", "meta")


def display_name(target: str) -> str:
    """The store's name for messages: a URL without its password."""
    if "://" not in target:
        return target
    u = urllib.parse.urlsplit(target)
    if u.password is None:
        return target
    host = u.hostname or ""
    netloc = f"{u.username}:***@{host}" + (f":{u.port}" if u.port else "")
    return urllib.parse.urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment))


def is_url(target: str) -> bool:
    return target.startswith(("postgresql://", "postgres://"))


class Store:
    """An open history store (use :func:`open_store`)."""

    def __init__(self, target: str, create: bool = True) -> None:
        self.target = target
        self.name = display_name(target)
        self.pg = is_url(target)
        self._db: Any = None
        if self.pg:
            self._open_pg()
        else:
            self._open_sqlite(create)
        try:
            self._migrate()
        except BaseException:
            self.close()
            raise
        if not self.pg and self._db is not None:
            # WAL: a writer does not block readers and a run costs one sync, not three;
            # best effort (a read-only copy stays readable in its journal mode)
            db: Any = self._db
            with contextlib.suppress(sqlite3.Error):
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")

    # --- opening ---------------------------------------------------------------------------
    def _open_sqlite(self, create: bool) -> None:
        path = self.target.removeprefix("sqlite:///") if self.target.startswith(
            "sqlite:///") else self.target
        if os.path.isdir(path):
            raise HistoryError(self.name, "is a directory, not a history file")
        if not os.path.exists(path):
            if not create:
                raise HistoryError(self.name, "no such history file")
            parent = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(parent):
                raise HistoryError(self.name, f"directory {parent} does not exist")
        try:
            self._db = sqlite3.connect(path, timeout=_BUSY_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise HistoryError(self.name, f"cannot open: {exc}") from None

    def _open_pg(self) -> None:
        try:
            import psycopg
        except ImportError:
            raise HistoryError(self.name, "a PostgreSQL store needs psycopg "
                               "(pip install 'httpbench[history-pg]')") from None
        try:
            self._db = psycopg.connect(self.target, connect_timeout=10, autocommit=True)
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise HistoryError(self.name, f"cannot connect: {first}") from None

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(Exception):
                self._db.close()
            self._db = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- SQL plumbing ----------------------------------------------------------------------
    def _errors(self) -> tuple[type[BaseException], ...]:
        if self.pg:
            import psycopg

            return (psycopg.Error,)
        return (sqlite3.Error,)

    def _sql(self, q: str) -> str:
        return q.replace("?", "%s") if self.pg else q

    @contextlib.contextmanager
    def _tx(self, write: bool = True) -> Iterator[Any]:
        """A cursor inside one transaction; any database error -> HistoryError, rolled back."""
        if self._db is None:
            raise HistoryError(self.name, "the store is closed")
        errors = self._errors()
        cur = None
        try:
            cur = self._db.cursor()
            if self.pg:
                cur.execute("BEGIN")
            else:
                cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            yield cur
            cur.execute("COMMIT")
        except errors as exc:
            with contextlib.suppress(Exception):
                if cur is not None:
                    cur.execute("ROLLBACK")
            raise HistoryError(self.name, self._reason(exc)) from None
        except BaseException:
            with contextlib.suppress(Exception):
                if cur is not None:
                    cur.execute("ROLLBACK")
            raise

    def _reason(self, exc: BaseException) -> str:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if not self.pg and ("not a database" in text or "malformed" in text):
            return f"not a readable SQLite history ({text}); the file was left as it is"
        return text

    def _exec(self, cur: Any, q: str, args: Sequence[Any] = ()) -> Any:
        cur.execute(self._sql(q), tuple(args))
        return cur

    # --- schema ----------------------------------------------------------------------------
    def _version(self, cur: Any) -> int | None:
        """The stored schema version; None for an empty database; error for a foreign one."""
        if self.pg:
            cur.execute("SELECT table_name FROM information_schema.tables "
                        "WHERE table_schema = current_schema()")
        else:
            cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        tables = {r[0] for r in cur.fetchall()} - {"sqlite_sequence"}
        if not tables:
            return None
        if "schema_version" not in tables:
            raise HistoryError(self.name, "holds tables but is not an httpbench history "
                               "(no schema_version table); left as it is")
        cur.execute("SELECT version FROM schema_version")
        rows = cur.fetchall()
        if len(rows) != 1 or not isinstance(rows[0][0], int):
            raise HistoryError(self.name, "its schema_version table is damaged; left as it is")
        return int(rows[0][0])

    def _migrate(self) -> None:
        with self._tx(write=False) as cur:
            version = self._version(cur)
        if version is not None and version > SCHEMA_VERSION:
            raise HistoryError(
                self.name, f"was written by a newer httpbench (schema {version}; this one "
                f"reads up to {SCHEMA_VERSION}); upgrade httpbench to use it. Nothing was written")
        if version == SCHEMA_VERSION:
            return
        with self._tx() as cur:
            if self.pg:  # two processes creating one store: one migrates, the other waits
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_LOCK,))
            version = self._version(cur) or 0
            if version > SCHEMA_VERSION:
                raise HistoryError(self.name, f"was written by a newer httpbench (schema "
                                   f"{version}); nothing was written")
            for v in range(version + 1, SCHEMA_VERSION + 1):
                for stmt in MIGRATIONS[v](self.pg):
                    cur.execute(stmt)
            cur.execute("DELETE FROM schema_version")
            self._exec(cur, "INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))

    def schema_version(self) -> int:
        with self._tx(write=False) as cur:
            return self._version(cur) or 0

    # --- writing ---------------------------------------------------------------------------
    def record(self, run: NewRun) -> int:
        """Write ``run`` with all its points in one transaction; returns its id."""
        m = run.machine
        fp = str(m["fingerprint"])
        git = run.git or {}
        js = {k: json.dumps(getattr(run, k), sort_keys=True, default=str, allow_nan=False)
              if getattr(run, k) is not None else None for k in _JSON_COLUMNS}
        now = time.time_ns()
        with self._tx() as cur:
            self._exec(cur, "INSERT INTO machines (fingerprint, cpu_model, cores, kernel, python, "
                       "openssl) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                       (fp, m.get("cpu_model"), m.get("cores"), m.get("kernel"),
                        m.get("python"), m.get("openssl")))
            args = (now, run.started_unix_ns or now, run.source, run.label, git.get("commit"),
                    git.get("branch"), None if not git else int(bool(git.get("dirty"))),
                    run.host, fp, run.speed_ns, js["wakeup"], js["placement"], js["versions"],
                    js["meta"])
            q = ("INSERT INTO runs (recorded_unix_ns, started_unix_ns, source, label, commit_sha, "
                 "branch, dirty, host, machine, speed_ns, wakeup, placement, versions, meta) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
            if self.pg:
                self._exec(cur, q + " RETURNING id", args)
                run_id = int(cur.fetchone()[0])
            else:
                self._exec(cur, q, args)
                run_id = int(cur.lastrowid)
            ids = self._series_ids(cur, fp, {(p.subject, p.scenario, p.metric)
                                             for p in run.points})
            rows = [(ids[(p.subject, p.scenario, p.metric)], run_id, float(p.value), p.ci_low,
                     p.ci_high, p.samples, p.notes or None) for p in run.points]
            cols = "series_id, run_id, value, ci_low, ci_high, samples, notes"
            if self.pg:  # COPY: one round trip for every point
                with cur.copy(f"COPY points ({cols}) FROM STDIN") as cp:
                    for row in rows:
                        cp.write_row(row)
            else:
                cur.executemany(f"INSERT INTO points ({cols}) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        return run_id

    def _series_ids(self, cur: Any, machine: str,
                    keys: set[tuple[str, str, str]]) -> dict[tuple[str, str, str], int]:
        def known() -> dict[tuple[str, str, str], int]:
            self._exec(cur, "SELECT id, subject, scenario, metric FROM series WHERE machine = ?",
                       (machine,))
            return {(s, sc, m): int(i) for i, s, sc, m in cur.fetchall()}

        ids = known()
        missing = [k for k in keys if k not in ids]
        if missing:
            cur.executemany(self._sql("INSERT INTO series (subject, scenario, metric, machine) "
                                      "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"),
                            [(*k, machine) for k in sorted(missing)])
            ids = known()
        return ids

    def prune(self, *, keep_last: int | None = None, before_unix_ns: int | None = None) -> int:
        """Delete runs (and their points) older than ``before_unix_ns`` or beyond the newest
        ``keep_last``; returns how many runs were deleted."""
        if keep_last is None and before_unix_ns is None:
            raise ValueError("prune needs keep_last or before_unix_ns")
        with self._tx() as cur:
            conds, args = [], []
            if before_unix_ns is not None:
                conds.append("recorded_unix_ns < ?")
                args.append(int(before_unix_ns))
            if keep_last is not None:
                conds.append("id NOT IN (SELECT id FROM runs ORDER BY id DESC LIMIT ?)")
                args.append(int(keep_last))
            where = " OR ".join(conds)  # both limits apply
            self._exec(cur, f"SELECT id FROM runs WHERE {where}", args)
            gone = [int(r[0]) for r in cur.fetchall()]
            for i in range(0, len(gone), 500):
                chunk = gone[i:i + 500]
                marks = ", ".join("?" * len(chunk))
                self._exec(cur, f"DELETE FROM points WHERE run_id IN ({marks})", chunk)
                self._exec(cur, f"DELETE FROM runs WHERE id IN ({marks})", chunk)
            cur.execute("DELETE FROM series WHERE NOT EXISTS "
                        "(SELECT 1 FROM points WHERE points.series_id = series.id)")
        return len(gone)

    # --- reading ---------------------------------------------------------------------------
    def _run_dicts(self, cur: Any) -> list[dict[str, Any]]:
        out = []
        for row in cur.fetchall():
            d = dict(zip(RUN_COLUMNS, row, strict=True))
            for k in _JSON_COLUMNS:
                d[k] = json.loads(d[k]) if d[k] else None
            d["dirty"] = None if d["dirty"] is None else bool(d["dirty"])
            out.append(d)
        return out

    def runs(self, *, ids: Sequence[int] | None = None, last: int | None = None,
             source: str | None = None, branch: str | None = None, commit: str | None = None,
             machine: str | None = None, since_unix_ns: int | None = None
             ) -> list[dict[str, Any]]:
        """Runs as dicts (:data:`RUN_COLUMNS`, JSON columns decoded), oldest first."""
        conds: list[str] = []
        args: list[Any] = []
        for col, val in (("source", source), ("branch", branch), ("machine", machine)):
            if val is not None:
                conds.append(f"{col} = ?")
                args.append(val)
        if commit is not None:
            conds.append("commit_sha LIKE ?")
            args.append(commit + "%")
        if since_unix_ns is not None:
            conds.append("recorded_unix_ns >= ?")
            args.append(int(since_unix_ns))
        out: list[dict[str, Any]] = []
        with self._tx(write=False) as cur:
            if ids is not None:
                wanted = sorted({int(i) for i in ids})
                for i in range(0, len(wanted), 500):
                    chunk = wanted[i:i + 500]
                    q = (f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE id IN "
                         f"({', '.join('?' * len(chunk))}) ORDER BY id")
                    out += self._run_dicts(self._exec(cur, q, chunk))
                return out
            where = f" WHERE {' AND '.join(conds)}" if conds else ""
            q = f"SELECT {', '.join(RUN_COLUMNS)} FROM runs{where} ORDER BY id DESC"
            if last is not None:
                q += " LIMIT ?"
                args.append(int(last))
            out = self._run_dicts(self._exec(cur, q, args))
        return out[::-1]

    def machines(self) -> dict[str, dict[str, Any]]:
        with self._tx(write=False) as cur:
            cur.execute("SELECT fingerprint, cpu_model, cores, kernel, python, openssl "
                        "FROM machines")
            return {r[0]: dict(zip(("fingerprint", "cpu_model", "cores", "kernel", "python",
                                    "openssl"), r, strict=True)) for r in cur.fetchall()}

    def series(self, *, subject: str | None = None, scenario: str | None = None,
               metric: str | None = None, machine: str | None = None
               ) -> list[tuple[int, str, str, str, str]]:
        """(id, subject, scenario, metric, machine) of the series matching every filter."""
        conds, args = [], []
        for col, val in (("subject", subject), ("scenario", scenario), ("metric", metric),
                         ("machine", machine)):
            if val is not None:
                conds.append(f"{col} = ?")
                args.append(val)
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        with self._tx(write=False) as cur:
            self._exec(cur, "SELECT id, subject, scenario, metric, machine FROM series"
                       f"{where} ORDER BY subject, scenario, metric, machine", args)
            return [(int(r[0]), r[1], r[2], r[3], r[4]) for r in cur.fetchall()]

    def points(self, series_ids: Sequence[int], last: int | None = None
               ) -> dict[int, list[tuple[int, float, float | None, float | None, int | None,
                                         str]]]:
        """Per series: (run_id, value, ci_low, ci_high, samples, notes), oldest first; the
        newest ``last`` of each when given."""
        out: dict[int, list[Any]] = {}
        with self._tx(write=False) as cur:
            for sid in series_ids:
                q = ("SELECT run_id, value, ci_low, ci_high, samples, notes FROM points "
                     "WHERE series_id = ? ORDER BY run_id DESC")
                args: list[Any] = [int(sid)]
                if last is not None:
                    q += " LIMIT ?"
                    args.append(int(last))
                rows = self._exec(cur, q, args).fetchall()
                out[int(sid)] = [(int(r[0]), float(r[1]), r[2], r[3], r[4], r[5] or "")
                                 for r in reversed(rows)]
        return out

    def count_runs(self) -> int:
        with self._tx(write=False) as cur:
            cur.execute("SELECT COUNT(*) FROM runs")
            return int(cur.fetchone()[0])


def open_store(target: str | os.PathLike[str] | None = None, create: bool = True) -> Store:
    """Open the store at a path or ``postgresql://`` URL (default: ``$HTTPBENCH_HISTORY``).

    ``create=False`` refuses a SQLite path that does not exist yet (reading commands)."""
    if target is None:
        target = os.environ.get(ENV) or None
        if target is None:
            raise HistoryError("(none)", f"no store given: pass --history PATH_OR_URL or set {ENV}")
    text = os.fspath(target)
    if not text.strip():
        raise HistoryError("(none)", "empty store name")
    return Store(text, create=create)
