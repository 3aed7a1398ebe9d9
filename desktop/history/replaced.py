"""The history database's name now means another file (issue 34 item 2): what the writer does about it.

A backup restored over the recorder's database (``mv backup.sqlite history.sqlite``) or a sync tool's
rename leaves the writer's connection on the old file, while its ``-wal`` and ``-shm`` keep their names:
the next program to open the new file reads (and, closing last, checkpoints) the old file's log into it,
and the restored history is gone with ``integrity_check`` ok. So the writer notes the file's
(st_dev, st_ino) when it opens it and compares it, one ``stat``, before each batch; when it changed:

1. ``retire``: the old connection checkpoints its log into the *old* file (through its descriptor, so a
   copy of it is whole), empties the log (``wal_checkpoint(TRUNCATE)``) and closes. SQLite leaves the
   ``-wal``/``-shm`` of a moved file in place on close; they are safe beside the new file only when the log
   is empty and nothing else is attached to the ``-shm`` (no connection of this process to either file, and
   no other process's lock on its "DMS" byte: the next opener then rebuilds it from the empty log). Else
   ``retire`` says why not (``stale``), and nothing here opens the file at the path.
2. ``reopen``: the file now at the path, when it is a Rigscope history (or nothing: a new one), is opened as
   the writer opens any (checked, migrated): its rows are kept and the samples kept in memory are written
   after them. Anything else (another program's file, a folder) and a stale log send the samples aside to a
   new file beside it, made exclusively: nothing is ever written over the file at the path.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path

from advisor.safetext import printable
from desktop.errors import UserError
from desktop.history.connections import id_open_here, open_here
from desktop.history.dbfile import resolve_db
from desktop.history.filekind import check_target
from desktop.history.store import HistoryStore

log = logging.getLogger(__name__)


#: SQLite's unix VFS: every connection attached to a ``-shm`` holds a read lock on this byte (``UNIX_SHM_DMS``).
_SHM_DMS_BYTE = 128


def _shm_attached(shm: Path) -> bool:
    """Whether another process is attached to the ``-shm`` at ``shm`` (True where that cannot be asked).

    Only asked when no connection of this process is attached to it: closing the probe's descriptor drops
    every POSIX lock this process holds on the file."""
    try:
        import fcntl
    except ImportError:  # Windows: a file open elsewhere cannot be renamed over there in the first place
        return True
    try:
        fd = os.open(shm, os.O_RDWR)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _SHM_DMS_BYTE)
    except OSError:
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, _SHM_DMS_BYTE)
        return False
    finally:
        os.close(fd)


def retire(store: HistoryStore, old_id: tuple[int, int] | None) -> str | None:
    """Checkpoint ``store``'s log into its own (old, ``old_id``) file, empty the log and close the connection.
    Returns why the file now at its name cannot be opened safely beside the old ``-wal``/``-shm`` (None: it can)."""
    path = store.path
    try:
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.Error as exc:  # a reader in the middle of a read: the log is left as it is
        log.info("history: the replaced database's log could not be checkpointed: %s", exc)
    try:
        store.close()
    except sqlite3.Error as exc:
        log.info("history: closing the replaced database: %s", exc)
    try:
        log_bytes = os.stat(f"{path}-wal").st_size
    except OSError:
        log_bytes = 0
    if log_bytes:
        return "the replaced file's write-ahead log, still at its name, could not be emptied"
    if id_open_here(old_id) or open_here(path):
        return "the replaced file (or the new one) is still open elsewhere in this program"
    if _shm_attached(Path(f"{path}-shm")):
        return "another program still has the replaced file open"
    return None


def aside_path(path: Path) -> Path:
    """A new, empty file beside ``path`` (``<name>.recorded-<UTC time>.sqlite``), made here (0600, exclusively)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    n = 0
    while True:
        candidate = path.with_name(f"{path.name}.recorded-{stamp}{f'-{n}' if n else ''}.sqlite")
        try:
            fd = os.open(candidate, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            n += 1
            continue
        os.close(fd)
        return candidate


def reopen(path: Path, *, stale: str | None, kept: int) -> tuple[HistoryStore, Path | None, str]:
    """Open where the writer goes on after its file was replaced: the file now at ``path`` (a Rigscope history,
    or none) or, when that is not one or the old log is ``stale`` (why), a new file beside it. Returns the
    store, the aside file (None: the file at ``path``) and the one line that says so (``kept``: samples in memory).

    Raises what opening raises for a passing condition (a full disk, a busy file): the caller retries."""
    shown = printable(path)
    what = f"{kept:,} sample{'' if kept == 1 else 's'} waiting" if kept else "the samples from now on"
    what += " goes" if kept == 1 else " go"
    change = "was replaced by another file" if os.path.lexists(path) else "was moved away or deleted"
    head = (f"the history database {shown} {change} (a restored backup, a sync tool?); stopped writing into the "
            "file this recording opened")
    store, why = (None, stale) if stale is not None else _open_there(path)
    if store is not None:
        moved = (f" (it was damaged: moved to {printable(store.recovered_from)}, a fresh one started)"
                 if store.recovered_from is not None else "")
        return store, None, (f"{head}; {what} to the file now at that name{moved}, after its own rows, "
                             "which are kept")
    aside = aside_path(Path(str(path)))
    try:
        store = HistoryStore.open(resolve_db(aside))
    except BaseException:  # a full disk: tried again next time, without a trail of empty files
        if os.stat(aside).st_size == 0:
            os.unlink(aside)
        raise
    return store, aside, (f"{head}; {what} to a new file beside it, {printable(aside)}, and the file at that "
                          f"name is left as it is ({printable(why)})")


def _open_there(path: Path) -> tuple[HistoryStore | None, str | None]:
    """The history now at ``path`` opened for writing, or None and why it is not one to write."""
    try:
        check_target(Path(str(path)))  # a plain Path: checked again, as the file there is another one
        store = HistoryStore.open(resolve_db(path), verify=True)
    except UserError as exc:  # another program's file (damaged or not), a folder: not ours to write
        return None, str(exc)
    if store.is_demo:  # live samples never mix into a simulated week (the window's rule too)
        store.close()
        return None, "it is a demo database (rigscope demo), which live samples never go into"
    return store, None
