"""The database file opened for writing: the resolved, checked path every opener takes (``DbPath``), opening
it for writing (pragmas, checks, migrations), and the explicit transactions every write goes through.

Rigscope touches only its own files: ``filekind`` tells whose a file is, and a path is checked there when
``resolve_db`` makes it. An existing file's permissions are never changed: a read-only database is refused
with a message. Every connection is made by ``connections.connect``, so this process knows the file is open.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from desktop.errors import UserError
from desktop.history import dberrors, filekind, schema
from desktop.history.connections import connect, register
from desktop.history.filekind import APPLICATION_ID, NotOurDatabase, is_own_connection

if sys.platform == "win32":
    from pathlib import WindowsPath as _SystemPath
else:
    from pathlib import PosixPath as _SystemPath


class DbPath(_SystemPath):
    """A history database's path as ``resolve_db`` made it: absolute, ``~`` expanded, symlinks resolved
    (a symlink and the file it names are one database: one writer lock, one ``-wal``), and checked
    (``filekind.check_target``). The writer lock, the store, the writer and the orphaned-job pass take it as it
    is; a plain ``Path`` they are given goes through ``resolve_db`` first. It is a ``Path`` everywhere
    else; a path made from it (its ``.lock``, ``-wal``, parent) is a plain ``Path``, never "checked"."""

    __slots__ = ()

    @classmethod
    def _from_parsed_parts(cls, drv: str, root: str, parts: list[str]) -> Any:  # Python 3.11's derived paths
        return _SystemPath._from_parsed_parts.__func__(_SystemPath, drv, root, parts)  # type: ignore[attr-defined]

    def with_segments(self, *segments: Any) -> Any:  # Python 3.12 and later: the same, by its public hook
        return _SystemPath(*segments)


def resolve_db(value: str | os.PathLike[str]) -> DbPath:
    """The one place the user's database path (``--db``, the settings, a test's file) becomes the path every
    opener uses: ``~`` expanded, symlinks resolved, then refused if it cannot be a history database
    (``filekind.check_target``: a folder, a device, a file that is not SQLite, another program's database).
    A ``DbPath`` is returned as it is: it was resolved and checked when it was made."""
    if isinstance(value, DbPath):
        return value
    path = DbPath(os.path.realpath(Path(value).expanduser()))
    filekind.check_target(path)
    return path


def check_writable(path: Path) -> None:
    """A database without write permission is refused, never chmod-ed: its owner made it read-only."""
    try:
        info = path.stat()
    except OSError:
        return
    # Root may write anything, so the mode bits are asked too: no write bit at all means "keep it".
    if not os.access(path, os.W_OK) or not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise UserError(f"the history database {path} is read-only; Rigscope does not change a file's "
                        f"permissions: make it writable (chmod u+w {path}) or choose another --db")


#: How long opening keeps trying while other processes set up the same file (see ``connect_rw``).
SETUP_WAIT_S = 30.0


def connect_rw(path: Path, verify: bool) -> sqlite3.Connection:
    """An autocommit connection in WAL mode at the latest schema; ``verify`` runs a quick_check first.

    Several processes may open one new file at once. Before the first has switched it to WAL, the
    file is in rollback-journal mode, where SQLite answers "database is locked" at once, without
    waiting out the busy timeout, to a connection that read the file and then needs to write it while
    another commits (it would deadlock otherwise): ``PRAGMA journal_mode = WAL`` can meet that. The
    setup is then tried again, for up to ``SETUP_WAIT_S``; each migration step re-reads the version
    under its write lock, so a step another process took is not taken twice.

    Raises sqlite3.DatabaseError for a damaged file (``dberrors.is_corruption`` tells which),
    NotOurDatabase for another program's database and UserError for a read-only one."""
    deadline = time.monotonic() + SETUP_WAIT_S
    while True:
        try:
            return _connect_rw_once(path, verify)
        except sqlite3.OperationalError as exc:
            if dberrors.problem(exc) != "busy" or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def _connect_rw_once(path: Path, verify: bool) -> sqlite3.Connection:
    check_writable(path)
    conn = connect(str(path))
    try:
        own = is_own_connection(conn)
        if own is False:
            raise NotOurDatabase(path, "it is another program's SQLite database")
        fresh = own is None
        if fresh:  # must precede the first table
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        if verify and not fresh:
            result = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
            if result != "ok":
                raise sqlite3.DatabaseError(f"database disk image is malformed ({result})")
        register(conn, path)  # SQLite creates a missing file only at the first statement
        schema.migrate(conn)
        if int(conn.execute("PRAGMA application_id").fetchone()[0]) != APPLICATION_ID:
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")  # new, or from before the marker
    except BaseException:
        conn.close()
        raise
    return conn


#: BEGIN IMMEDIATE attempts, each waiting the connection's busy timeout.
_BEGIN_ATTEMPTS = 3


class Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception (the connection is autocommit)."""

    def __init__(self, conn: sqlite3.Connection, on_rollback: Callable[[], None]) -> None:
        self.conn = conn
        self.on_rollback = on_rollback

    def __enter__(self) -> None:
        # The connection waits up to its busy timeout (10 s) for the write lock; a writer beside a
        # long rollup or retention pass tries twice more before the error reaches its owner.
        for attempt in range(_BEGIN_ATTEMPTS):
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if dberrors.problem(exc) != "busy" or attempt == _BEGIN_ATTEMPTS - 1:
                    raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            try:
                self.conn.execute("COMMIT")
                return
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                self.on_rollback()
                raise
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:  # a failed statement may already have rolled back
                pass
        self.on_rollback()

