"""Read-only media: a history database on a read-only mount or in a folder this user cannot write (issue 34 item 6).

SQLite reads a WAL database only where it can open its ``-shm`` file: a reader on a read-only mount (a
backup disk mounted ``ro``, a snapshot, a CD) cannot create one, and ``file:…?mode=ro`` answers "unable to
open database file". There ``connect_readonly`` opens the file ``immutable=1`` (no ``-shm``, no locks: the
file is taken as it is), which reads everything except a write-ahead log SQLite cannot use without its
``-shm`` (said, with its size). Where the ``-shm`` exists, ``mode=ro`` reads database and log alike.

Writing there is refused before anything is made: ``refuse_write`` turns the lock file's ``OSError`` into
one line naming the folder (`rigscope record` exits 2, no traceback).
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

from advisor.safetext import printable
from desktop.errors import UserError
from desktop.history import dberrors
from desktop.history.connections import connect

log = logging.getLogger(__name__)

#: Files already said to be on read-only media, once per process (readers reopen the file often).
_SAID: set[Path] = set()


def _existing(folder: Path) -> Path:
    """``folder``, or where it would be made: its nearest existing parent."""
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return folder


def readonly_mount(folder: Path) -> bool:
    """Whether ``folder`` (or, missing, the folder it would be made in) is on a file system mounted read-only
    (False where that cannot be asked: Windows)."""
    statvfs = getattr(os, "statvfs", None)
    if statvfs is None:
        return False
    try:
        return bool(statvfs(_existing(folder)).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def folder_unwritable(folder: Path) -> bool:
    """Whether nothing new can be made in ``folder`` (or, missing, it cannot be made): a read-only mount, or
    no write permission for this user."""
    return readonly_mount(folder) or not os.access(_existing(folder), os.W_OK)


def why_unwritable(folder: Path) -> str:
    """"on a read-only file system" or "in a folder you cannot write": the words for ``folder``."""
    return "on a read-only file system" if readonly_mount(folder) else "in a folder you cannot write"


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection to the history database at ``path``, probed (its version read).

    ``mode=ro`` first; where that cannot open the file because its folder takes no new file (the ``-shm``),
    ``immutable=1``. Either way, on read-only media one line says how it is read. Raises what SQLite raises
    when neither opens it (the caller words it)."""
    uri = path.absolute().as_uri()
    conn = connect(f"{uri}?mode=ro", uri=True)
    try:
        conn.execute("PRAGMA user_version").fetchone()
    except sqlite3.DatabaseError as exc:
        conn.close()
        # "unable to open" on a read-only mount, "readonly" (its -shm's folder) in a folder without write permission
        if dberrors.problem(exc) not in ("cannot_open", "read_only") or not folder_unwritable(path.parent):
            raise
        conn = connect(f"{uri}?immutable=1", uri=True)
        try:
            conn.execute("PRAGMA user_version").fetchone()
        except BaseException:
            conn.close()
            raise
        _say(path, immutable=True)
        return conn
    if folder_unwritable(path.parent):
        _say(path, immutable=False)
    return conn


def _say(path: Path, *, immutable: bool) -> None:
    if path in _SAID:
        return
    _SAID.add(path)
    where = why_unwritable(path.parent)
    if not immutable:
        log.warning("the history database %s is %s: reading it read-only (nothing is written to it)",
                    printable(path), where)
        return
    try:
        log_bytes = os.stat(f"{path}-wal").st_size
    except OSError:
        log_bytes = 0
    unread = (f"; its write-ahead log ({log_bytes:,} bytes, the last samples a writer committed) cannot be read "
              "without a -shm file there and is left out" if log_bytes else "")
    log.warning("the history database %s is %s: reading it read-only, as a file that does not change "
                "(SQLite cannot make its -shm file there)%s", printable(path), where, unread)


def refuse_write(db_path: Path, exc: OSError | None) -> UserError:
    """The one line for a history that cannot be written because its folder takes no file (read-only media,
    no permission; ``exc``: the error that showed it, None when ``folder_unwritable`` did): what `record`,
    `import`, `stress` and the window say instead of a traceback."""
    folder = db_path.parent
    found = dberrors.problem(exc) if exc is not None else None
    if found == "read_only" or readonly_mount(folder):
        why = "its folder is on a read-only file system"
    elif exc is None or found == "no_permission":
        why = "you have no permission to create files in its folder"
    else:
        why = exc.strerror or str(exc)
    readers = "readers (advise, export, report) can still read it, and " if db_path.exists() else ""
    return UserError(f"cannot write the history database {printable(db_path)}: {why} ({printable(folder)}); {readers}"
                     "--db PATH writes to a writable place")


def require_writable_folder(db_path: Path) -> None:
    """Refuse (``refuse_write``) a history whose folder takes no new file, before anything reads or writes it."""
    if folder_unwritable(db_path.parent):
        raise refuse_write(db_path, None)
