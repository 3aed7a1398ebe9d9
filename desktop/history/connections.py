"""Every connection to a history database is made here and known to this process, which can then say
whether it holds a file open (``open_here``).

That matters because SQLite's locks are POSIX advisory locks, which belong to the *process*: closing
*any* descriptor of the file drops all of them ("How To Corrupt An SQLite Database File", 2.2).
The window holds the writer's connection and opened the file once more to read its header;
closing that descriptor dropped the writer's locks, the next command to close its connection
believed it was the last, checkpointed and deleted the write-ahead log, and the window went on
appending to a log with no name. So a file with a live connection here is never opened by any
other means: ``filekind.header_kind`` answers "ours" for it without reading it (a connection to it
was opened and checked), and it is never moved aside.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from pathlib import Path


class _Connection(sqlite3.Connection):
    """A connection ``connect`` made: the registry of open databases holds it weakly (a plain
    ``sqlite3.Connection`` cannot be weakly referenced)."""

    file_id: tuple[int, int] | None = None


_OPEN: weakref.WeakSet[_Connection] = weakref.WeakSet()
_OPEN_LOCK = threading.Lock()


def file_id(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file at ``path``, None when it is missing: which file a name means now."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _is_live(conn: sqlite3.Connection) -> bool:
    try:
        conn.total_changes  # noqa: B018 - raises ProgrammingError once closed
    except sqlite3.ProgrammingError:
        return False
    return True


def connect(target: str, *, uri: bool = False, timeout: float = 10.0) -> sqlite3.Connection:
    """``sqlite3.connect`` for a history database (autocommit, any thread), known to ``open_here``.

    ``target`` is a path, or with ``uri`` a ``file:`` URI whose path part names the file."""
    conn = sqlite3.connect(target, uri=uri, isolation_level=None, check_same_thread=False, timeout=timeout,
                           factory=_Connection)
    assert isinstance(conn, _Connection)
    file = target
    if uri:
        from urllib.parse import unquote, urlsplit

        file = unquote(urlsplit(target).path)
        if len(file) > 2 and file[0] == "/" and file[2] == ":":  # file:///C:/... on Windows
            file = file[1:]
    register(conn, Path(file))
    return conn


def register(conn: sqlite3.Connection, path: Path) -> None:
    """Note (again) which file ``conn`` holds: called once the file surely exists."""
    if isinstance(conn, _Connection):
        conn.file_id = file_id(path)
        with _OPEN_LOCK:
            _OPEN.add(conn)


def open_here(path: Path) -> bool:
    """Whether this process holds a live connection to the file at ``path`` (any name of it).

    While it does, nothing in this process may open the file by other means (see the module text)."""
    return id_open_here(file_id(path))


def id_open_here(file: tuple[int, int] | None) -> bool:
    """``open_here`` for the file with this (st_dev, st_ino), whatever its name now (or none)."""
    if file is None:
        return False
    with _OPEN_LOCK:
        conns = [c for c in _OPEN if c.file_id == file]
    return any(_is_live(c) for c in conns)
