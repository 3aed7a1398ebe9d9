"""Whose file a database path names, told without disturbing it: Rigscope's own (its header's application id,
or for older files its tables), empty (a new database), or anything else, which is refused and left byte for
byte alone, damaged or not; and moving a damaged Rigscope database aside.

A file given as ``--db`` is a Rigscope database when its SQLite header carries ``APPLICATION_ID`` (every
file since issue 12) or, for older files, when it holds Rigscope's tables; an empty file is a new database.
A file this process holds a connection to is never read by other means (``connections``: that would drop
its locks), nor moved aside.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path
from typing import Literal

from advisor.safetext import printable
from desktop.errors import UserError
from desktop.history import schema
from desktop.history.connections import connect, open_here

#: ``PRAGMA application_id`` of a Rigscope history database: "RgSc", big-endian at header offset 68.
APPLICATION_ID = 0x52675363
SQLITE_MAGIC = b"SQLite format 3\0"
#: Tables every Rigscope schema version has had (since v1): how a file from before the marker is known.
_OWN_TABLES = frozenset({"meta", "gpu_samples"})

Kind = Literal["missing", "empty", "ours", "foreign", "unknown"]


class NotOurDatabase(UserError):
    """``path`` exists and is not a Rigscope history database: nothing may write, migrate or move it."""

    def __init__(self, path: Path, why: str) -> None:
        self.path = path
        super().__init__(f"{path} is not a Rigscope history database; refusing to touch it ({why}). "
                         "Check the --db path")


def check_target(path: Path) -> None:
    """Refuse, before anything is created next to it, a path that cannot be a history database file:
    a folder, a device or pipe, a file that is not SQLite, another program's SQLite database."""
    try:
        info = path.stat()
    except OSError:
        return  # missing (created later) or unreadable (opening says why)
    if stat.S_ISDIR(info.st_mode):
        raise UserError(f"{printable(path)} is a folder, not a database file; give a file name inside it, "
                        f"e.g. --db {printable(path / 'history.sqlite')}")
    if not stat.S_ISREG(info.st_mode):
        raise NotOurDatabase(path, "it is not a regular file")
    kind = header_kind(path)
    if kind == "foreign" or (kind == "unknown" and _tables_say(path) is False):
        raise NotOurDatabase(path, _why_foreign(path))


def _tables_say(path: Path) -> bool | None:
    """For an SQLite file whose header does not say whose it is: True when its tables are Rigscope's,
    False when they are another program's, None when it is empty or its table list cannot be read."""
    if not _header_is_sane(_read_header(path) or b""):
        return None
    try:
        conn = connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
        try:
            names = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    if not names and version == 0:
        return None
    return names >= _OWN_TABLES


def _read_header(path: Path) -> bytes | None:
    try:
        with path.open("rb") as handle:
            return handle.read(100)
    except OSError:
        return None


def header_kind(path: Path) -> Kind:
    """What the first 100 bytes say: "ours" (our application id), "foreign" (not SQLite, or another
    program's application id), "empty" (0 bytes), "unknown" (SQLite whose header does not say whose:
    a file from before the marker, or a header too damaged to read), "missing"."""
    if not path.exists():
        return "missing"
    if open_here(path):  # a live connection of ours checked it; reading it here would drop its locks
        return "ours"
    header = _read_header(path)
    if header is None:
        return "unknown"
    if not header:
        return "empty"
    if not header.startswith(SQLITE_MAGIC):
        return "foreign"
    if not _header_is_sane(header):
        return "unknown"
    application_id = int.from_bytes(header[68:72], "big")
    if application_id == APPLICATION_ID:
        return "ours"
    return "unknown" if application_id == 0 else "foreign"


def _header_is_sane(header: bytes) -> bool:
    """The fixed fields of a SQLite header (https://www.sqlite.org/fileformat.html#the_database_header)."""
    if len(header) < 100:
        return False
    page_size = int.from_bytes(header[16:18], "big")
    valid_page = page_size == 1 or (512 <= page_size <= 32768 and page_size & (page_size - 1) == 0)
    return valid_page and header[21:24] == b"\x40\x20\x20"


def _why_foreign(path: Path) -> str:
    header = _read_header(path) or b""
    if not header.startswith(SQLITE_MAGIC):
        return "it is not an SQLite file"
    return "it is another program's SQLite database"


def is_own_connection(conn: sqlite3.Connection) -> bool | None:
    """True for a Rigscope database, False for another program's, None for an empty one (new)."""
    application_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    if application_id == APPLICATION_ID:
        return True
    if application_id != 0:
        return False
    names = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not names and int(conn.execute("PRAGMA user_version").fetchone()[0]) == 0:
        return None
    return names >= _OWN_TABLES


def is_sqlite_file(path: Path) -> bool:
    """Whether ``path`` is an SQLite database (a history database or another program's), or the
    ``-wal``/``-shm`` file of a database open here: nothing a report or an export may overwrite, and
    nothing an import may read (reading the open database by another descriptor would drop its locks)."""
    for suffix in ("-wal", "-shm", "-journal"):
        if path.name.endswith(suffix) and open_here(path.with_name(path.name.removesuffix(suffix))):
            return True
    if open_here(path):
        return True
    try:
        if not path.is_file():
            return False
    except OSError:
        return False
    return (_read_header(path) or b"").startswith(SQLITE_MAGIC)


def may_move_aside(path: Path) -> bool:
    """Whether a file SQLite called damaged is a damaged *Rigscope* database (so it may be moved aside).

    The header decides when it can: our application id yes, another's or no SQLite magic no. A file
    from before the marker (application id 0) is ours when its table list, if still readable, names
    our tables, or else when its schema version is one Rigscope has written. A header too damaged
    to read after the SQLite magic counts as ours: nothing else is left to tell by."""
    kind = header_kind(path)
    if kind in ("ours", "empty"):
        return True
    if kind != "unknown":
        return False
    header = _read_header(path) or b""
    if not _header_is_sane(header):
        return header.startswith(SQLITE_MAGIC)
    tables = _tables_say(path)
    if tables is None:  # the table list is gone too: the schema version is what is left
        return 1 <= int.from_bytes(header[60:64], "big") <= schema.SCHEMA_VERSION
    return tables


def move_aside(path: Path) -> Path:
    """Rename a damaged database, with its ``-wal`` and ``-shm``, to ``<name>.corrupt-<UTC time>`` (never deleted);
    returns the new name."""
    if open_here(path):  # renaming a file under a live connection splits it from its -wal/-shm
        raise UserError(f"the history database {path} is damaged but still open in this process; "
                        "close Rigscope's other windows and commands on it, then start again")
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
