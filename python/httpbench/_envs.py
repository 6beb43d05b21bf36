"""One isolated Python environment per client spec, cached between runs.

``httpbench compare --clients 'urllib3==1.26.20,urllib3==2.2.3'`` runs each
spec's workers in a virtual environment of its own holding httpbench (from a
wheel built once per httpbench source and interpreter, the local wheel it was
installed from, or - installed from a package index - its installed files for
the same interpreter and ``httpbench==<version>`` for another) and the spec's
distribution with the dependencies it resolves. Environments live under
``$XDG_CACHE_HOME/httpbench/envs/<hash>`` (``~/.cache`` without it), keyed by
spec and interpreter; each is built in a temporary directory and renamed into
place, so an interrupted or failed build leaves nothing half-made. A local
source tree is re-installed (the environment rebuilt) when its content or git
HEAD changes, and every environment when the httpbench wheel changes.

``uv`` builds environments when it is available (on PATH or ``python -m uv``),
``venv`` + pip otherwise. Every failure is an :class:`EnvError` with a one-line
message; the full installer log is kept next to the environments.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ._specs import ClientSpec
from ._version import __version__

__all__ = ["Env", "EnvError", "cache_dir", "clear_envs", "cli_main", "ensure_envs",
           "list_envs"]

META = "httpbench-env.json"
_SKIP_DIRS = {".git", "__pycache__", "build", "dist", ".venv", ".tox", ".nox", ".eggs",
              ".mypy_cache", ".pytest_cache", ".ruff_cache", "node_modules"}
_INSTALL_TIMEOUT = 900


class EnvError(ValueError):
    """An environment could not be made (the message is one line)."""


@dataclass(frozen=True)
class Env:
    """A ready environment: ``python`` runs the spec's workers."""

    spec: ClientSpec
    path: str
    python: str
    created: bool
    seconds: float
    versions: dict[str, str]
    python_version: str = "?"


Progress = Callable[[str], None]


def cache_dir() -> str:
    """``$XDG_CACHE_HOME/httpbench`` (``~/.cache/httpbench`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "httpbench")


def _envs_dir() -> str:
    return os.path.join(cache_dir(), "envs")


def _writable(d: str) -> None:
    try:
        os.makedirs(d, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=d, prefix=".probe-"):
            pass
    except OSError as exc:
        raise EnvError(f"cache directory {d} is not writable ({exc.strerror or exc}); "
                       "set XDG_CACHE_HOME to a writable directory") from None


def _say(progress: Progress | None, msg: str) -> None:
    if progress is not None:
        progress(msg)


# ---------------------------------------------------------------- installers


def _uv() -> list[str] | None:
    """The uv command (on PATH, or the uv package of this interpreter)."""
    if os.environ.get("HTTPBENCH_NO_UV"):
        return None
    exe = shutil.which("uv")
    if exe:
        return [exe]
    if importlib.util.find_spec("uv") is not None:
        return [sys.executable, "-m", "uv"]
    return None


def _run(argv: Sequence[str], log: list[str], cwd: str | None = None) -> None:
    """Run an installer step; its output goes to ``log``; EnvError on failure."""
    env = dict(os.environ)
    for k in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV"):
        env.pop(k, None)
    log.append("$ " + " ".join(argv))
    try:
        p = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, env=env, cwd=cwd,
                           timeout=_INSTALL_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.append(str(exc))
        raise _StepFailed(str(exc)) from None
    out = p.stdout.decode("utf-8", "replace")
    log.append(out)
    if p.returncode != 0:
        raise _StepFailed(_reason(out) or f"exit code {p.returncode}")


class _StepFailed(Exception):
    pass


def _reason(out: str) -> str:
    """The most telling line of an installer's failure output."""
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    keys = ("No matching distribution", "Because ", "No solution found", "not found",
            "Could not find", "Failed to", "error:", "ERROR:", "Error:")
    for key in keys:
        for ln in reversed(lines):
            if key in ln:
                return ln.lstrip("×╰─▶ ").strip()[:300]
    return lines[-1][:300] if lines else ""


def _make_venv(path: str, log: list[str], python: str | None = None) -> str:
    uv = _uv()
    base = python or getattr(sys, "_base_executable", None) or sys.executable
    if uv:
        _run([*uv, "venv", "--quiet", "--python", base, path], log)
    else:
        _run([base, "-m", "venv", path], log)
    return os.path.join(path, "bin", "python")


def _install(python: str, reqs: Sequence[str], log: list[str]) -> None:
    uv = _uv()
    if uv:
        _run([*uv, "pip", "install", "--quiet", "--python", python, *reqs], log)
    else:
        _run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              *reqs], log)


# ---------------------------------------------------------------- hashing


def _tree_hash(root: str, h: Any | None = None) -> Any:
    """Hash of a source tree's files (names and content), skipping caches and builds."""
    h = h or hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in _SKIP_DIRS and not x.endswith(".egg-info"))
        for f in sorted(files):
            if f.endswith((".pyc", ".so", ".o")):
                continue
            p = os.path.join(d, f)
            h.update(os.path.relpath(p, root).encode() + b"\0")
            with contextlib.suppress(OSError), open(p, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
    return h


def _git_head(root: str) -> str | None:
    try:
        p = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True,
                           timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.decode().strip() or None if p.returncode == 0 else None


_TAG = "import sys, sysconfig; print(sys.implementation.cache_tag + '-' + sysconfig.get_platform())"


@functools.cache
def _interp_tag(python: str | None = None) -> str:
    """``cpython-311-linux-x86_64`` of this interpreter or of ``python``."""
    if python is None:
        tag = f"{sys.implementation.cache_tag}-{sysconfig.get_platform()}"
    else:
        try:
            p = subprocess.run([python, "-c", _TAG], capture_output=True, timeout=60,
                               check=False)
        except OSError as exc:
            raise EnvError(f"python {python}: cannot run it ({exc.strerror or exc})") from None
        except subprocess.TimeoutExpired:
            raise EnvError(f"python {python}: did not answer in 60 s") from None
        if p.returncode != 0 or not p.stdout.strip():
            raise EnvError(f"python {python}: not a working Python interpreter "
                           f"({_reason(p.stderr.decode('utf-8', 'replace')) or p.returncode})")
        tag = p.stdout.decode().strip().splitlines()[-1]
    return tag.replace("/", "_")


# ---------------------------------------------------------------- httpbench wheel


def _httpbench_source() -> tuple[str | None, str | None]:
    """(source tree, wheel file) this httpbench was installed from, where known."""
    import importlib.metadata
    from urllib.parse import unquote, urlsplit

    try:
        text = importlib.metadata.distribution("httpbench").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        text = None
    if text:
        try:
            info = json.loads(text)
        except ValueError:
            info = {}
        u = urlsplit(str(info.get("url", "")))
        if u.scheme == "file":
            p = unquote(u.path)
            if "dir_info" in info and os.path.isdir(p):
                return p, None
            if p.endswith(".whl") and os.path.isfile(p):
                return None, p
    # a source checkout on sys.path without an install record
    pkg = os.path.dirname(os.path.abspath(__file__))
    for up in (os.path.dirname(pkg), os.path.dirname(os.path.dirname(pkg))):
        if os.path.isfile(os.path.join(up, "pyproject.toml")) and \
                os.path.isfile(os.path.join(up, "setup.py")):
            return up, None
    return None, None


@dataclass(frozen=True)
class _Httpbench:
    """How this httpbench gets into an environment; ``key`` changes when it does."""

    key: str
    wheel: str | None = None  # a wheel file to install
    copy_from: str | None = None  # the site-packages holding this installed httpbench
    files: tuple[str, ...] = ()  # its files, relative to copy_from
    requirement: str | None = None  # httpbench==<version> from the package index


_NO_HTTPBENCH = ("set HTTPBENCH_WHEEL=/path/to/httpbench-*.whl (a wheel for that Python, "
                 "e.g. from tools/build-wheel)")


def _installed_httpbench() -> tuple[str, tuple[str, ...], str] | None:
    """(site-packages, files relative to it, RECORD hash) of this very installed httpbench."""
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution("httpbench")
        record = dist.read_text("RECORD")
    except importlib.metadata.PackageNotFoundError:
        return None
    if not record or not dist.files:
        return None
    root = os.path.realpath(str(dist.locate_file("")))
    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    if os.path.dirname(here) != root:
        return None  # the metadata found is another install than the one running
    # scripts live outside site-packages (workers run `python -m`); bytecode is rebuilt
    # (a file RECORD lists may be gone: an index install has no direct_url.json)
    files = tuple(str(f) for f in dist.files
                  if not str(f).startswith("..") and "__pycache__" not in str(f)
                  and os.path.isfile(os.path.join(root, str(f))))
    return root, files, hashlib.sha256(record.encode()).hexdigest()[:16]


def httpbench_install(progress: Progress | None = None,
                      python: str | None = None) -> _Httpbench:
    """How environments for this interpreter (or ``python``) get this httpbench.

    A source tree builds a wheel once (cached); a local wheel is reused; an
    install from a package index is copied as installed for the same interpreter,
    and comes from the index as ``httpbench==<version>`` for another one."""
    wheels = os.path.join(cache_dir(), "wheels")
    _writable(wheels)
    env_wheel = os.environ.get("HTTPBENCH_WHEEL")
    src, wheel = _httpbench_source()
    if env_wheel:
        src, wheel = None, env_wheel
    tag = _interp_tag(python)
    if wheel is not None and not env_wheel and src is not None and tag != _interp_tag():
        wheel = None  # built for this interpreter: another one builds from the source
    if wheel is not None:
        h = hashlib.sha256(open(wheel, "rb").read()).hexdigest()[:16]  # noqa: SIM115
        return _Httpbench(f"{__version__}-{tag}-{h}", wheel=wheel)
    if src is None:
        if tag != _interp_tag():
            return _Httpbench(f"{__version__}-{tag}-index",
                              requirement=f"httpbench=={__version__}")
        installed = _installed_httpbench()
        if installed is None:
            raise EnvError("cannot find httpbench's source tree, wheel or installed files to "
                           "put into the environments: " + _NO_HTTPBENCH)
        root, files, h = installed
        return _Httpbench(f"{__version__}-{tag}-installed-{h}", copy_from=root, files=files)
    h = hashlib.sha256()
    for f in ("pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in"):
        p = os.path.join(src, f)
        if os.path.isfile(p):
            h.update(f.encode() + b"\0" + open(p, "rb").read())  # noqa: SIM115
    for d in ("python", "csrc", "src"):
        if os.path.isdir(os.path.join(src, d)):
            _tree_hash(os.path.join(src, d), h)
    key = f"{__version__}-{tag}-{h.hexdigest()[:16]}"
    dest = os.path.join(wheels, key)
    found = [f for f in os.listdir(dest) if f.endswith(".whl")] if os.path.isdir(dest) else []
    if found:
        return _Httpbench(key, wheel=os.path.join(dest, found[0]))
    _say(progress, f"building the httpbench {__version__} wheel for {tag} "
                   "(once per httpbench source and interpreter)")
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=wheels)
    log: list[str] = []
    try:
        builder = python or sys.executable
        has_pip = (importlib.util.find_spec("pip") is not None if python is None else
                   subprocess.run([python, "-c", "import pip"], capture_output=True,
                                  timeout=60, check=False).returncode == 0)
        if has_pip:
            _run([builder, "-m", "pip", "wheel", "--quiet", "--no-deps",
                  "--disable-pip-version-check", "-w", tmp, src], log)
        elif _uv():
            _run([*(_uv() or []), "build", "--wheel", "--python", builder, "--out-dir", tmp,
                  src], log)
        else:
            raise _StepFailed("neither pip nor uv is available to build it")
        if not any(f.endswith(".whl") for f in os.listdir(tmp)):
            raise _StepFailed("the build produced no wheel")
        with contextlib.suppress(OSError):
            os.rename(tmp, dest)  # a concurrent build may have won: keep either
    except _StepFailed as exc:
        _keep_log("httpbench-wheel", log)
        raise EnvError(f"building the httpbench wheel from {src} failed: {exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    found = [f for f in os.listdir(dest) if f.endswith(".whl")]
    return _Httpbench(key, wheel=os.path.join(dest, found[0]))


def _keep_log(name: str, log: list[str]) -> str:
    d = os.path.join(cache_dir(), "logs")
    with contextlib.suppress(OSError):
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, f"{name}.log")
        with open(p, "w", encoding="utf-8") as f:
            f.write("\n".join(log))
        return p
    return ""


# ---------------------------------------------------------------- specs -> envs


def _dist_of(client: str) -> tuple[str, str]:
    """(distribution, import module) a client name installs and loads."""
    from ._adapters import ADAPTERS

    if client in ADAPTERS:
        modname, clsname = ADAPTERS[client]
        cls = getattr(importlib.import_module(modname), clsname)
        dist = cls.dist or cls.pip_name
        if not dist:
            raise EnvError(f"client {client!r} has no library to install (use it without "
                           "a version)")
        return dist, (cls.modules[0] if cls.modules else dist)
    if ":" in client:
        top = client.partition(":")[0].split(".")[0]
        return top, top
    raise EnvError(f"unknown client {client!r} in a versioned spec; known: "
                   f"{', '.join(ADAPTERS)} (or module:Class of your own Adapter)")


def requirement(spec: ClientSpec) -> str:
    """The installer's requirement string for ``spec``."""
    extras = f"[{','.join(spec.extras)}]" if spec.extras else ""
    if spec.kind == "path" or spec.kind == "wheel":
        assert spec.source is not None
        return spec.source + extras
    dist, _ = _dist_of(spec.client)
    if spec.kind == "release":
        return f"{dist}{extras}=={spec.version}"
    if spec.kind == "url":
        return f"{dist}{extras} @ {spec.source}"
    raise ValueError(f"spec {spec.text!r} runs in the current environment")


def _stamp(spec: ClientSpec, wheel_key: str) -> dict[str, Any]:
    """What the environment was built from; any change rebuilds it."""
    st: dict[str, Any] = {"httpbench": wheel_key}
    if spec.kind == "path":
        assert spec.source is not None
        st["tree"] = _tree_hash(spec.source).hexdigest()[:20]
        st["git_head"] = _git_head(spec.source)
    elif spec.kind == "wheel":
        assert spec.source is not None
        st["wheel"] = hashlib.sha256(open(spec.source, "rb").read()).hexdigest()[:20]  # noqa: SIM115
    return st


def _env_key(spec: ClientSpec) -> str:
    base = os.path.realpath(spec.python or sys.executable)
    ident = json.dumps([spec.kind, spec.client, list(spec.extras), spec.version, spec.source,
                        base, _interp_tag(spec.python)])
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


_PROBE = ("import importlib, json, sys\n"
          "out = {}\n"
          "for m in sys.argv[1:]:\n"
          "    mod = importlib.import_module(m)\n"
          "    v = getattr(mod, '__version__', None)\n"
          "    top = m.split('.')[0]\n"
          "    if not isinstance(v, str):\n"
          "        v = getattr(importlib.import_module(top), '__version__', None)\n"
          "    if not isinstance(v, str):\n"
          "        try:\n"
          "            from importlib.metadata import version\n"
          "            v = version(top)\n"
          "        except Exception:\n"
          "            v = None\n"
          "    out[m] = v if isinstance(v, str) else '?'\n"
          "print(json.dumps(out))\n")


def _python_version(python: str) -> str:
    p = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                       capture_output=True, timeout=60, check=False)
    return p.stdout.decode().strip() or "?"


def _read_meta(path: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(path, META), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _put_httpbench(python: str, hb: _Httpbench, log: list[str]) -> list[str]:
    """Install or copy httpbench into the environment of ``python``; what else to install
    along with the spec's requirement (the wheel, when there is one)."""
    if hb.wheel is not None:
        return [hb.wheel]
    if hb.requirement is not None:
        try:
            _install(python, [hb.requirement], log)
        except _StepFailed as exc:
            raise _StepFailed(f"{hb.requirement} is not installable from the package index "
                              f"({exc}); {_NO_HTTPBENCH}") from None
        return []
    assert hb.copy_from is not None
    p = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                       capture_output=True, text=True, timeout=60, check=False)
    dest = p.stdout.strip()
    if p.returncode != 0 or not os.path.isdir(dest):
        raise _StepFailed(f"the new environment has no site-packages ({p.stderr.strip()[:200]})")
    log.append(f"copying {len(hb.files)} installed httpbench files from {hb.copy_from}")
    try:
        for rel in hb.files:
            target = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(os.path.join(hb.copy_from, rel), target)
    except OSError as exc:
        raise _StepFailed(f"copying the installed httpbench failed: {exc}") from None
    return []


def _build(spec: ClientSpec, final: str, hb: _Httpbench, stamp: dict[str, Any],
           progress: Progress | None) -> dict[str, Any]:
    envs = os.path.dirname(final)
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=envs)
    log: list[str] = []
    req = requirement(spec)
    try:
        python = _make_venv(tmp, log, spec.python)
        _say(progress, f"env {spec.text}: installing httpbench and {req}")
        _install(python, [*_put_httpbench(python, hb, log), req], log)
        mods = ["httpbench"]
        if ":" in spec.client:
            mods.append(spec.client.partition(":")[0])
        else:
            mods.append(_dist_of(spec.client)[1])
        p = subprocess.run([python, "-c", _PROBE, *mods], capture_output=True, timeout=120,
                           check=False, env={k: v for k, v in os.environ.items()
                                             if k not in ("PYTHONPATH", "PYTHONHOME")})
        if p.returncode != 0:
            log.append(p.stderr.decode("utf-8", "replace"))
            raise _StepFailed("installed, but importing it failed: "
                              + (_reason(p.stderr.decode("utf-8", "replace")) or "?"))
        meta = {"spec": spec.text, "kind": spec.kind, "client": spec.client,
                "requirement": req, "python": _python_version(python),
                "base_python": os.path.realpath(spec.python or sys.executable), "stamp": stamp,
                "versions": json.loads(p.stdout.decode().strip().splitlines()[-1]),
                "created_unix": time.time()}
        with open(os.path.join(tmp, META), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1)
        old = None
        if os.path.exists(final):
            old = tempfile.mkdtemp(prefix=".old-", dir=envs)
            os.rename(final, os.path.join(old, "env"))
        os.rename(tmp, final)
        if old:
            shutil.rmtree(old, ignore_errors=True)
        return meta
    except _StepFailed as exc:
        logp = _keep_log(os.path.basename(final), log)
        raise EnvError(f"cannot make an environment for {spec.text!r} ({req}): {exc}"
                       + (f" (log: {logp})" if logp else "")) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ensure_envs(specs: Sequence[ClientSpec], progress: Progress | None = None) -> dict[str, Env]:
    """An environment for every isolated spec (keyed by spec text), made or reused.

    Runs before any measurement; the first failure raises :class:`EnvError`.
    """
    iso = [s for s in specs if s.isolated]
    if not iso:
        return {}
    envs = _envs_dir()
    _writable(envs)
    wheels: dict[str | None, _Httpbench] = {}
    out: dict[str, Env] = {}
    for spec in iso:
        if spec.python not in wheels:
            wheels[spec.python] = httpbench_install(progress, spec.python)
        hb = wheels[spec.python]
        t0 = time.monotonic()
        final = os.path.join(envs, _env_key(spec))
        stamp = _stamp(spec, hb.key)
        meta = _read_meta(final)
        created = meta is None or meta.get("stamp") != stamp
        if created:
            why = "new" if meta is None else "changed, rebuilding"
            _say(progress, f"env {spec.text}: {why} ({final})")
            meta = _build(spec, final, hb, stamp, progress)
        else:
            _say(progress, f"env {spec.text}: cached ({final})")
            with contextlib.suppress(OSError):
                os.utime(os.path.join(final, META))  # last use, for `envs list`
        assert meta is not None
        out[spec.text] = Env(spec, final, os.path.join(final, "bin", "python"), created,
                             time.monotonic() - t0, dict(meta.get("versions") or {}),
                             str(meta.get("python") or "?"))
    return out


def list_envs() -> list[dict[str, Any]]:
    """Metadata of every cached environment (with ``path``, ``size_bytes``, ``last_used``)."""
    d = _envs_dir()
    rows: list[dict[str, Any]] = []
    if not os.path.isdir(d):
        return rows
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        meta = _read_meta(p)
        if name.startswith(".") or meta is None:
            continue
        size = 0
        for root, _, files in os.walk(p):
            for f in files:
                with contextlib.suppress(OSError):
                    size += os.lstat(os.path.join(root, f)).st_size
        meta = dict(meta, path=p, size_bytes=size,
                    last_used=os.path.getmtime(os.path.join(p, META)))
        rows.append(meta)
    return rows


def clear_envs(specs: Sequence[str] = ()) -> int:
    """Remove cached environments (all, or those of the given spec texts); how many."""
    d = _envs_dir()
    if not os.path.isdir(d):
        return 0
    n = 0
    for name in os.listdir(d):
        p = os.path.join(d, name)
        meta = _read_meta(p)
        if specs and (meta is None or meta.get("spec") not in specs):
            continue
        shutil.rmtree(p, ignore_errors=True)
        if meta is not None:
            n += 1
    return n


def cli_main(argv: list[str]) -> int:
    """``httpbench envs list|clear [SPEC...]``."""
    import argparse

    from ._units import format_bytes

    ap = argparse.ArgumentParser(prog="httpbench envs",
                                 description="The cached per-spec client environments "
                                             f"(under {_envs_dir()}).")
    ap.add_argument("action", choices=("list", "clear"))
    ap.add_argument("specs", nargs="*", help="clear only these specs (as written)")
    args = ap.parse_args(argv)
    if args.action == "clear":
        n = clear_envs(args.specs)
        print(f"removed {n} environment(s)")
        return 0
    rows = list_envs()
    if not rows:
        print(f"no environments in {_envs_dir()}")
        return 0
    for r in rows:
        vers = ", ".join(f"{k} {v}" for k, v in (r.get("versions") or {}).items())
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["last_used"]))
        print(f"{r['spec']:<32} {vers:<40} {format_bytes(r['size_bytes']):>9}  used {used}  "
              f"{r['path']}")
    return 0
