"""The database file itself: what may be opened or moved aside, opening it for writing (pragmas,
checks, migrations), moving a damaged file aside, and the explicit transactions every write goes through.

Rigscope touches only its own files. A file given as ``--db`` is a Rigscope database when its
SQLite header carries ``APPLICATION_ID`` (every file since issue 12) or, for older files, when it
holds Rigscope's tables; an empty file is a new database. Anything else (a text file, another
program's SQLite database) is refused and left byte for byte alone, damaged or not. An existing
file's permissions are never changed: a read-only database is refused with a message.

Every connection to a history database is made by ``connect`` and known to this process. That
matters because SQLite's locks are POSIX advisory locks, which belong to the *process*: closing
*any* descriptor of the file drops all of them ("How To Corrupt An SQLite Database File", 2.2).
The window holds the writer's connection and opened the file once more to read its header;
closing that descriptor dropped the writer's locks, the next command to close its connection
believed it was the last, checkpointed and deleted the write-ahead log, and the window went on
appending to a log with no name. So a file with a live connection here is never opened by any
other means: ``header_kind`` answers "ours" for it without reading it (a connection to it was
opened and checked), and it is never moved aside.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from advisor.safetext import printable
from desktop.errors import UserError
from desktop.history import dberrors, schema

#: ``PRAGMA application_id`` of a Rigscope history database: "RgSc", big-endian at header offset 68.
APPLICATION_ID = 0x52675363
SQLITE_MAGIC = b"SQLite format 3\0"
#: Tables every Rigscope schema version has had (since v1): how a file from before the marker is known.
_OWN_TABLES = frozenset({"meta", "gpu_samples"})

Kind = Literal["missing", "empty", "ours", "foreign", "unknown"]


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


if sys.platform == "win32":
    from pathlib import WindowsPath as _SystemPath
else:
    from pathlib import PosixPath as _SystemPath


class DbPath(_SystemPath):
    """A history database's path as ``resolve_db`` made it: absolute, ``~`` expanded, symlinks resolved
    (a symlink and the file it names are one database: one writer lock, one ``-wal``), and checked
    (``check_target``). The writer lock, the store, the writer and the orphaned-job pass take it as it
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
    (``check_target``: a folder, a device, a file that is not SQLite, another program's database).
    A ``DbPath`` is returned as it is: it was resolved and checked when it was made."""
    if isinstance(value, DbPath):
        return value
    path = DbPath(os.path.realpath(Path(value).expanduser()))
    check_target(path)
    return path


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


def move_aside(path: Path) -> Path:
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
