"""Versions side by side: client specs in a compare run, their rows and deltas.

``compare(clients=["urllib3==1.26.20", "urllib3==2.2.3"])`` makes (or reuses)
one environment per versioned spec before anything is measured, runs every
spec's workers in its own interpreter with rounds interleaved like any other
clients, then labels each row with the version its worker imported and
compares every row with the baseline spec (:mod:`._delta`); the deltas are
stored in the results' metadata, where ``httpbench.report`` reads them.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any

from . import _machine
from ._delta import DELTA_METRICS, TEST, exact_delta, ratio_delta
from ._envs import Env, ensure_envs
from ._results import MeasureResult, ResultSet, load
from ._rows import record_row
from ._specs import ClientSpec, parse_spec

__all__ = ["METRICS", "against_file", "deltas", "load_baseline_file", "prepare", "relabel",
           "specs_of", "with_pythons"]

METRICS = DELTA_METRICS  # what the delta lines report


def specs_of(names: Sequence[str]) -> list[ClientSpec]:
    """The parsed specs when any name has a version or source; [] for plain names only."""
    if not any(ch in n for n in names for ch in "=@["):
        return []
    out = []
    for n in names:
        try:
            out.append(parse_spec(n))
        except ValueError:
            if any(ch in n for ch in "=@["):
                raise
            out.append(ClientSpec(n, n))  # e.g. a command client's free-form name
    return out


def with_pythons(specs: Sequence[ClientSpec], pythons: Sequence[str],
                 baseline: str | None = None) -> tuple[list[ClientSpec], str | None]:
    """Every versioned spec once per interpreter in ``pythons`` (``SPEC [PATH]``).

    Plain names keep running in this interpreter. A ``baseline`` naming a spec
    as written picks its first interpreter.
    """
    if not pythons:
        return list(specs), baseline
    if not any(s.isolated for s in specs):
        raise ValueError("python interpreters apply to versioned client specs "
                         "(NAME==VERSION, NAME@PATH); none was given")
    paths = []
    for py in pythons:
        exe = shutil.which(py) if os.sep not in py else py
        if not exe or not os.path.isfile(exe) or not os.access(exe, os.X_OK):
            raise ValueError(f"python {py}: no such executable")
        paths.append(os.path.abspath(exe))
    out: list[ClientSpec] = []
    for s in specs:
        if not s.isolated:
            out.append(s)
            continue
        for py in dict.fromkeys(paths):
            out.append(dataclasses.replace(s, text=f"{s.text} [{py}]", python=py))
            if baseline == s.text:
                baseline = out[-1].text
    return out, baseline


def prepare(specs: Sequence[ClientSpec], progress: Callable[[str], None] | None = None,
            baseline: str | None = None) -> dict[str, Env]:
    """Check the baseline and make every spec's environment (before any measurement)."""
    if baseline is not None and baseline not in {s.text for s in specs}:
        raise ValueError(f"baseline {baseline!r} is not one of the clients "
                         f"({', '.join(s.text for s in specs)})")
    return ensure_envs(specs, progress)


def _short(spec: ClientSpec) -> str:
    return spec.client.partition(":")[0].split(".")[0] if ":" in spec.client else spec.client


def relabel(rs: ResultSet, specs: Sequence[ClientSpec], envs: dict[str, Env],
            baseline: str | None = None) -> ResultSet:
    """Rows keyed by ``client version`` (as imported), spec facts and deltas in metadata."""
    md = dict(rs.metadata)
    loaded = dict(md.get("client_versions") or {})
    labels: dict[str, str] = {}
    used: set[str] = set()
    for s in specs:
        if not s.isolated:
            labels[s.text] = s.text
            used.add(s.text)
    for s in specs:
        if s.isolated:
            env = envs.get(s.text)
            # what the worker imported; else what the environment's probe found
            found = [env.versions.get(k) for k in (_short(s), s.client.partition(":")[0])] \
                if env else []
            ver = loaded.get(s.text) or next((f for f in found if f and f != "?"), None) \
                or s.version or "?"
            label = f"{_short(s)} {str(ver).split(' ')[0]}"
            if s.python:
                pv = env.python_version if env else "?"
                same = [t for t in specs if t.python and t.python != s.python
                        and (envs.get(t.text) and envs[t.text].python_version == pv)]
                label += f" (python {pv})" if pv != "?" and not same else f" ({s.python})"
            if label in used:
                label = f"{label} ({s.text})"
            labels[s.text] = label
            used.add(label)

    def lab(c: str | None) -> str | None:
        return labels.get(c, c) if c is not None else None

    results: dict[tuple[str, str, int], Any] = {}
    for (c, sc, rep), r in rs.results.items():
        if isinstance(r, MeasureResult):
            rmd = dict(r.metadata)
            rmd["client"] = lab(c)
            rmd["spec"] = c
            r = dataclasses.replace(r, metadata=rmd)
        results[(str(lab(c)), sc, rep)] = r
    notes = tuple(dataclasses.replace(n, client=lab(n.client)) for n in rs.notes)
    skipped: dict[str, str] = {}
    for what, why in rs.skipped.items():
        c, sep, sc = what.partition("/")
        skipped[f"{lab(c)}{sep}{sc}" if c in labels else what] = why
    md["client_versions"] = {lab(k): v for k, v in loaded.items()}
    if isinstance(md.get("clients"), list):
        md["clients"] = [lab(c) for c in md["clients"]]
    base = labels[baseline] if baseline in labels else labels[specs[0].text]
    info: dict[str, Any] = {}
    for s in specs:
        env = envs.get(s.text)
        info[labels[s.text]] = {
            "spec": s.text, "kind": s.kind, "client": s.client, "version": s.version,
            "python": s.python,
            "source": s.source, "env": env.path if env else None,
            "env_created": env.created if env else None,
            "env_seconds": round(env.seconds, 3) if env else None,
            "env_versions": env.versions if env else None,
        }
    md["versions"] = {"baseline": base, "specs": info, "interleaved": True, "test": TEST}
    out = ResultSet(results, md, notes, skipped)
    md["versions"]["deltas"] = {sc: deltas(out, sc) for sc in out.scenarios}
    return ResultSet(results, md, notes, skipped)


def _measured(rs: ResultSet, client: str, scenario: str) -> list[MeasureResult]:
    return [r for r in rs.repeats(client, scenario) if isinstance(r, MeasureResult)]


def _row_delta(b: Sequence[MeasureResult], cr: Sequence[MeasureResult]) -> dict[str, Any]:
    """Each metric's delta of rounds ``cr`` against baseline rounds ``b``."""
    row: dict[str, Any] = {}
    rows_b = [record_row("", "", 0, r) for r in b]
    rows_c = [record_row("", "", 0, r) for r in cr]
    for key, _, kind in METRICS:
        xa = [x[key] for x in rows_b]
        xb = [x[key] for x in rows_c]
        fn = ratio_delta if kind == "ratio" else exact_delta
        d = fn(xa, xb)
        if any(isinstance(x, float) and not math.isnan(x) for x in d.values()):
            row[key] = d
    return row


def deltas(rs: ResultSet, scenario: str) -> dict[str, dict[str, Any]]:
    """Per row (other than the baseline): each metric's delta against the baseline."""
    v = rs.metadata.get("versions") or {}
    base = v.get("baseline")
    b = _measured(rs, base, scenario) if base else []
    out: dict[str, dict[str, Any]] = {}
    if not b:
        return out
    for c in rs.clients:
        if c == base:
            continue
        cr = _measured(rs, c, scenario)
        if cr:
            out[c] = _row_delta(b, cr)
    return out


# ---------------------------------------------------------------- against a saved run


def load_baseline_file(path: str | os.PathLike[str], scenarios: Sequence[str]) -> ResultSet:
    """The saved ResultSet at ``path``; ValueError (one line) when it cannot serve as a baseline."""
    p = os.fspath(path)
    try:
        saved = load(p)
    except OSError as exc:
        raise ValueError(f"baseline file {p}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"baseline file: {exc}") from None
    if not isinstance(saved, ResultSet):
        raise ValueError(f"baseline file {p}: a {type(saved).__name__}, not the results of a "
                         "compare run")
    if scenarios and not set(scenarios) & set(saved.scenarios):
        raise ValueError(f"baseline file {p} has none of the scenarios "
                         f"{', '.join(scenarios)} (it has {', '.join(saved.scenarios) or 'none'})")
    return saved


def _saved_match(rs: ResultSet, saved: ResultSet, client: str) -> str | None:
    """The saved run's row that ``client`` is compared with: same label, same spec,
    the same adapter under another version, or the only row of each run."""
    have = saved.clients
    if client in have:
        return client
    spec = next((r.metadata.get("spec") for r in rs.results.values()
                 if isinstance(r, MeasureResult) and r.metadata.get("client") == client
                 and r.metadata.get("spec")), None)
    if spec in have:
        return spec
    stem = client.split(" ")[0]
    same = [c for c in have if c.split(" ")[0] == stem]
    if len(same) == 1:
        return same[0]
    return have[0] if len(have) == 1 and len(rs.clients) == 1 else None


def against_file(rs: ResultSet, saved: ResultSet, path: str | os.PathLike[str]) -> ResultSet:
    """``rs`` with ``metadata["baseline_file"]``: every row's deltas against the saved run.

    The saved rounds were measured at another time (not interleaved), so drift
    of the machine between the runs is part of each delta.
    """
    p = os.path.abspath(os.fspath(path))
    match = {c: _saved_match(rs, saved, c) for c in rs.clients}
    out: dict[str, dict[str, Any]] = {}
    for sc in rs.scenarios:
        if sc not in saved.scenarios:
            continue
        rows: dict[str, Any] = {}
        for c, sc_c in match.items():
            b = _measured(saved, sc_c, sc) if sc_c else []
            cr = _measured(rs, c, sc)
            if b and cr:
                rows[c] = _row_delta(b, cr)
        out[sc] = rows
    smd = saved.metadata
    info = {
        "path": p, "interleaved": False, "test": TEST, "matched": match,
        "missing_scenarios": [sc for sc in rs.scenarios if sc not in saved.scenarios],
        "saved_started_unix_ns": smd.get("started_unix_ns"),
        "deltas": out,
        # how much slower this run's machine was than the saved run's (speed indices)
        "machine_change": _machine.machine_change(smd, rs.metadata),
    }
    return rs.with_metadata(baseline_file=info)
