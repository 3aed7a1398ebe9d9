"""The documented launches work (issue 14): `rigscope`, `rigscope --simulate[=PROFILES]` and
`rigscope --db PATH` open the window as `rigscope gui ...` does, and every `rigscope ...` command the
README or the program itself shows is one the parser takes (the cheap ones are run for real)."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from desktop import cli

ROOT = Path(__file__).resolve().parents[3]
NOW_S = 1_800_000_000.0


@pytest.fixture
def gui_calls(monkeypatch: pytest.MonkeyPatch) -> list[argparse.Namespace]:
    """`gui`'s main replaced by a recorder: no window opens; every other command runs as it is."""
    calls: list[argparse.Namespace] = []
    real = cli.handler

    def handler(command: str) -> cli.Handler:
        if command == "gui":
            return lambda args: calls.append(args) or 0
        return real(command)

    monkeypatch.setattr(cli, "handler", handler)
    return calls


@pytest.mark.parametrize(("argv", "simulate", "db"), [
    ([], None, None),
    (["--simulate"], "", None),
    (["--simulate=rtx4090,h100"], "rtx4090,h100", None),
    (["--simulate", "rtx4090"], "rtx4090", None),
    (["--db", "demo.sqlite"], None, "demo.sqlite"),
    (["-v", "--simulate", "--db", "demo.sqlite"], "", "demo.sqlite"),
    (["gui", "--db", "demo.sqlite"], None, "demo.sqlite"),
])
def test_rigscope_without_a_command_opens_the_window_with_its_options(
        argv: list[str], simulate: str | None, db: str | None, gui_calls: list[argparse.Namespace]) -> None:
    assert cli.main(argv, now_s=NOW_S) == 0
    (args,) = gui_calls
    assert (args.command, args.simulate, args.db) == ("gui", simulate, db)


def test_a_mistyped_command_is_still_an_invalid_choice(gui_calls: list[argparse.Namespace],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["sampel"])
    assert exit_.value.code == 2 and "invalid choice: 'sampel'" in capsys.readouterr().err
    assert gui_calls == []


# --- every command shown anywhere parses ---------------------------------------------------------

#: What a placeholder in a synopsis stands for.
PLACEHOLDERS = {"PATH": "h.sqlite", "FILE": "log.csv", "S": "1", "N": "1", "M": "0.5", "C": "80", "NAME": "box",
                "ADDR:PORT": "127.0.0.1:9835", "PROFILES": "rtx4090", "ISO": "2026-11-20", "ID": "1", "X": "0.5",
                "PCT": "10", "CMD": "python", "ARGS": "train.py", "W": "150"}


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands: list[str] = []
    for block in re.findall(r"```[^\n]*\n(.*?)```", text, re.S):
        for line in re.sub(r"\n\s+(?=\[)", " ", block).splitlines():  # a synopsis continued on the next line
            if re.match(r"rigscope(\s|$)", line):
                commands.append(line.strip())
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    commands += [span for span in re.findall(r"`([^`\n]+)`", prose) if re.match(r"rigscope(\s|$)", span)]
    return commands


def _source_commands() -> list[str]:
    spans: set[str] = set()
    for path in (ROOT / "desktop").rglob("*.py"):
        spans.update(re.findall(r"`(rigscope(?:\s[^`]*)?)`", path.read_text(encoding="utf-8")))
    return sorted(spans)


def _forms(shown: str) -> list[list[str]]:
    """The argument lists a shown command means: as few options as it allows and, for a synopsis,
    every optional part with its first alternative; None for what is output, not a command."""
    shown = shown.replace(" \\| ", "|").replace("\\|", "|")  # `[a \| b]` in a Markdown table cell is `[a|b]`
    shown = re.sub(r"\s\|\s(head|less|grep)\b.*$", "", shown)  # a shell pipe after it
    words = shown.split()
    if len(words) > 1 and words[1].endswith(":"):  # an error message the README quotes
        return []
    depth, cut = 0, len(shown)
    for i, char in enumerate(shown):  # `a [x] | b | c`: alternatives of the whole command
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "|" and depth == 0 and shown[i - 1] == " ":
            cut = i
            break
    shown = shown[:cut].replace("...", "").replace("…", "")
    minimal = shown
    while re.search(r"\[[^\[\]]*\]", minimal):
        minimal = re.sub(r"\s*\[[^\[\]]*\]", "", minimal)
    full = shown.replace("[", "").replace("]", "").replace("--simulate=PROFILES", "--simulate=rtx4090")
    forms = []
    for form in {minimal, full}:
        first = re.sub(r"(\S+?)\|\S+", r"\1", form)  # `a|b|c`: the first alternative
        forms.append([PLACEHOLDERS.get(word, word) for word in shlex.split(first)[1:]])
    return forms


def _parses(argv: list[str]) -> str | None:
    """None when the real parser takes ``argv`` (as `main` hands it over), else what it said."""
    parser = cli.build_parser()
    if len(argv) == 1 and not argv[0].startswith("-"):  # a command named in prose: it exists
        return None if argv[0] in cli.COMMANDS else f"no command {argv[0]!r}"
    try:
        parser.parse_args(cli.with_default_command(cli.attach_relative_times(argv)))
    except SystemExit as exc:
        return None if exc.code == 0 else f"exit {exc.code}"
    return None


SHOWN = sorted(set(_readme_commands()) | set(_source_commands()))


def test_the_readme_and_the_program_show_the_launches_this_issue_is_about() -> None:
    for expected in ("rigscope --db PATH", "rigscope", "rigscope gui", "rigscope --version"):
        assert expected in SHOWN
    assert len(SHOWN) > 30


@pytest.mark.parametrize("shown", SHOWN)
def test_every_command_shown_parses(shown: str, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in _forms(shown):
        problem = _parses(argv)
        err = capsys.readouterr().err
        assert problem is None, f"`{shown}` as {argv}: {problem}: {err}"
        assert "invalid choice" not in err and "unrecognized" not in err


def test_the_cheap_ones_run_for_real(tmp_path: Path, gui_calls: list[argparse.Namespace],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--version"], ["--help"], ["gui", "--help"]):
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        assert exit_.value.code == 0 and capsys.readouterr().out.startswith(("rigscope ", "usage: rigscope"))
    assert cli.main(["doctor", "--simulate", "--json"]) == 0
    assert '"simulated"' in capsys.readouterr().out
    db = tmp_path / "demo.sqlite"
    assert cli.main(["demo", "--days", "0.01", "--db", str(db)], now_s=NOW_S) == 0
    out = capsys.readouterr().out
    # The hint demo ends with: each command in it runs (the window's with gui patched).
    hint = out.split("Open it with:", 1)[1]
    shown = [part.strip() for part in hint.split("    or    ")]
    assert shown == [f"rigscope --db {db}", f"rigscope advise --db {db}"]
    assert cli.main(shlex.split(shown[0])[1:], now_s=NOW_S) == 0
    assert [(a.command, a.db) for a in gui_calls] == [("gui", str(db))]
    assert cli.main(shlex.split(shown[1])[1:], now_s=NOW_S) in (0, 2)  # a quarter hour: maybe "not enough yet"
    assert "Traceback" not in capsys.readouterr().err
