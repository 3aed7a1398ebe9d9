"""The command layer: one module per subcommand, found by the dispatch table, every option explained,
one grammar for times, one-line user errors, and nothing below it importing it."""

from __future__ import annotations

import argparse
from pathlib import Path

import grimp
import pytest

from desktop import cli
from desktop.history.store import HistoryStore

CLI_DIR = Path(cli.__file__).parent
NOW_S = 1_800_000_000.0


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_subcommand_has_its_module_in_the_dispatch_table() -> None:
    commands = _subparsers(cli.build_parser())
    assert set(commands) == set(cli.COMMANDS)
    for name, module in cli.COMMANDS.items():
        assert module == ("import_" if name == "import" else name)
        assert (CLI_DIR / f"{module}.py").is_file(), module
        assert callable(cli.handler(name)), name


def test_every_option_has_help_and_every_help_page_reads() -> None:
    parser = cli.build_parser()
    assert "COMMAND" in parser.format_help()
    for name, sub in _subparsers(parser).items():
        for action in sub._actions:
            assert action.help, f"rigscope {name} {'/'.join(action.option_strings) or action.dest}: no help text"
        text = sub.format_help()
        assert text.startswith(f"usage: rigscope {name}") and sub.description
        assert " ".join(sub.description.split()) in " ".join(text.split())  # wrapped, but all there


def test_doctor_with_an_unknown_profile_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor", "--simulate", "bogus"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rigscope doctor: ") and "bogus" in lines[0], captured.err
    assert captured.out == ""


@pytest.fixture
def empty_db(tmp_path: Path) -> Path:
    path = tmp_path / "h.sqlite"
    HistoryStore.open(path).close()
    return path


@pytest.mark.parametrize("command", ["export", "analyze"])
@pytest.mark.parametrize("start", ["-90s", "-15m", "-24h", "-7d", "-1w", "2026-11-20", "2026-11-20T14:00"])
def test_every_command_with_from_takes_the_same_forms(command: str, start: str, empty_db: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # An empty history: each command accepts the range and finds nothing in it. `analyze` has nothing to
    # judge then, and says so with exit 2 (issue 14); `export` writes an empty file.
    code = cli.main([command, "--db", str(empty_db), "--from", start, "--to", "now"], now_s=NOW_S)
    err = capsys.readouterr().err
    assert "cannot read the time" not in err
    assert (code, "no samples in" in err) == ((2, True) if command == "analyze" else (0, False))


@pytest.mark.parametrize("command", ["export", "analyze"])
def test_every_command_with_from_refuses_the_same_forms(command: str, empty_db: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([command, "--db", str(empty_db), "--from", "yesterday"], now_s=NOW_S) == 2
    assert "cannot read the time 'yesterday'" in capsys.readouterr().err
    assert cli.main([command, "--db", str(empty_db), "--from", "-1h", "--to", "-2h"], now_s=NOW_S) == 2
    assert "--to must be after --from" in capsys.readouterr().err


def test_nothing_below_the_command_layer_imports_it() -> None:
    graph = grimp.build_graph("desktop", "advisor")
    cli_modules = {m for m in graph.modules if m == "desktop.cli" or m.startswith("desktop.cli.")}
    importers = set().union(*(graph.find_modules_that_directly_import(m) for m in cli_modules))
    assert importers - cli_modules == {"desktop.__main__"}
