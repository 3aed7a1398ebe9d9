"""The single-writer lock of a history database: an OS file lock on ``<db>.lock``.

The lock is named after the database's real path (symlinks resolved), so every name of one
file meets one lock. It is an exclusive ``flock`` (Linux, macOS) or ``msvcrt.locking``
(Windows) on a side file, so it dies with its process: a recorder killed with SIGKILL never
leaves a stale lock behind. The holder writes its pid, command and host into the file, so a
refused second writer can say who holds it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from advisor.safetext import printable
from desktop.errors import UserError
from desktop.history.dbfile import resolve_db
from desktop.history.media import refuse_write
from desktop.paths import ensure_private_dir

#: Windows locks byte ranges and refuses reads inside them: lock a byte far past the holder text.
_WIN_LOCK_OFFSET = 1 << 20
_MAX_HOLDER_BYTES = 4096


class DatabaseBusy(UserError):
    """Another process writes this database; ``holder`` is what it wrote about itself."""

    def __init__(self, db_path: Path, holder: dict[str, Any] | None) -> None:
        self.db_path = db_path
        self.holder = holder or {}
        who = describe_holder(self.holder)
        super().__init__(f"the history database {db_path} is already being written by {who}; "
                         "only one process may write it at a time (stop that one first; the window reads "
                         "the database while a recorder runs)")


def describe_holder(holder: dict[str, Any]) -> str:
    if not holder:
        return "another Rigscope process"
    # Whoever can write the lock file (a shared folder) chooses these: shown escaped, wherever shown.
    parts = [f"pid {printable(holder.get('pid', '?'))}"]
    if holder.get("command"):
        parts.append(f"command {printable(repr(holder['command']))}")
    if holder.get("host"):
        parts.append(f"host {printable(holder['host'])}")
    return "another process (" + ", ".join(parts) + ")"


def _try_lock(handle: IO[bytes]) -> bool:
    if sys.platform == "win32":
        import msvcrt

        handle.seek(_WIN_LOCK_OFFSET)
        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: held elsewhere
        return False
    return True


def _unlock(handle: IO[bytes]) -> None:
    if sys.platform == "win32":
        import msvcrt

        handle.seek(_WIN_LOCK_OFFSET)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
    else:
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def read_holder(lock_path: Path) -> dict[str, Any]:
    """What the current holder wrote into the lock file ({} when unreadable)."""
    try:
        with lock_path.open("rb") as handle:
            text = handle.read(_MAX_HOLDER_BYTES).split(b"\0", 1)[0].strip()
        data = json.loads(text.decode("utf-8", "replace")) if text else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _take(lock_path: Path) -> IO[bytes] | None:
    """Lock ``lock_path`` (created 0600) and write this process into it; None when another holds it."""
    ensure_private_dir(lock_path.parent)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    handle = os.fdopen(fd, "r+b")
    if not _try_lock(handle):
        handle.close()
        return None
    holder = {"pid": os.getpid(), "command": " ".join(sys.argv)[:300], "host": socket.gethostname(),
              "since_s": time.time()}
    handle.seek(0)
    handle.write(json.dumps(holder).encode() + b"\n")
    # A NUL ends the text: whatever longer text an earlier holder left after it is ignored
    # (truncating would run into the locked byte on Windows).
    handle.write(b"\0")
    handle.flush()
    return handle


def _release(handle: IO[bytes]) -> None:
    try:
        _unlock(handle)
    finally:
        handle.close()


class FileLock:
    """An OS file lock held while the object is: acquire/release or ``with``; it dies with its process
    (the writer lock here; the stress device locks in desktop/sessions/gpu_locks.py)."""

    def __init__(self, lock_path: Path) -> None:
        self.lock_path = lock_path
        self._handle: IO[bytes] | None = None

    @property
    def held(self) -> bool:
        return self._handle is not None

    def _busy(self) -> UserError:
        """The error that says who holds the lock (read from the lock file)."""
        raise NotImplementedError

    def _check(self) -> None:
        """Refuse before any lock file is made (nothing to check by default)."""

    def acquire(self) -> None:
        if self._handle is not None:
            return
        self._check()
        handle = _take(self.lock_path)
        if handle is None:
            raise self._busy()
        self._handle = handle

    def release(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            _release(handle)

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


class WriterLock(FileLock):
    """Exclusive right to write ``db_path``; ``acquire`` raises DatabaseBusy naming the holder."""

    def __init__(self, db_path: Path) -> None:
        # Named after the file, not the name given: a symlink (or a symlinked folder) to the same
        # database must meet the same lock, or two recorders would both write it. ``acquire`` resolves
        # and checks a plain path (``dbfile.resolve_db``); one resolve_db made is taken as it is.
        self.db_path = db_path
        super().__init__(db_path.with_name(db_path.name + ".lock"))

    def _check(self) -> None:
        # No lock file beside a folder, a text file or another program's database.
        self.db_path = resolve_db(self.db_path)
        self.lock_path = self.db_path.with_name(self.db_path.name + ".lock")

    def _busy(self) -> UserError:
        return DatabaseBusy(self.db_path, read_holder(self.lock_path))

    def acquire(self) -> None:
        """Take the lock; a folder that takes no lock file (read-only media, no permission) is one line, not a
        traceback (``media.refuse_write``)."""
        try:
            super().acquire()
        except OSError as exc:
            raise refuse_write(self.db_path, exc) from exc
