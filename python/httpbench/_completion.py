"""``httpbench completion bash|zsh|fish``: print a shell completion script.

The subcommands come from the CLI's dispatch table, each command's flags and
their choices from its own argparse parser (captured, never run), and the
values of ``--clients``/``--scenarios`` from the adapter and scenario
registries, so the scripts follow the code without a list to maintain here.

Install: ``eval "$(httpbench completion bash)"`` in ~/.bashrc;
``httpbench completion zsh > "${fpath[1]}/_httpbench"``;
``httpbench completion fish > ~/.config/fish/completions/httpbench.fish``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["SHELLS", "Spec", "cli_main", "script", "spec"]

SHELLS = ("bash", "zsh", "fish")
URL_MODE = ""  # the command name of `httpbench URL [options]`


@dataclass
class Spec:
    """What completes where: subcommands, each command's flags, values of flags."""

    commands: dict[str, str]  # name -> one-line description ("" key: URL mode)
    flags: dict[str, list[str]]  # command -> flags (long and short)
    values: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (cmd, flag) -> words
    lists: set[tuple[str, str]] = field(default_factory=set)  # comma-separated value lists


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__()
        self.parser = parser


def _capture(fn: Callable[[list[str]], object]) -> argparse.ArgumentParser | None:
    """The parser ``fn`` builds, stopped at its first parse (nothing else runs)."""
    original = argparse.ArgumentParser.parse_known_args

    def grab(self: argparse.ArgumentParser, *_a: object, **_k: object) -> None:
        raise _Captured(self)

    argparse.ArgumentParser.parse_known_args = grab  # type: ignore[assignment, method-assign]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            fn(["--help"])
    except _Captured as c:
        return c.parser
    except (Exception, SystemExit):
        return None
    finally:
        argparse.ArgumentParser.parse_known_args = original  # type: ignore[method-assign]
    return None


def _command_fn(target: str) -> Callable[[list[str]], object] | None:
    modname, _, func = target.partition(":")
    try:
        fn: Callable[[list[str]], object] = getattr(importlib.import_module(modname),
                                                    func or "cli_main")
    except (ImportError, AttributeError):
        return None
    return fn


def spec() -> Spec:
    """The completion data, read from the CLI's commands and the registries."""
    from ._adapters import ADAPTERS
    from ._cli import COMMANDS, DEFAULT, USAGE
    from ._scenarios import SCENARIOS

    descr = {}
    for line in USAGE.splitlines():
        words = line.split()
        if len(words) > 3 and words[1] in COMMANDS:
            descr[words[1]] = " ".join(w for w in words[3:] if not w.startswith(("[", "FILE")))
    commands = {name: descr.get(name, name) for name in COMMANDS}
    commands.setdefault("completion", "print a shell completion script")
    out = Spec(commands=commands, flags={})
    targets = dict(COMMANDS)
    targets[URL_MODE] = DEFAULT
    for name, target in targets.items():
        if name == "completion":
            out.flags[name] = ["-h", "--help"]
            out.values[(name, "")] = list(SHELLS)
            continue
        fn = _command_fn(target)
        parser = _capture(fn) if fn is not None else None
        if parser is None:
            out.flags[name] = ["-h", "--help"]
            continue
        flags: list[str] = []
        for action in parser._actions:
            flags.extend(action.option_strings)
            if action.choices:
                words = [str(c) for c in action.choices]
                for opt in action.option_strings or [""]:  # "": a positional's words
                    out.values[(name, opt)] = out.values.get((name, opt), []) + words
        out.flags[name] = flags
    out.values[("compare", "--clients")] = list(ADAPTERS)
    out.values[("compare", "--scenarios")] = list(SCENARIOS)
    out.lists |= {("compare", "--clients"), ("compare", "--scenarios")}
    return out


def _words(ws: list[str]) -> str:
    return shlex.quote(" ".join(ws))


def _bash(s: Spec) -> str:
    subs = [c for c in s.commands if c]
    value_cases = []
    for (cmd, flag), words in sorted(s.values.items()):
        if not flag:
            continue
        fn = "_httpbench_list" if (cmd, flag) in s.lists else "_httpbench_words"
        value_cases.append(f"        {cmd or '_url'}:{flag}) {fn} {_words(words)}; return ;;")
    flag_cases = [f"        {cmd or '_url'}) flags={_words(fl)} ;;" for cmd, fl in s.flags.items()]
    positional = [f"        {cmd or '_url'}) {'_httpbench_words ' + _words(w)}; return ;;"
                  for (cmd, flag), w in s.values.items() if not flag]
    return f"""# bash completion for httpbench; generated by `httpbench completion bash`
_httpbench_words() {{
    COMPREPLY=($(compgen -W "$1" -- "$cur"))
}}
_httpbench_list() {{  # comma-separated values: complete the item after the last comma
    local pre="" last="$cur"
    if [[ $cur == *,* ]]; then pre="${{cur%,*}},"; last="${{cur##*,}}"; fi
    COMPREPLY=($(compgen -P "$pre" -W "$1" -- "$last"))
    compopt -o nospace 2>/dev/null  # so a comma can follow
}}
_httpbench() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="" cmd="" i flags
    (( COMP_CWORD > 0 )) && prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    # --flag=value arrives as three words: --flag, =, value
    if [[ $cur == "=" ]]; then cur=""; elif [[ $prev == "=" ]] && (( COMP_CWORD > 1 )); then
        prev="${{COMP_WORDS[COMP_CWORD-2]}}"; fi
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            {'|'.join(subs)}) cmd="${{COMP_WORDS[i]}}"; break ;;
            -*|=) ;;
            *) cmd=_url; break ;;
        esac
    done
    [[ -z $cmd && $cur != -* ]] && (( COMP_CWORD == 1 )) && {{
        _httpbench_words {_words(subs + ['--help', '--version'])}; return; }}
    case "${{cmd:-_url}}:$prev" in
{chr(10).join(value_cases)}
    esac
    if [[ $cur != -* ]]; then
        case "$cmd" in
{chr(10).join(positional)}
        esac
        return  # -o default: file names
    fi
    case "${{cmd:-_url}}" in
{chr(10).join(flag_cases)}
        *) flags="--help" ;;
    esac
    _httpbench_words "$flags"
}}
complete -o default -F _httpbench httpbench
"""


def _zsh(s: Spec) -> str:
    # zsh runs the bash function through bashcompinit: one implementation for both shells
    return ("#compdef httpbench\n# zsh completion for httpbench; generated by "
            "`httpbench completion zsh`\nautoload -U +X bashcompinit && bashcompinit\n"
            + _bash(s).split("\n", 1)[1])


def _fish(s: Spec) -> str:
    subs = [c for c in s.commands if c]
    lines = ["# fish completion for httpbench; generated by `httpbench completion fish`",
             "complete -c httpbench -f -n __fish_use_subcommand -l version -d 'print the version'"]
    for c, d in s.commands.items():
        if c:
            lines.append(f"complete -c httpbench -f -n __fish_use_subcommand -a {shlex.quote(c)}"
                         f" -d {shlex.quote(d)}")
    not_sub = f"not __fish_seen_subcommand_from {' '.join(subs)}"
    for cmd, flags in s.flags.items():
        cond = shlex.quote(not_sub if not cmd else f"__fish_seen_subcommand_from {cmd}")
        for flag in flags:
            opt = (f"-l {flag[2:]}" if flag.startswith("--")
                   else f"-s {flag[1:]}" if len(flag) == 2 else f"-o {flag[1:]}")
            words = s.values.get((cmd, flag))
            arg = f" -x -a {_words(words)}" if words else ""
            lines.append(f"complete -c httpbench -n {cond} {opt}{arg}")
    for (cmd, flag), words in s.values.items():
        if not flag:
            lines.append(f"complete -c httpbench -f -n "
                         f"{shlex.quote(f'__fish_seen_subcommand_from {cmd}')} -a {_words(words)}")
    return "\n".join(lines) + "\n"


def script(shell: str) -> str:
    """The completion script for ``shell`` (bash, zsh or fish)."""
    gen = {"bash": _bash, "zsh": _zsh, "fish": _fish}.get(shell)
    if gen is None:
        raise ValueError(f"unknown shell {shell!r}; one of {', '.join(SHELLS)}")
    return gen(spec())


def cli_main(argv: list[str]) -> int:
    """``httpbench completion bash|zsh|fish``."""
    if len(argv) != 1 or argv[0] not in SHELLS:
        sys.stderr.write("usage: httpbench completion bash|zsh|fish\n"
                         '  bash: eval "$(httpbench completion bash)"   (in ~/.bashrc)\n'
                         "  zsh:  httpbench completion zsh > \"${fpath[1]}/_httpbench\"\n"
                         "  fish: httpbench completion fish > "
                         "~/.config/fish/completions/httpbench.fish\n")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    sys.stdout.write(script(argv[0]))
    return 0
