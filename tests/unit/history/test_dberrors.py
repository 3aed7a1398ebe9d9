"""One classifier of what the environment does to the history database (``dberrors``), fed with the
errors SQLite and the OS really raise; and no second copy of it elsewhere in desktop/."""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Callable
from pathlib import Path

from desktop.history import dberrors
from desktop.history.dberrors import environment_problem, problem

ROOT = Path(__file__).resolve().parents[3]


def _error(fn: Callable[[], object]) -> BaseException:
    try:
        fn()
    except Exception as exc:
        return exc
    raise AssertionError("no error raised")


def test_a_full_database_is_a_full_disk(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "full.sqlite", isolation_level=None)
    conn.execute("CREATE TABLE t (x BLOB)")
    page_count = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {page_count + 1}")
    exc = _error(lambda: [conn.execute("INSERT INTO t VALUES (?)", (b"x" * 8192,)) for _ in range(4)])
    assert problem(exc) == "disk_full"
    assert environment_problem(exc) == "the disk is full (or the database reached its size limit)"
    assert problem(OSError(errno.ENOSPC, "No space left on device")) == "disk_full"


def test_a_read_only_file(tmp_path: Path) -> None:
    path = tmp_path / "ro.sqlite"
    sqlite3.connect(path, isolation_level=None).execute("CREATE TABLE t (x)")
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    exc = _error(lambda: conn.execute("INSERT INTO t VALUES (1)"))
    assert problem(exc) == "read_only"
    assert "read-only" in (environment_problem(exc) or "")
    assert problem(OSError(errno.EROFS, "Read-only file system")) == "read_only"


def test_a_database_kept_locked_by_another_connection_is_busy(tmp_path: Path) -> None:
    path = tmp_path / "busy.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    exc = _error(lambda: other.execute("BEGIN IMMEDIATE"))
    holder.execute("ROLLBACK")
    assert problem(exc) == "busy"
    assert "locked by another process" in (environment_problem(exc) or "")


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"this is not SQLite, only text long enough to fill a header" * 20)
    conn = sqlite3.connect(path)
    exc = _error(lambda: conn.execute("SELECT * FROM sqlite_master").fetchall())
    assert dberrors.is_corruption(exc) and problem(exc) == "damaged"


def test_no_permission_and_a_missing_folder(tmp_path: Path) -> None:
    denied = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "x.sqlite"))
    assert problem(denied) == "no_permission"
    assert (environment_problem(denied) or "").startswith("no permission to write the history database (")
    exc = _error(lambda: sqlite3.connect(tmp_path / "missing" / "x.sqlite"))
    assert problem(exc) == "cannot_open"


def test_a_bug_is_no_environment_problem(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "ok.sqlite")
    assert problem(_error(lambda: conn.execute("SELECT * FROM no_such_table"))) is None
    assert environment_problem(ValueError("a bug")) is None


def test_no_other_module_classifies_database_errors_itself() -> None:
    """Every opener and writer asks dberrors: SQLite's error names and texts appear nowhere else in desktop/."""
    markers = ("SQLITE_READONLY", "SQLITE_FULL", "no space left", "readonly database", "SQLITE_CORRUPT",
               "SQLITE_BUSY", "errno.ENOSPC", "errno.EROFS", "sqlite_errorname")
    own = (ROOT / "desktop" / "history" / "dberrors.py").read_text(encoding="utf-8")
    assert all(m in own for m in markers)  # what is looked for is what the classifier itself uses
    found = {str(file.relative_to(ROOT)): [m for m in markers if m in file.read_text(encoding="utf-8")]
             for file in (ROOT / "desktop").rglob("*.py") if file.name != "dberrors.py"}
    assert {file: hits for file, hits in found.items() if hits} == {}
