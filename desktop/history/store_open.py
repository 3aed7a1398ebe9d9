"""Which connection a ``HistoryStore`` gets for a path: opened for writing (the file created 0600 where
missing, a damaged Rigscope file moved aside and a fresh one started), or read-only (an older file upgraded
once by writing it first, a newer one read as far as this version understands it, said once).

A file that is not Rigscope's is refused (``filekind.NotOurDatabase``) and never moved; every other failure
is one ``UserError`` line that says what to do.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

from desktop.errors import UserError
from desktop.history import dberrors, media, schema
from desktop.history.dbfile import DbPath, connect_rw
from desktop.history.filekind import NotOurDatabase, is_own_connection, may_move_aside, move_aside
from desktop.paths import ensure_private_dir

# The store's logger: what `rigscope` prints names it ("WARNING desktop.history.store: ..."), as before this
# module was split out of store.py.
log = logging.getLogger("desktop.history.store")


def _create_private(path: Path) -> None:
    """Create the empty database file, 0600. Only a file made here is chmod-ed (the umask may have
    taken the owner's own bits); one that appeared meanwhile is someone else's and keeps its mode."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    try:
        if hasattr(os, "fchmod"):  # POSIX
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


_WARNED_NEWER: set[Path] = set()


def _warn_newer(path: Path, version: int) -> None:
    """Said once per file and process: what a reader shows may lack what a newer Rigscope stored."""
    if path in _WARNED_NEWER:
        return
    _WARNED_NEWER.add(path)
    log.warning("the history database %s was written by a newer Rigscope (schema version %d; this one knows up "
                "to %d): it is read as far as this version understands it, and newer figures are left out; "
                "update Rigscope to see everything", path, version, schema.SCHEMA_VERSION)


def open_rw(path: DbPath, verify: bool) -> tuple[sqlite3.Connection, Path | None]:
    """A connection for writing at the latest schema, and where a corrupt file found at ``path`` was moved
    (None when none was). ``verify`` also runs ``PRAGMA quick_check`` (``dbfile.connect_rw``)."""
    media.require_writable_folder(path)  # read-only media: one line, before anything is made or written
    try:
        ensure_private_dir(path.parent)
        if not path.exists():
            _create_private(path)
    except OSError as exc:
        raise UserError(f"cannot create the history database {path}: {exc.strerror or exc} "
                        "(a read-only file system, missing permission, or a file where a folder should be)"
                        ) from exc
    recovered: Path | None = None
    try:
        conn = connect_rw(path, verify)
    except sqlite3.DatabaseError as exc:
        if not dberrors.is_corruption(exc):
            raise _as_user_error(path, exc) from exc
        if not may_move_aside(path):  # only a damaged *Rigscope* database is ours to move
            raise NotOurDatabase(path, "it is a damaged SQLite file that does not say it is Rigscope's"
                                 ) from exc
        recovered = move_aside(path)
        log.info("history database %s was corrupt; moved it to %s and started a fresh one", path, recovered)
        conn = connect_rw(path, verify)
    return conn, recovered


def open_readonly(path: DbPath) -> sqlite3.Connection:
    """A read-only connection to the Rigscope database at ``path``, upgraded first when it is older."""
    if not path.exists():
        raise UserError(f"no history database at {path} (start `rigscope record`, or `rigscope demo`)")
    conn: sqlite3.Connection | None = None
    try:
        conn = media.connect_readonly(path)  # immutable=1 where read-only media take no -shm (said once)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        own = is_own_connection(conn)
    except sqlite3.DatabaseError as exc:
        if conn is not None:
            conn.close()
        if dberrors.is_corruption(exc) and not may_move_aside(path):
            raise NotOurDatabase(path, "it is a damaged SQLite file that does not say it is Rigscope's") from exc
        raise _as_user_error(path, exc) from exc
    if own is False:
        conn.close()
        raise NotOurDatabase(path, "it is another program's SQLite database")
    if version < schema.SCHEMA_VERSION:  # an older file nobody has opened for writing yet
        conn.close()
        if media.folder_unwritable(path.parent):
            raise UserError(f"the history database {path} was written by an older Rigscope (schema version "
                            f"{version}) and is upgraded once by writing it, but it is "
                            f"{media.why_unwritable(path.parent)}: copy it to a writable folder and read the copy")
        open_rw(path, verify=False)[0].close()
        return open_readonly(path)
    if version > schema.SCHEMA_VERSION:
        _warn_newer(path, int(version))
    return conn


def _as_user_error(path: Path, exc: sqlite3.DatabaseError) -> UserError:
    """The one line a user reads when the database at ``path`` cannot be opened."""
    if dberrors.is_corruption(exc):
        return UserError(f"the history database {path} is damaged ({exc}); open it once for writing "
                         "(`rigscope record`) to move it aside and start a fresh one")
    reason = dberrors.environment_problem(exc) or str(exc)
    return UserError(f"cannot open the history database {path}: {reason}")
