"""Command-line papercuts (issue 14): a bad path is one line and exit 2 (never a traceback, never
exit 1, which means "throttled"); `report` takes its format from the file name and writes to
standard output with `-o -`; `demo --days 0` says the real range."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop import cli
from desktop.cli.report import report_format
from desktop.errors import UserError
from tests.unit.advisor.demo_db import stored_demo_week

NOW_S = 1_800_000_000.0


def _one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    rc = cli.main(argv, now_s=NOW_S)
    err = capsys.readouterr().err
    assert rc == 2, (argv, rc, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv", [
    ["analyze", "{dir}"],
    ["stress", "--device", "sim", "--minutes", "0.05", "--db", "{dir}"],
    ["record", "--simulate", "--db", "{dir}"],
    ["service", "install", "--db", "{dir}"],
    ["demo", "--days", "0.01", "--db", "{dir}"],
    ["advise", "--db", "{dir}"],
    ["export", "-o", "{dir}"],
    ["report", "-o", "{dir}"],
])
def test_a_folder_as_a_path_argument_is_one_line_and_exit_2(argv: list[str], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # nothing (a systemd unit) lands in the real home
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    folder = tmp_path / "logs"
    folder.mkdir()
    err = _one_line_exit_2([a.format(dir=folder, tmp=tmp_path) for a in argv], capsys)
    assert str(folder) in err and "folder" in err
    assert not (tmp_path / "config" / "systemd").exists()


@pytest.mark.parametrize("argv", [["export", "--db", "{tmp}/none.sqlite", "-o", "{tmp}/missing/x.csv"],
                                  ["report", "--db", "{tmp}/none.sqlite", "-o", "{tmp}/missing/x.json"]])
def test_a_missing_output_folder_is_named_before_anything_is_read(argv: list[str], tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_line_exit_2([a.format(tmp=tmp_path) for a in argv], capsys)
    assert f"the folder {tmp_path / 'missing'} does not exist" in err


def test_import_of_an_unreadable_file_is_exit_2_not_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["import", str(tmp_path / "missing.csv"), "--db", str(tmp_path / "h.sqlite")]) == 2
    assert "cannot read" in capsys.readouterr().out
    assert cli.main(["import", str(tmp_path), "--db", str(tmp_path / "h.sqlite")]) == 2
    captured = capsys.readouterr()
    assert f"{tmp_path}: cannot read: Is a directory" in captured.out and "Traceback" not in captured.err


@pytest.mark.parametrize("days", ["0", "-1", "400", "nan"])
def test_demo_days_out_of_range_says_the_real_range(days: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_line_exit_2(["demo", "--days", days, "--db", str(tmp_path / "d.sqlite")], capsys)
    assert "choose between 0.01 (about 15 minutes) and 366 days" in err
    assert not (tmp_path / "d.sqlite").exists()


@pytest.mark.parametrize(("output", "given", "expected"), [
    ("week.pdf", None, "pdf"), ("week.PDF", None, "pdf"), ("week.json", None, "json"), ("week.csv", None, "csv"),
    ("week.htm", None, "html"), ("week.html", "html", "html"), ("week", None, "html"), ("week.txt", "json", "json"),
    ("-", None, "html"), ("-", "json", "json"), ("-", "csv", "csv"),
])
def test_the_report_format_follows_the_file_name(output: str, given: str | None, expected: str) -> None:
    assert report_format(output, given) == expected


@pytest.mark.parametrize(("output", "given", "message"), [
    ("week.pdf", "html", "--format html disagrees with the file name week.pdf (pdf)"),
    ("-", "pdf", "a PDF cannot go to standard output"),
])
def test_a_report_format_that_cannot_be_is_refused(output: str, given: str, message: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UserError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        report_format(output, given)
    # through the command: one line, exit 2, before the history is even opened
    err = _one_line_exit_2(["report", "--db", "none.sqlite", "--format", given, "-o", output], capsys)
    assert message in err


@pytest.fixture(scope="module")
def week_db() -> Path:
    return stored_demo_week()


def test_report_to_stdout_and_by_extension(week_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    base = ["report", "--db", str(week_db), "--week", "2026-W47"]
    assert cli.main([*base, "--format", "json", "-o", "-"], now_s=NOW_S) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["week"] == "2026-W47" and captured.err == ""
    assert cli.main([*base, "--format", "csv", "-o", "-"], now_s=NOW_S) == 0
    assert "," in capsys.readouterr().out.splitlines()[0]
    pdf = tmp_path / "week.pdf"
    assert cli.main([*base, "-o", str(pdf)], now_s=NOW_S) == 0
    assert pdf.read_bytes().startswith(b"%PDF")
    captured = capsys.readouterr()  # status on stderr (issue 37), as `export -o FILE` says it
    lines, out = captured.err.splitlines(), captured.err
    assert captured.out == ""
    assert len(lines) == 1 and lines[0].startswith(f"wrote {pdf} (2026-W47, pdf, ") and "page(s)" not in out, out


def test_export_to_a_dash_is_standard_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from desktop.history.store import HistoryStore

    db = tmp_path / "h.sqlite"
    HistoryStore.open(db).close()
    assert cli.main(["export", "--db", str(db), "-o", "-"], now_s=NOW_S) == 0
    assert not (tmp_path / "-").exists() and not Path("-").exists()
    assert capsys.readouterr().out.startswith("time")
