"""`rigscope import` exit codes mean what they say (issue 20): a file that is not a log is exit 2
with the reason; a real log whose rows are all stored already is exit 0."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from desktop import cli

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = cli.main(["import", *argv], now_s=1_800_000_000.0)
    out = capsys.readouterr()
    return rc, out.out + out.err


@pytest.mark.parametrize("kind", ["binary", "dev_zero", "wrong_columns"])
def test_a_file_that_is_not_a_log_is_exit_2_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             kind: str) -> None:
    if kind == "binary":
        source = tmp_path / "blob.bin"
        source.write_bytes(os.urandom(1000) + b"\0" * 10)
    elif kind == "wrong_columns":
        source = tmp_path / "other.csv"
        source.write_text("name,price\nwidget,3\n")
    else:
        source = Path("/dev/zero")
        if not source.exists():
            pytest.skip("no /dev/zero here")
    rc, text = _run(capsys, "--db", str(tmp_path / "h.sqlite"), str(source))
    assert rc == 2 and "not an nvidia-smi log, nothing imported" in text, text
    if kind != "wrong_columns":
        assert "binary" in text or "header" in text


def test_a_real_log_imported_twice_is_exit_0_both_times(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, log = str(tmp_path / "h.sqlite"), str(FIXTURES / "nvsmi_a10_idle_power_cap.csv")
    rc, text = _run(capsys, "--db", db, log)
    assert rc == 0 and "360 rows imported" in text, text
    rc, text = _run(capsys, "--db", db, log)
    assert rc == 0 and "0 rows imported" in text and "360 already stored" in text, text


def test_the_database_itself_is_neither_imported_nor_overwritten(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Reading the open database through a second descriptor would drop the process's SQLite locks
    (issue 20); `export -o` onto it would truncate the file it reads."""
    db = tmp_path / "h.sqlite"
    rc, _ = _run(capsys, "--db", str(db), str(FIXTURES / "nvsmi_a10_idle_power_cap.csv"))
    assert rc == 0
    before = db.read_bytes()
    rc, text = _run(capsys, "--db", str(db), str(db))
    assert rc == 2 and "is an SQLite database" in text
    rc = cli.main(["export", "--db", str(db), "--from", "2000-01-01", "-o", str(db)], now_s=1_800_000_000.0)
    text = capsys.readouterr().err
    assert rc == 2 and "it is an SQLite database" in text, text
    assert db.read_bytes() == before
