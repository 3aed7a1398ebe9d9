"""The database file itself: opening it for writing (pragmas, checks, migrations), moving a damaged
file aside, and the explicit transactions every write goes through."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from desktop.history import schema


def connect_rw(path: Path, verify: bool) -> sqlite3.Connection:
    """An autocommit connection in WAL mode at the latest schema; ``verify`` runs a quick_check first.

    Raises sqlite3.DatabaseError for a damaged file (``codec.is_corruption`` tells which)."""
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=10.0)
    try:
        fresh = conn.execute("PRAGMA user_version").fetchone()[0] == 0 and not conn.execute(
            "SELECT 1 FROM sqlite_master LIMIT 1").fetchone()
        if fresh:  # must precede the first table
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        if verify and not fresh:
            result = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
            if result != "ok":
                raise sqlite3.DatabaseError(f"database disk image is malformed ({result})")
        schema.migrate(conn)
    except BaseException:
        conn.close()
        raise
    try:
        os.chmod(path, 0o600)
    except OSError:
        pass
    return conn


class Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception (the connection is autocommit)."""

    def __init__(self, conn: sqlite3.Connection, on_rollback: Callable[[], None]) -> None:
        self.conn = conn
        self.on_rollback = on_rollback

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

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


def move_aside(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
        n += 1
    os.replace(path, target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, target.with_name(target.name + suffix))
    return target
