"""`rigscope report -o FILE` writes a temporary file beside FILE and renames it: a symlink at FILE is replaced,
never followed, and a full disk keeps the old report whole (issue 21, defect 10)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from desktop import cli
from tests.unit.advisor.demo_db import stored_demo_week
from tests.unit.advisor.demo_frame import DEMO_WEEK_START_S

NOW_S = DEMO_WEEK_START_S + 8 * 86400


@pytest.fixture(scope="module")
def week_db() -> Path:
    return stored_demo_week()


def _report(db: Path, out: Path, fmt: str) -> int:
    return cli.main(["report", "--db", str(db), "--week", "2026-W47", "--format", fmt, "-o", str(out)], now_s=NOW_S)


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_symlink_at_the_target_is_replaced_and_what_it_points_to_untouched(
        week_db: Path, tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    link = tmp_path / f"week.{fmt}"
    link.symlink_to(precious)
    assert _report(week_db, link, fmt) == 0
    assert precious.read_text() == "keep me\n"
    assert not link.is_symlink() and link.is_file() and link.read_text().startswith(("section,", "{"))
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_full_disk_leaves_the_old_report_intact(week_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "week.csv"
    out.write_text("the old report\n")
    calls = []

    def full(fd: int, data: object) -> int:
        calls.append(fd)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    assert _report(week_db, out, "csv") == 2
    monkeypatch.undo()
    assert calls, "the report was not written through os.write"
    err = capsys.readouterr().err
    assert "No space left on device" in err and len(err.splitlines()) == 1
    assert out.read_text() == "the old report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["week.csv"]  # no partial file left beside it


def test_write_report_text_keeps_the_old_file_s_permissions(tmp_path: Path) -> None:
    from desktop.report_output import write_report_text

    out = tmp_path / "r.html"
    out.write_text("old")
    out.chmod(0o640)
    write_report_text(out, "new")
    assert out.read_text() == "new" and out.stat().st_mode & 0o777 == 0o640


def test_the_pdf_is_written_beside_and_renamed_too(week_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    precious = tmp_path / "precious.pdf"
    precious.write_bytes(b"keep me")
    link = tmp_path / "week.pdf"
    link.symlink_to(precious)
    assert _report(week_db, link, "pdf") == 0
    assert precious.read_bytes() == b"keep me"
    assert not link.is_symlink() and link.read_bytes().startswith(b"%PDF")


def test_the_already_being_written_message_escapes_the_lock_file_s_pid_and_host(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Whoever can write a shared folder's lock file chooses its pid and host: they must not reach the terminal raw."""
    import fcntl
    import json

    db = tmp_path / "h.sqlite"
    lock = tmp_path / "h.sqlite.lock"
    lock.write_bytes(json.dumps({"pid": "\x1b]0;pwned\x07", "host": "h\x1b[2J\x9b31m", "command": "x"}).encode()
                     + b"\n\0")
    with lock.open("r+b") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert cli.main(["record", "--db", str(db), "--simulate"]) == 2
    err = capsys.readouterr().err
    assert "already being written by" in err, err
    assert "\x1b" not in err and "\x07" not in err and "\x9b" not in err
    assert "pid \\x1b]0;pwned\\x07" in err and "host h\\x1b[2J\\x9b31m" in err
