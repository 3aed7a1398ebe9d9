"""The one classifier of what the environment does to the history database (issue 23 item 3).

Every opener and writer (``HistoryStore.open``, the writer thread, `rigscope import`, a stress run's
save) asks ``problem`` what an ``sqlite3`` or ``OSError`` error means, and says it in the words
``environment_problem`` gives: a full disk, a read-only file or file system, no permission, a
database another process keeps locked, a file that is not (or no longer) a database. ``None`` is
a bug: the caller lets its traceback through. SQLite names the cause in ``sqlite_errorname``
(Python 3.11); older messages are matched by their text, an ``OSError`` by its errno.
"""

from __future__ import annotations

import errno
import sqlite3
from typing import Literal

Problem = Literal["disk_full", "read_only", "no_permission", "busy", "cannot_open", "damaged", "io_error"]

#: The user's words for each problem (the writer and the import add what happens next).
SENTENCES: dict[Problem, str] = {
    "disk_full": "the disk is full (or the database reached its size limit)",
    "read_only": "the history database is read-only (a read-only file system or missing write permission)",
    "no_permission": "no permission to write the history database",
    "busy": "the history database is locked by another process for longer than Rigscope waits (30 s)",
    "cannot_open": "the history database cannot be opened (check the folder exists and is writable)",
    "damaged": "the history database file is damaged; restart to move it aside and start a fresh one",
    "io_error": "a disk I/O error while writing the history database",
}


def _name(exc: BaseException) -> str:
    return getattr(exc, "sqlite_errorname", "") or ""


def is_corruption(exc: BaseException) -> bool:
    """SQLITE_CORRUPT / SQLITE_NOTADB: the file itself is damaged or not a database (not busy, not read-only)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    if _name(exc).startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return True
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def problem(exc: BaseException) -> Problem | None:
    """What ``exc`` says about the database's environment; None when it is no such problem (a bug)."""
    name = _name(exc)
    text = str(exc).lower()
    code = getattr(exc, "errno", None) if isinstance(exc, OSError) else None
    if name.startswith("SQLITE_FULL") or "disk is full" in text or "no space left" in text or code == errno.ENOSPC:
        return "disk_full"
    if name.startswith("SQLITE_READONLY") or "readonly database" in text or "read-only" in text \
            or code == errno.EROFS:
        return "read_only"
    if name.startswith(("SQLITE_CANTOPEN", "SQLITE_PERM")) or "unable to open" in text:
        return "cannot_open"
    if isinstance(exc, PermissionError):
        return "no_permission"
    if is_corruption(exc):
        return "damaged"
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in text:
        return "busy"
    if name.startswith("SQLITE_IOERR") or "disk i/o error" in text:
        return "io_error"
    return None


def is_disk_full(exc: BaseException) -> bool:
    return problem(exc) == "disk_full"


def environment_problem(exc: BaseException) -> str | None:
    """The user's sentence for ``exc`` when the environment caused it; None for a bug."""
    found = problem(exc)
    if found is None:
        return None
    if found == "no_permission":
        return f"{SENTENCES[found]} ({exc})"
    return SENTENCES[found]
