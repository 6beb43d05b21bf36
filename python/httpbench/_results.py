"""Immutable result records, their versioned JSON schema, and loading/saving: the
one import point for all of them.

The records live one kind per module (``_benchresult``, ``_measureresult``,
ResultSet here, their shared base in ``_record``); the file format in
``_resultfile`` and the JSON field codecs in ``_jsonfields``.

Records (all frozen dataclasses with ``__slots__``):

* :class:`BenchResult` - one run of the native load generator (``httpbench.bench``).
* :class:`MeasureResult` - one run of ``httpbench.measure`` / ``measure_async``.
* :class:`ResultSet` - a compare run: records keyed by ``(client, scenario, repeat)``
  plus run metadata, skipped clients and anomaly notes.

Units (one rule, everywhere): **every duration and latency is in nanoseconds**
(field names end in ``_ns``; histograms record ns), timestamps are Unix epoch
nanoseconds (``*_unix_ns``), sizes are bytes (``*_bytes``), rates are per second
(``*_per_s`` / ``rps``). Human-friendly formatting lives in ``httpbench._units``.

Histograms are ``httpbench.Histogram`` objects (duck-typed: ``encode()``,
``Histogram.decode(bytes)``, ``percentile(p)``, ``count``, ``min``, ``max``,
``mean``, ``stddev``, iteration over ``(value, count)``). In JSON they are
embedded in their compact binary encoding, base64 encoded, next to a few
informative summary numbers that are ignored on load.

Records are shallowly immutable: fields cannot be reassigned; treat the dicts
and histograms they hold as read-only. Files are JSON (optionally gzip when the
path ends in ``.gz``), never pickle.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._benchresult import BenchConfig, BenchResult, WorkerResult
from ._hist import decode_histogram, encode_histogram
from ._jsonfields import as_dict, as_int, jsonable, required
from ._measureresult import MeasureResult
from ._record import ALLOC_DOMAINS, DEFAULT_PERCENTILES, ERROR_TYPES, RecordBase
from ._resultfile import FILE_FORMAT, SCHEMA_VERSION, dumps, read_record, read_text_record, save

__all__ = [
    "SCHEMA_VERSION",
    "FILE_FORMAT",
    "ERROR_TYPES",
    "ALLOC_DOMAINS",
    "DEFAULT_PERCENTILES",
    "BenchConfig",
    "BenchResult",
    "WorkerResult",
    "MeasureResult",
    "Note",
    "ResultSet",
    "Result",
    "load",
    "loads",
    "save",
    "dumps",
    "result_from_dict",
    "encode_histogram",
    "decode_histogram",
]

Result = BenchResult | MeasureResult
_KINDS: dict[str, Any] = {"BenchResult": BenchResult, "MeasureResult": MeasureResult}


def result_from_dict(d: Mapping[str, Any]) -> Result:
    """Rebuild a BenchResult or MeasureResult from its ``to_dict()`` (by its ``kind``)."""
    if not isinstance(d, Mapping):
        raise ValueError(f"expected a result object, got {type(d).__name__}")
    kind = d.get("kind")
    cls = _KINDS.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown result kind {kind!r}; expected one of {sorted(_KINDS)}")
    return cls.from_dict(d)


# --------------------------------------------------------------------------
# ResultSet


@dataclass(frozen=True, slots=True)
class Note:
    """An anomaly or remark attached to a compare run.

    ``kind``: a short machine tag ("server-saturated", "new-connections",
    "nagle-40ms", "errors", "early-answer", "spread", "worker-failed", ...);
    ``message``: the human sentence; ``client``/``scenario``/``repeat``: what
    it concerns (None: the whole run); ``severity``: "info" | "warning" | "error".
    """

    kind: str
    message: str
    client: str | None = None
    scenario: str | None = None
    repeat: int | None = None
    severity: str = "warning"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "kind": self.kind, "message": self.message, "client": self.client,
            "scenario": self.scenario, "repeat": self.repeat, "severity": self.severity,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Note:
        """Inverse of :meth:`to_dict`."""
        d = as_dict(d, "Note")
        return cls(
            kind=str(required(d, "kind", "Note")),
            message=str(required(d, "message", "Note")),
            client=None if d.get("client") is None else str(d["client"]),
            scenario=None if d.get("scenario") is None else str(d["scenario"]),
            repeat=as_int(d.get("repeat"), "Note.repeat", optional=True),
            severity=str(d.get("severity", "warning")),
        )

    def __str__(self) -> str:
        where = "/".join(x for x in (self.client, self.scenario) if x)
        if self.repeat is not None:
            where += f" #{self.repeat}"
        return f"[{self.kind}] {where + ': ' if where else ''}{self.message}"


Key = tuple[str, str, int]


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ResultSet(RecordBase):
    """Records of a compare run keyed by ``(client, scenario, repeat)``.

    ``results``: mapping key -> BenchResult | MeasureResult (insertion order is
    kept: the order the runs happened); ``metadata``: run-wide facts (versions,
    CPU, kernel, server, n, repeat, command line); ``notes``: anomaly
    :class:`Note`\\ s; ``skipped``: client (or "client/scenario") -> reason,
    e.g. ``"pycurl": "not installed (pip install pycurl)"``.

    Build it in one go (``ResultSet(results={...})``) or incrementally with the
    non-mutating :meth:`with_result` / :meth:`with_note` / :meth:`with_skipped`.
    """

    KIND = "ResultSet"

    results: dict[Key, Result] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    notes: tuple[Note, ...] = ()
    skipped: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        res: dict[Key, Result] = {}
        for key, r in dict(self.results).items():
            if not (isinstance(key, tuple) and len(key) == 3):
                raise ValueError(f"ResultSet key must be (client, scenario, repeat), got {key!r}")
            client, scenario, repeat = key
            if not isinstance(r, (BenchResult, MeasureResult)):
                raise TypeError(f"ResultSet value for {key!r} is {type(r).__name__}, not a result")
            res[(str(client), str(scenario), int(repeat))] = r
        object.__setattr__(self, "results", res)
        object.__setattr__(self, "metadata", dict(self.metadata))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "skipped", {str(k): str(v) for k, v in dict(self.skipped).items()})

    # building (returns new sets; the record itself never changes)
    def with_result(self, client: str, scenario: str, repeat: int, result: Result) -> ResultSet:
        """A new set with ``result`` added (or replaced) under (client, scenario, repeat)."""
        res = dict(self.results)
        res[(client, scenario, repeat)] = result
        return ResultSet(res, self.metadata, self.notes, self.skipped)

    def with_note(self, note: Note) -> ResultSet:
        """A new set with ``note`` appended."""
        return ResultSet(self.results, self.metadata, (*self.notes, note), self.skipped)

    def with_skipped(self, what: str, reason: str) -> ResultSet:
        """A new set recording that ``what`` (a client, or "client/scenario") was skipped."""
        sk = dict(self.skipped)
        sk[what] = reason
        return ResultSet(self.results, self.metadata, self.notes, sk)

    def with_metadata(self, **kw: Any) -> ResultSet:
        """A new set with metadata updated from ``kw``."""
        md = dict(self.metadata)
        md.update(kw)
        return ResultSet(self.results, md, self.notes, self.skipped)

    # access
    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self) -> Iterator[tuple[Key, Result]]:
        return iter(self.results.items())

    def __getitem__(self, key: Key) -> Result:
        return self.results[key]

    def __contains__(self, key: object) -> bool:
        return key in self.results

    def keys(self) -> list[Key]:
        """All (client, scenario, repeat) keys in run order."""
        return list(self.results)

    @property
    def clients(self) -> list[str]:
        """Client names in first-seen order."""
        return list(dict.fromkeys(k[0] for k in self.results))

    @property
    def scenarios(self) -> list[str]:
        """Scenario names in first-seen order."""
        return list(dict.fromkeys(k[1] for k in self.results))

    def get(self, client: str, scenario: str, repeat: int = 0) -> Result | None:
        """The record of one run, or None."""
        return self.results.get((client, scenario, repeat))

    def repeats(self, client: str, scenario: str) -> list[Result]:
        """All repeats of (client, scenario), ordered by repeat index."""
        ks = sorted(k for k in self.results if k[0] == client and k[1] == scenario)
        return [self.results[k] for k in ks]

    def select(
        self, *, client: str | Sequence[str] | None = None,
        scenario: str | Sequence[str] | None = None,
    ) -> ResultSet:
        """A new set with only the given client(s)/scenario(s) (and their notes)."""
        def ok(v: str | None, want: str | Sequence[str] | None) -> bool:
            if want is None or v is None:
                return True
            return v == want if isinstance(want, str) else v in want

        res = {k: r for k, r in self.results.items() if ok(k[0], client) and ok(k[1], scenario)}
        notes = tuple(n for n in self.notes if ok(n.client, client) and ok(n.scenario, scenario))
        return ResultSet(res, self.metadata, notes, self.skipped)

    def __repr__(self) -> str:
        return (
            f"<ResultSet {len(self.results)} runs, clients={self.clients}, "
            f"scenarios={self.scenarios}, {len(self.notes)} notes>"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; results as a list of {client, scenario, repeat, result}."""
        return {
            "kind": self.KIND,
            "results": [
                {"client": c, "scenario": s, "repeat": i, "result": r.to_dict()}
                for (c, s, i), r in self.results.items()
            ],
            "metadata": jsonable(self.metadata),
            "notes": [n.to_dict() for n in self.notes],
            "skipped": dict(self.skipped),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ResultSet:
        """Inverse of :meth:`to_dict`; ValueError on malformed data."""
        w = cls.KIND
        d = cls._from_dict_doc(d)
        entries = d.get("results") or []
        if not isinstance(entries, list):
            raise ValueError(f"{w}.results: expected a list")
        res: dict[Key, Result] = {}
        for i, e in enumerate(entries):
            e = as_dict(e, f"{w}.results[{i}]")
            key = (
                str(required(e, "client", f"{w}.results[{i}]")),
                str(required(e, "scenario", f"{w}.results[{i}]")),
                as_int(e.get("repeat", 0), f"{w}.results[{i}].repeat"),
            )
            res[key] = result_from_dict(required(e, "result", f"{w}.results[{i}]"))
        notes = tuple(Note.from_dict(n) for n in (d.get("notes") or []))
        return cls(
            results=res,
            metadata=as_dict(d.get("metadata"), f"{w}.metadata"),
            notes=notes,
            skipped={str(k): str(v) for k, v in as_dict(d.get("skipped"), w).items()},
        )


_KINDS["ResultSet"] = ResultSet
AnyRecord = BenchResult | MeasureResult | ResultSet


def loads(text: str | bytes) -> AnyRecord:
    """Parse the file form (see :func:`dumps`); ValueError on anything else."""
    return result_from_dict(read_text_record(text))


def load(path: str | os.PathLike[str]) -> AnyRecord:
    """Read a file written by :func:`save` (BenchResult, MeasureResult or ResultSet).

    Raises ValueError for a file that is not an httpbench results file or has a
    schema version this httpbench cannot read or migrate.
    """
    return result_from_dict(read_record(path))
