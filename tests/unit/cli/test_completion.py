"""`rigscope completion bash|zsh|fish`: scripts generated from the parser, run in the real shells where present."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from desktop.cli import COMMANDS, build_parser
from desktop.cli import main as cli_main
from desktop.cli.completion import words


def _script(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli_main(["completion", shell]) == 0
    return capsys.readouterr().out


def _complete(shell: str, script: str, line: list[str]) -> set[str]:
    """What the shell offers for the last word of ``line`` (COMP_WORDS as bash splits a command line)."""
    words_ = " ".join(f"'{w}'" for w in line)
    if shell == "bash":
        program = (f"{script}\nCOMP_WORDS=({words_}); COMP_CWORD={len(line) - 1}; _rigscope; "
                   "printf '%s\\n' \"${COMPREPLY[@]}\"")
        done = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, timeout=30,
                              check=True)
    else:  # zsh: its bashcompinit runs the same function
        program = (f"{script}\nCOMP_WORDS=({words_}); COMP_CWORD={len(line) - 1}; _rigscope; "
                   "print -l -- $COMPREPLY")
        done = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, timeout=30, check=True)
    return {w for w in done.stdout.splitlines() if w}


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_commands_options_and_choices_complete(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    script = _script(shell, capsys)
    assert _complete(shell, script, ["rigscope", "ser"]) == {"serve", "service"}
    assert _complete(shell, script, ["rigscope", ""]) >= set(COMMANDS)
    assert _complete(shell, script, ["rigscope", "serve", "--li"]) == {"--listen"}
    assert _complete(shell, script, ["rigscope", "-v", "service", "in"]) == {"install"}  # a choice
    assert _complete(shell, script, ["rigscope", "completion", ""]) >= {"bash", "zsh", "fish"}
    assert _complete(shell, script, ["rigscope", "--ver"]) == {"--version", "--verbose"}


def test_every_option_of_the_parser_is_in_every_script(capsys: pytest.CaptureFixture[str]) -> None:
    """Generated, not written: each command's options reach each shell's script (fish has no runner here)."""
    own, commands, _ = words(build_parser())
    assert set(commands) == set(COMMANDS) and "--version" in own
    assert "--db" in commands["report"] and "--baseline" in commands["stress"]
    fish = _script("fish", capsys)
    for name, found in commands.items():
        assert f"-n __fish_use_subcommand -a {name} -d " in fish
        for word in found:
            spelled = f"-l {word[2:]}" if word.startswith("--") else f"-s {word[1:]}" if word.startswith("-") \
                else f"-a {word}"
            assert f"-n '__fish_seen_subcommand_from {name}' {spelled}" in fish, (name, word)
    for shell in ("bash", "zsh"):
        script = _script(shell, capsys)
        assert all(f" {word}" in script or f"'{word}" in script for found in commands.values() for word in found)
