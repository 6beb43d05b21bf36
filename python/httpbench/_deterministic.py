"""Exact per-call costs from a child process: instructions (callgrind) and syscalls (strace).

Both runs execute the same C loop (``_core._det_loop``) in a fresh interpreter:
warm-up calls first, unobserved, then every measured call alone in a window.

* Instructions: the child runs under ``valgrind --tool=callgrind`` with
  instrumentation and collection off at start; the loop's callgrind client
  requests (compiled into ``_core`` when ``valgrind/callgrind.h`` was found at
  build time) zero the counters, switch collection on for exactly one call,
  off again, and dump one part per call (``--combine-dumps``, one file). The
  file's per-part totals are the per-call distribution; its call records give
  inclusive cost per function. Callgrind serialises threads and counts user
  space only: no kernel time, no I/O waits, no cache or branch effects.
* Syscalls: the child runs under ``strace -f`` without valgrind. The loop
  writes a marker before each call (``write(-1, "httpbench:det:...")``, which
  fails with EBADF and changes nothing); the trace between two markers is one
  call, counted by name for the calling thread. strace sees every syscall
  entry (failed ones too); vDSO calls (``clock_gettime``...) are not syscalls
  and are not counted. A thread or process created inside the window is an
  error: its work would not be attributed to the call.

The callable reaches the child by pickle: a module-level function, a
``functools.partial`` of one, an instance of a module-level class, or a
``"module:function"`` string. The child gets ``PYTHONHASHSEED=0`` and this
process's ``sys.path`` so hashing, and so dict probing, repeat exactly.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DetCounts",
    "ToolMissing",
    "count_instructions",
    "count_syscalls",
    "parse_callgrind",
    "parse_strace",
    "preflight",
    "require_tool",
    "resolve_callable",
    "scaled_timeout",
]

# Debian packages that ship each tool.
_PACKAGES = {"valgrind": "valgrind", "callgrind_annotate": "valgrind", "strace": "strace"}
_MARK = "httpbench:det:"
# Valgrind runs Python about 50x slower; a child's deadline is scaled by this.
SLOWDOWN = 50.0
# Interpreter start-up and imports under valgrind, and the margin on the scaled calls.
_STARTUP_S = 120.0
_MARGIN = 4.0


def scaled_timeout(per_call_s: float, calls: int) -> float:
    """A counting child's overall deadline: ``calls`` calls of ``per_call_s``
    seconds each (as timed natively) slowed down ``SLOWDOWN`` times, with a
    margin, plus interpreter start-up under valgrind."""
    per_call_s = max(float(per_call_s), 1e-4)
    return _STARTUP_S + _MARGIN * SLOWDOWN * per_call_s * max(int(calls), 1)


class ToolMissing(RuntimeError):
    """valgrind or strace is not installed (the message names the Debian package)."""


def require_tool(name: str) -> str:
    """The path of ``name`` on PATH, or ToolMissing naming the package to install."""
    path = shutil.which(name)
    if path is None:
        pkg = _PACKAGES.get(name, name)
        raise ToolMissing(f"{name} not found on PATH: deterministic counts need it; install "
                          f"the Debian package {pkg!r} (apt-get install {pkg})")
    return path


@dataclass
class DetCounts:
    """Per-call figures of one child run (only the fields its tool measures are set)."""

    calls: int = 0
    instructions: list[int] = field(default_factory=list)  # per call
    functions: dict[str, tuple[float, float]] = field(default_factory=dict)  # incl, self / call
    syscalls: list[Counter] = field(default_factory=list)  # per call, by name
    other_threads: Counter = field(default_factory=Counter)  # whole window
    callgrind_file: str | None = None


# --------------------------------------------------------------------------
# getting the callable to the child


def resolve_callable(spec: str) -> Callable[..., Any]:
    """``"package.module:qualified.name"`` -> the object it names."""
    import importlib

    mod, sep, qual = spec.partition(":")
    if not sep or not mod or not qual:
        raise ValueError(f"expected 'module:function', got {spec!r}")
    obj: Any = importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{spec!r} is not callable")
    return obj


def _payload(fn: Any, args: Sequence[Any]) -> bytes:
    if isinstance(fn, str):
        resolve_callable(fn)  # fail here, with this process's traceback
    elif getattr(fn, "__module__", None) == "__main__":
        raise TypeError("instructions/syscalls run fn in a child process, which cannot import "
                        "__main__: define fn in an importable module or pass 'module:function'")
    try:
        return pickle.dumps((fn, tuple(args)), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:
        raise TypeError(
            "instructions/syscalls run fn in a child process: fn and args must be picklable "
            "(a module-level function, a functools.partial of one, an instance of a "
            f"module-level class) or fn a 'module:function' string; {e}") from e


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "0"
    paths = [p if p else os.getcwd() for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if os.path.isdir(p))
    env.pop("LD_PRELOAD", None)  # a preloaded counter would be counted too
    return env


def _child(spec_path: str) -> None:
    """Entry point in the child: load the payload, run the window loop."""
    from . import _core

    with open(spec_path, "rb") as f:
        spec = pickle.load(f)
    fn, args = pickle.loads(spec["payload"])
    if isinstance(fn, str):
        fn = resolve_callable(fn)
    tasks = len(os.listdir("/proc/self/task"))
    calls = _core._det_loop(fn, args, spec["n"], spec["warmup"], spec["per_call"])
    grown = len(os.listdir("/proc/self/task")) - tasks
    with open(spec["out"], "w") as f:
        f.write(f"{calls} {grown}\n")


def _run_child(prefix: list[str], fn: Any, args: Sequence[Any], n: int, warmup: int,
               workdir: str, timeout: float | None, per_call: bool = True) -> int:
    out = os.path.join(workdir, "child.out")
    spec = os.path.join(workdir, "spec.pickle")
    with open(spec, "wb") as f:
        pickle.dump({"payload": _payload(fn, args), "n": int(n), "warmup": int(warmup),
                     "out": out, "per_call": bool(per_call)}, f)
    cmd = [*prefix, sys.executable, "-c",
           "import sys; from httpbench._deterministic import _child; _child(sys.argv[1])", spec]
    # A session of its own: on timeout the whole group goes (strace's tracee
    # would otherwise be detached and left running).
    p = subprocess.Popen(cmd, env=_child_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as e:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        tool = os.path.basename(prefix[0])
        raise TimeoutError(
            f"the measuring child ({tool}) did not finish {n} calls (+{warmup} warm-up) in "
            f"{timeout:.0f} s and was killed: the deadline is scaled for valgrind's ~"
            f"{SLOWDOWN:.0f}x slowdown (start-up {_STARTUP_S:.0f} s + {_MARGIN:.0f} x "
            f"{SLOWDOWN:.0f} x the natively timed call); a call that hangs, or waits on "
            "something that never answers, ends here") from e
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    if p.returncode != 0 or not os.path.exists(out):
        tail = "\n".join(stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"the measuring child ({os.path.basename(prefix[0])}) failed with "
                           f"exit status {p.returncode}:\n{tail}")
    with open(out) as f:
        calls, grown = (int(x) for x in f.read().split())
    if grown > 0:
        raise RuntimeError(f"fn left {grown} new thread(s) running after the measured calls: "
                           "instruction counts are per process, so threads are not allowed")
    return calls


def preflight(fn: Any, args: Sequence[Any], *, instructions: bool, syscalls: bool) -> None:
    """Fail before any measuring: a missing tool, an unpicklable callable."""
    if instructions:
        require_tool("valgrind")
        _callgrind_check()
    if syscalls:
        require_tool("strace")
    if instructions or syscalls:
        _payload(fn, args)


# --------------------------------------------------------------------------
# callgrind


def _callgrind_check() -> None:
    from . import _core

    if not _core._callgrind_built():
        raise RuntimeError(
            "httpbench._core was built without valgrind/callgrind.h, so it cannot switch "
            "callgrind's collection on around the measured calls; install the Debian package "
            "'valgrind' and rebuild httpbench")


def count_instructions(fn: Any, args: Sequence[Any] = (), *, n: int, warmup: int,
                       per_call: bool = True, keep_file: str | None = None,
                       timeout: float | None = None) -> DetCounts:
    """Instructions of ``n`` calls of ``fn(*args)`` in a callgrind child: each
    call's (``per_call``; a dump per call costs about as much as a small call)
    or, without it, one total over all of them (``instructions`` has one entry).
    ``functions`` are per call either way."""
    valgrind = require_tool("valgrind")
    _callgrind_check()
    with tempfile.TemporaryDirectory(prefix="httpbench-cg-") as tmp:
        out = os.path.join(tmp, "callgrind.out")
        prefix = [valgrind, "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
                  "--combine-dumps=yes", "--dump-instr=no", "--dump-line=no",
                  "--compress-strings=yes", f"--callgrind-out-file={out}", "--quiet"]
        calls = _run_child(prefix, fn, args, n, warmup, tmp, timeout, per_call)
        res = parse_callgrind(out)
        res.calls = calls
        want = calls if per_call else 1
        if len(res.instructions) != want:
            raise RuntimeError(f"callgrind wrote {len(res.instructions)} window dumps for "
                               f"{calls} calls")
        res.functions = {k: (a / calls, b / calls) for k, (a, b) in res.functions.items()}
        if keep_file:
            shutil.copyfile(out, keep_file)
            res.callgrind_file = os.path.abspath(keep_file)
    return res


_NAME_RE = re.compile(r"^\((\d+)\)(?: (.*))?$")


def parse_callgrind(path: str) -> DetCounts:
    """Each window's total and per-function (inclusive, self) cost summed over
    the windows of a combined callgrind file dumped by the window loop.

    Inclusive cost = self + the cost of calls to other functions; calls of a
    function to itself are not added again (they are inside its own cost)."""
    names: dict[str, str] = {}
    incl: Counter = Counter()
    self_: Counter = Counter()
    totals: list[int] = []
    fn = cfn = ""
    ours = False
    after_calls = False

    def name(v: str) -> str:
        m = _NAME_RE.match(v)
        if not m:
            return v
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), v)

    with open(path, errors="replace") as f:
        for line in f:
            c = line[:1]
            if c.isdigit() or c in "+-*":
                cost = int(line.split()[-1])
                if not ours:
                    pass
                elif after_calls:
                    if cfn != fn:
                        incl[fn] += cost
                    after_calls = False
                else:
                    self_[fn] += cost
                    incl[fn] += cost
                continue
            if line.startswith("fn="):
                fn = name(line[3:].rstrip("\n"))
            elif line.startswith("cfn="):
                cfn = name(line[4:].rstrip("\n"))
            elif line.startswith("calls="):
                after_calls = True
            elif line.startswith("desc: Trigger:"):
                ours = "httpbench-call" in line
            elif line.startswith("totals:") and ours:
                totals.append(int(line.split()[1]))
            elif line.startswith("part:"):
                ours = False
    funcs = {k: (float(incl[k]), float(self_[k])) for k in incl}
    return DetCounts(instructions=totals, functions=funcs)


def top_functions(funcs: dict[str, tuple[float, float]], k: int = 15
                  ) -> list[tuple[str, float, float]]:
    """The ``k`` functions of highest inclusive cost: (name, inclusive, self) per call."""
    rows = sorted(funcs.items(), key=lambda kv: (-kv[1][0], kv[0]))[:k]
    return [(name, inc, own) for name, (inc, own) in rows]


# --------------------------------------------------------------------------
# strace


def count_syscalls(fn: Any, args: Sequence[Any] = (), *, n: int, warmup: int,
                   timeout: float | None = None) -> DetCounts:
    """Syscalls of each of ``n`` calls of ``fn(*args)`` in a child under strace."""
    strace = require_tool("strace")
    with tempfile.TemporaryDirectory(prefix="httpbench-st-") as tmp:
        trace = os.path.join(tmp, "strace.out")
        prefix = [strace, "-f", "-qq", "-e", "signal=none", "-s", "24", "-o", trace]
        calls = _run_child(prefix, fn, args, n, warmup, tmp, timeout)
        res = parse_strace(trace)
    res.calls = calls
    if len(res.syscalls) != calls:
        raise RuntimeError(f"strace saw {len(res.syscalls)} call markers for {calls} calls")
    return res


_LINE_RE = re.compile(r"^(\d+)\s+(?:<\.\.\. (\w+) resumed>|(\w+)\()")
_SPAWN = {"clone", "clone3", "fork", "vfork"}


def parse_strace(path: str) -> DetCounts:
    """Per-call syscall counts by name between the window loop's markers.

    Only the marking thread's syscalls count toward a call; other threads'
    go to ``other_threads``. A clone/fork inside the window raises."""
    per_call: list[Counter] = []
    others: Counter = Counter()
    cur: Counter | None = None
    tid: str | None = None
    with open(path, errors="replace") as f:
        for line in f:
            m = _LINE_RE.match(line)
            if m is None or m.group(2):  # signals, exits, resumed halves
                continue
            pid, name = m.group(1), m.group(3)
            if name == "write" and f'"{_MARK}' in line:
                what = line.split(_MARK, 1)[1].split('"', 1)[0]
                if what == "begin":
                    tid = pid
                elif pid == tid and what == "call":
                    cur = Counter()
                    per_call.append(cur)
                elif pid == tid and what == "end":
                    break
                continue
            if cur is None:
                continue
            if name in _SPAWN:
                raise RuntimeError(f"fn called {name}() during a measured call: threads and "
                                   "child processes are not allowed in a deterministic count")
            if pid == tid:
                cur[name] += 1
            else:
                others[name] += 1
    return DetCounts(syscalls=per_call, other_threads=others)
