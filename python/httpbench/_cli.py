"""The ``httpbench`` console script: dispatches to one module per subcommand.

``httpbench URL [flags]`` runs the load generator; ``httpbench serve``,
``httpbench compare``, ``httpbench report`` and ``httpbench diff`` are
subcommands. Each is a ``module:function(argv) -> int`` (``cli_main`` when no
function is named), imported only when used.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["main"]

# subcommand -> "module[:function]" providing function(argv) (default cli_main)
COMMANDS = {
    "serve": "httpbench._server",
    "compare": "httpbench._compare",
    "report": "httpbench.report",
    "diff": "httpbench.report:diff_main",
    "envs": "httpbench._envs",
    "completion": "httpbench._completion",
    "history": "httpbench._historycli",
}
DEFAULT = "httpbench._bench"  # `httpbench URL ...`

USAGE = """usage: httpbench URL [options]        load-test URL (see httpbench URL --help)
       httpbench serve [options]      run the embedded test server
       httpbench compare [options]    compare HTTP client libraries (the main job)
       httpbench report FILE [...]    print or compare saved results
       httpbench diff BASE CURRENT    compare two saved results (significance-tested)
       httpbench envs list|clear      the cached environments of versioned client specs
       httpbench completion SHELL     print a bash, zsh or fish completion script
       httpbench history list|show|plot|check|export|prune   the runs recorded in a history
"""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``httpbench`` command; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        if args:  # the load-test flags too: `httpbench URL` is the command most runs use
            from ._bench import load_test_help

            sys.stdout.write("\n" + load_test_help())
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        from ._version import __version__

        print(f"httpbench {__version__}")
        from ._features import describe  # after the version line: it loads the extension

        print(describe())
        return 0
    modname = COMMANDS.get(args[0])
    if modname is not None:
        args = args[1:]
    else:
        modname = DEFAULT
    modname, _, func = modname.partition(":")
    try:
        mod = importlib.import_module(modname)
    except ImportError as exc:  # a command not built yet is a clear message, not a traceback
        sys.stderr.write(f"httpbench: command unavailable ({exc})\n")
        return 2
    try:
        return int(getattr(mod, func or "cli_main")(args) or 0)
    except KeyboardInterrupt:
        sys.stderr.write("httpbench: interrupted\n")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
