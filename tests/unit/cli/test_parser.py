"""The parser is a loop over the dispatch table: each command's options come from its own module's
``add_arguments`` (and its help line from its ``HELP``), and building it imports nothing heavy."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable

import pytest

from desktop import cli


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _options(parser: argparse.ArgumentParser) -> list[tuple[str, ...]]:
    return [(action.dest, *action.option_strings, str(action.default), str(action.help)) for action in parser._actions]


def test_every_command_gets_its_options_from_its_own_modules_add_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    real: dict[str, Callable[[argparse.ArgumentParser], None]] = {}
    filled: dict[str, list[argparse.ArgumentParser]] = {}
    for name in cli.COMMANDS:
        module = cli.command_module(name)
        real[name] = module.add_arguments

        def spy(parser: argparse.ArgumentParser, name: str = name) -> None:
            filled.setdefault(name, []).append(parser)
            real[name](parser)

        monkeypatch.setattr(module, "add_arguments", spy)
    commands = _subparsers(cli.build_parser())
    assert set(commands) == set(cli.COMMANDS) == set(filled)
    for name, parser in commands.items():
        assert filled[name] == [parser], name  # once, into the very subparser `rigscope NAME` parses with
        help_line = cli.command_module(name).HELP
        assert help_line.strip() and parser.description == help_line, name
        own = argparse.ArgumentParser(prog=f"rigscope {name}", description=help_line)
        real[name](own)
        assert _options(parser) == _options(own), name  # nothing added to it anywhere else
        assert len(parser._actions) > 1, name  # more than -h: the module has options of its own


def test_the_top_help_lists_every_command_with_its_modules_help_line() -> None:
    text = " ".join(cli.build_parser().format_help().split())
    for name in cli.COMMANDS:
        assert f"{name} {' '.join(cli.command_module(name).HELP.split())}" in text, name


#: What building the parser must not import: `rigscope --version`, `--help` and the window's start pay for
#: none of it before the command that needs it runs.
HEAVY = ("numpy", "torch", "PySide6", "sqlite3", "pyqtgraph", "prometheus_client")


def test_building_the_parser_imports_nothing_heavy() -> None:
    code = ("import sys\n"
            "from desktop.cli import build_parser\n"
            "parser = build_parser()\n"
            "parser.parse_args(['stress', '--minutes', '1'])\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "", f"building the parser imported {done.stdout.strip()}"


def test_help_lists_every_exit_status_once(capsys: pytest.CaptureFixture[str]) -> None:
    """`rigscope --help` says what each exit status means, one meaning each (issue 37)."""
    from desktop.cli import main
    from desktop.errors import EXIT_CODES, PartlyDone, UserError

    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    listed = text.split("exit status:\n", 1)[1].splitlines()
    codes = [int(line.split()[0]) for line in listed if line.strip() and line.split()[0].isdigit()]
    assert codes == list(EXIT_CODES) and len(set(codes)) == len(codes)
    assert len(set(EXIT_CODES.values())) == len(EXIT_CODES)
    assert UserError.exit_code == 2 and PartlyDone.exit_code == 8 and PartlyDone.exit_code != UserError.exit_code
