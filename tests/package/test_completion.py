"""`httpbench completion bash|zsh|fish`: the bash script completes subcommands, flags,
scenario and client names when sourced into a real bash; zsh and fish scripts parse."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from httpbench import _completion
from httpbench._adapters import ADAPTERS
from httpbench._cli import COMMANDS, main
from httpbench._scenarios import SCENARIOS


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("completion") / "httpbench.bash"
    path.write_text(_completion.script("bash"))
    return str(path)


def complete(script: str, line: str) -> list[str]:
    """COMPREPLY for the command line ``line`` (the cursor at its end), from real bash."""
    if not shutil.which("bash"):
        pytest.skip("bash not installed")
    prog = (f"source {script}\n"
            f"COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}\n"
            # split like bash's completion does (COMP_WORDBREAKS '=' included)
            "read -ra COMP_WORDS <<< \"${COMP_LINE//=/ = }\"\n"
            "[[ $COMP_LINE == *' ' ]] && COMP_WORDS+=('')\n"
            "COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n"
            "_httpbench httpbench\n"
            "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert not out.stderr, out.stderr
    return [w for w in out.stdout.split("\n") if w]


def test_subcommands(bash_script):
    got = complete(bash_script, "httpbench ")
    assert set(COMMANDS) <= set(got)
    assert "completion" in got and "--version" in got
    assert complete(bash_script, "httpbench co") == ["compare", "completion"]


def test_flags_per_command(bash_script):
    assert complete(bash_script, "httpbench serve --t") == ["--tls", "--threads"]
    assert "--scenarios" in complete(bash_script, "httpbench compare --")
    assert "--concurrency" in complete(bash_script, "httpbench http://127.0.0.1:8080/ --c")
    assert "--tls" not in complete(bash_script, "httpbench compare --")


def test_client_and_scenario_names(bash_script):
    assert set(complete(bash_script, "httpbench compare --clients ")) == set(ADAPTERS)
    assert complete(bash_script, "httpbench compare --clients pyc") == ["pycurl"]
    assert complete(bash_script, "httpbench compare --clients pyr") == ["pyreqwest",
                                                                        "pyreqwest-async"]
    assert complete(bash_script, "httpbench compare --clients native,http.") == [
        "native,http.client"]
    assert "native,httpx" in complete(bash_script, "httpbench compare --clients native,http")
    assert complete(bash_script, "httpbench compare --clients=nat") == ["native"]
    got = complete(bash_script, "httpbench compare --quick --scenarios get-150b,")
    assert set(got) == {f"get-150b,{s}" for s in SCENARIOS}
    assert complete(bash_script, "httpbench report --format m") == ["md"]
    assert complete(bash_script, "httpbench completion ") == ["bash", "zsh", "fish"]
    if "envs" in COMMANDS:  # a positional's choices complete too
        assert complete(bash_script, "httpbench envs ") == ["list", "clear"]


def test_every_script_names_everything():
    for shell in _completion.SHELLS:
        text = _completion.script(shell)
        for name in [*COMMANDS, *ADAPTERS, *SCENARIOS, "concurrency", "scenarios"]:
            assert name in text, (shell, name)


@pytest.mark.parametrize("shell, check", [("zsh", ["zsh", "-n"]),
                                          ("fish", ["fish", "--no-execute"])])
def test_other_shells_parse(shell, check, tmp_path):
    if not shutil.which(check[0]):
        pytest.skip(f"{check[0]} not installed")
    path = tmp_path / f"httpbench.{shell}"
    path.write_text(_completion.script(shell))
    out = subprocess.run([*check, str(path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr


def test_cli(capsys):
    assert main(["completion", "bash"]) == 0
    assert "complete -o default -F _httpbench httpbench" in capsys.readouterr().out
    assert main(["completion", "tcsh"]) == 2
    assert "bash|zsh|fish" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert "completion" in capsys.readouterr().out
