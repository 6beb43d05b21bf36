"""The results file: a versioned JSON envelope around a record's ``to_dict()``,
migrations from older schema versions, and atomic (optionally gzip) writes.

This module knows records only as objects with ``to_dict()`` and documents as
dicts; turning a loaded dict back into a record is ``_results.load``'s job.
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from ._jsonfields import required

__all__ = ["FILE_FORMAT", "SCHEMA_VERSION", "dumps", "read_record", "read_text_record", "save"]

# Schema of the JSON files (and of to_dict()). Bump on any incompatible change
# and add a migration in _MIGRATIONS from the previous version.
# History:
#   1 (httpbench 0.1.0): first schema - BenchResult, MeasureResult, ResultSet;
#     histograms as base64 of Histogram.encode(); all times in ns.
#   2: one machine-metadata collector for every kind of result (httpbench._metadata):
#     measure()'s "cpu_count" became "cpus" (usable CPUs) and its "kernel" gained the
#     system name ("Linux 6.1.0"), as compare runs had; a compare worker's
#     "python_impl" became "python_implementation".
#   3: deterministic counts - MeasureResult gained instructions_per_call,
#     instructions_by_call, syscalls_per_call (by name) and syscalls_by_call;
#     version-2 files load with them absent (None).
#   4: "cpus" is a count on every surface: a compare worker's list of the CPUs it
#     may run on moved to "affinity" and its "cpus" became that list's length.
#   5: the version deltas of a compare run (metadata "versions" and "baseline_file",
#     "deltas") are keyed by the DataFrame's column names ("cpu" became
#     "cpu_ns_per_request", "allocs" "allocs_per_request", ...).
SCHEMA_VERSION = 5
FILE_FORMAT = "httpbench-results"


def _migrate(doc: dict[str, Any]) -> dict[str, Any]:
    """Bring a file document up to SCHEMA_VERSION or raise a clear ValueError."""
    v = doc.get("schema_version")
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"not an httpbench results file: schema_version is {v!r}")
    if v > SCHEMA_VERSION:
        raise ValueError(
            f"results file has schema version {v}, newer than this httpbench supports "
            f"({SCHEMA_VERSION}); upgrade httpbench to read it"
        )
    while v < SCHEMA_VERSION:
        step = _MIGRATIONS.get(v)
        if step is None:
            raise ValueError(
                f"results file has schema version {v}, which this httpbench cannot migrate "
                f"(supported: {sorted(_MIGRATIONS) + [SCHEMA_VERSION]})"
            )
        doc = step(doc)
        v = doc["schema_version"]
    return doc


def _machine_keys_v2(md: Any) -> None:
    """Rename a version-1 metadata dict's machine keys in place to the version-2 ones."""
    if not isinstance(md, dict):
        return
    if "cpu_count" in md:
        md.setdefault("cpus", md.pop("cpu_count"))
    kernel, plat = md.get("kernel"), md.get("platform")
    if isinstance(kernel, str) and " " not in kernel and isinstance(plat, str) and "-" in plat:
        md["kernel"] = f"{plat.split('-', 1)[0]} {kernel}"
    worker = md.get("worker")
    if isinstance(worker, dict) and "python_impl" in worker:
        worker.setdefault("python_implementation", worker.pop("python_impl"))


def _v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    rec = doc.get("record")
    if isinstance(rec, dict):
        _machine_keys_v2(rec.get("metadata"))
        entries = rec.get("results") if rec.get("kind") == "ResultSet" else None
        for e in entries if isinstance(entries, list) else ():
            if isinstance(e, dict) and isinstance(e.get("result"), dict):
                _machine_keys_v2(e["result"].get("metadata"))
    doc["schema_version"] = 2
    return doc


# schema version N -> function turning a version-N document into version N+1.
def _v2_to_v3(doc: dict[str, Any]) -> dict[str, Any]:
    # Only fields were added; from_dict fills absent ones with None.
    doc = dict(doc)
    doc["schema_version"] = 3
    return doc


def _each_metadata(doc: dict[str, Any]) -> Iterator[Any]:
    """The metadata dicts of a document's record (and of a ResultSet's entries)."""
    rec = doc.get("record")
    if isinstance(rec, dict):
        yield rec.get("metadata")
        entries = rec.get("results") if rec.get("kind") == "ResultSet" else None
        for e in entries if isinstance(entries, list) else ():
            if isinstance(e, dict) and isinstance(e.get("result"), dict):
                yield e["result"].get("metadata")


def _v3_to_v4(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    for md in _each_metadata(doc):
        worker = md.get("worker") if isinstance(md, dict) else None
        if isinstance(worker, dict) and isinstance(worker.get("cpus"), list):
            worker["affinity"] = worker.pop("cpus")
            worker["cpus"] = len(worker["affinity"])
    doc["schema_version"] = 4
    return doc


# version-4 delta keys -> the row columns they are now named by
_DELTA_KEYS_V5 = {"cpu": "cpu_ns_per_request", "p50": "p50_ns", "rps": "rps",
                  "allocs": "allocs_per_request", "native_allocs": "native_allocs_per_request",
                  "gc": "gc_per_10k", "rss": "peak_rss_bytes"}


def _v4_to_v5(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    for md in _each_metadata(doc):
        for part in ("versions", "baseline_file"):
            sub = md.get(part) if isinstance(md, dict) else None
            ds = sub.get("deltas") if isinstance(sub, dict) else None
            for rows in ds.values() if isinstance(ds, dict) else ():
                for client, row in (rows.items() if isinstance(rows, dict) else ()):
                    if isinstance(row, dict):
                        rows[client] = {_DELTA_KEYS_V5.get(k, k): v for k, v in row.items()}
    doc["schema_version"] = 5
    return doc


_MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5}



def dumps(record: Any, indent: int | None = None) -> str:
    """The file form of a record as a JSON string."""
    from ._version import __version__

    doc = {
        "format": FILE_FORMAT,
        "schema_version": SCHEMA_VERSION,
        "httpbench_version": __version__,
        "saved_unix_ns": time.time_ns(),
        "record": record.to_dict(),
    }
    return json.dumps(doc, indent=indent, allow_nan=False, ensure_ascii=False)



def save(record: Any, path: str | os.PathLike[str]) -> None:
    """Write ``record`` to ``path`` as a versioned JSON document (gzip if it ends in .gz).

    The write goes to a temporary file renamed into place, so a crash never
    leaves a truncated results file.
    """
    text = dumps(record, indent=1)
    p = os.fspath(path)
    tmp = f"{p}.tmp{os.getpid()}"
    try:
        if p.endswith(".gz"):
            with gzip.open(tmp, "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
        os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)



def read_text_record(text: str | bytes) -> dict[str, Any]:
    """The record dict of a file's text, migrated to SCHEMA_VERSION; ValueError otherwise."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not an httpbench results file: invalid JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FILE_FORMAT:
        raise ValueError(f"not an httpbench results file (no \"format\": \"{FILE_FORMAT}\")")
    doc = _migrate(doc)
    return required(doc, "record", "results file")


def read_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The record dict of a file written by :func:`save` (gzip or not), migrated."""
    p = os.fspath(path)
    with open(p, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.GzipFile(fileobj=io.BytesIO(raw)).read()
    try:
        return read_text_record(raw)
    except ValueError as exc:
        raise ValueError(f"{p}: {exc}") from None
