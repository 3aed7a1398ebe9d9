"""HistoryWriter: the one thread that writes the history database, fed without blocking.

``submit`` only appends to a bounded buffer; the writer thread commits the buffer every
``flush_interval_s`` (or on ``flush``/``close``) in one transaction. Write failures are
sorted into three kinds: a full disk (keep sampling, say so once, keep the newest
``max_buffer`` snapshots, counting what is dropped, and retry until space returns), an
environment problem (read-only file system, permissions: a clear message, retried the
same way), and anything else (a bug: logged with its traceback, that batch dropped).
The first two are logged at INFO only: ``status`` is how the owner (the recording's tick,
desktop/recorder.py) learns of them and tells the user once. Rollups and retention are the owner's too:
it schedules them and hands each pass in through ``call``. Before each batch it checks, with one ``stat``,
that the database's name still means the file it opened: a file renamed over it (a restored backup) is
never written through the old file's log; the samples go to the file now there, or beside it
(``desktop.history.replaced``), said once through ``take_notices``.
"""

from __future__ import annotations

import collections
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from advisor.safetext import printable
from desktop.history import dberrors, replaced
from desktop.history.connections import file_id
from desktop.history.dbfile import resolve_db
from desktop.history.lock import WriterLock
from desktop.history.store import HistoryStore
from desktop.history.writer_status import WriterStatus, describe_loss

if TYPE_CHECKING:
    from desktop.telemetry.model import Snapshot

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Six hours at 1 Hz (~1-1.5 KB per snapshot, so ~30 MB): what is kept in memory while the disk is full.
DEFAULT_MAX_BUFFER = 6 * 3600


class HistoryWriter:
    """Owns the writer thread and the store it writes; takes the single-writer lock on start."""

    def __init__(self, store_path: Path, flush_interval_s: float = 5.0, max_buffer: int = DEFAULT_MAX_BUFFER,
                 *, lock: bool = True) -> None:
        """``lock``: take the single-writer lock (tests of the writer alone may not). Rollups and retention are
        the owner's to schedule (desktop/recorder.py): each pass comes through ``call``."""
        self.store_path = store_path if isinstance(store_path, Path) else Path(store_path)  # a DbPath stays one
        self.flush_interval_s = flush_interval_s
        self.max_buffer = max(1, max_buffer)
        self._lock = WriterLock(self.store_path) if lock else None
        self._cond = threading.Condition()
        self._buffer: collections.deque[tuple[int, Snapshot]] = collections.deque()
        self._events: list[tuple[float, str, str | None, str]] = []
        self._tasks: list[tuple[Callable[[HistoryStore], Any], Future[Any]]] = []
        self._submitted = 0
        # flush() asks with a number; the thread answers with the highest number it has served.
        self._flush_asked = 0
        self._flush_served = 0
        self._stopping = False
        self._written = 0
        self._dropped = 0
        self._last_error: str | None = None
        self._disk_full = False
        self._last_commit_s: float | None = None
        self._store: HistoryStore | None = None
        #: Connections whose write-ahead log was taken away: kept, never used or closed (see ``_check_wal``).
        self._orphaned: list[HistoryStore] = []
        #: (st_dev, st_ino) of the ``-wal`` file this connection writes, once a commit made it.
        self._wal_id: tuple[int, int] | None = None
        #: The file written (``store_path``, or the file beside it the samples went to) and its (st_dev, st_ino)
        #: when opened: another file at that name (a backup renamed over it) is never written (``_follow_file``).
        self._target: Path = self.store_path
        self._db_id: tuple[int, int] | None = None
        #: Why the file now at the name cannot be opened beside the replaced file's -wal/-shm (None: it can).
        self._stale: str | None = None
        #: Where the samples went instead of ``store_path`` (None: there).
        self.aside: Path | None = None
        #: Lines for the owner to say once each (``take_notices``): the database file replaced, and where samples go.
        self._notices: list[str] = []
        self._thread: threading.Thread | None = None
        self.recovered_from: Path | None = None
        #: What ``close`` could not write (None when everything was), for the owner to tell the user.
        self.lost_on_close: str | None = None

    # --- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Take the lock (DatabaseBusy if another process writes), open the store, start the thread."""
        if self._thread is not None:
            return
        # The path resolved and checked once (dbfile.resolve_db): the lock and the store take it as it is.
        self.store_path = resolve_db(self.store_path)
        if self._lock is not None:
            self._lock = WriterLock(self.store_path)
            self._lock.acquire()
        try:
            self._store = HistoryStore.open(self.store_path, verify=True)
        except BaseException:
            if self._lock is not None:
                self._lock.release()
            raise
        self.recovered_from = self._store.recovered_from
        self._target = self.store_path
        self._db_id = file_id(self.store_path)
        self._thread = threading.Thread(target=self._run, name="rigscope-history-writer", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Write what is pending (one last try), stop the thread, close the store, release the lock."""
        thread = self._thread
        if thread is None:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        thread.join()
        with self._cond:
            self._thread = None
            self._cond.notify_all()
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._lock is not None:
            self._lock.release()
        if self._buffer:
            self.lost_on_close = describe_loss([s for _, s in self._buffer], self._last_error)
            log.error("history: %s", self.lost_on_close)

    def __enter__(self) -> HistoryWriter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- feeding (any thread) --------------------------------------------------------------

    def submit(self, snapshot: Snapshot) -> None:
        with self._cond:
            self._submitted += 1
            self._buffer.append((self._submitted, snapshot))
            while len(self._buffer) > self.max_buffer:
                self._buffer.popleft()
                self._dropped += 1

    def add_event(self, time_s: float, kind: str, gpu_uuid: str | None, detail: str = "") -> None:
        with self._cond:
            self._events.append((time_s, kind, gpu_uuid, detail))

    def call(self, fn: Callable[[HistoryStore], T]) -> Future[T]:
        """Run ``fn(store)`` on the writer thread (rollups, retention, stress results); returns its future."""
        future: Future[T] = Future()
        with self._cond:
            if self._thread is None:
                raise RuntimeError("the history writer is not running")
            self._tasks.append((fn, future))
            self._cond.notify_all()
        return future

    def flush(self, timeout_s: float | None = None) -> bool:
        """Block until everything submitted so far had a write attempt; True when it is all written."""
        with self._cond:
            if self._thread is None:
                return not self._buffer
            target = self._submitted
            self._flush_asked += 1
            ticket = self._flush_asked
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._flush_served >= ticket or self._thread is None, timeout_s)
            return not any(seq <= target for seq, _ in self._buffer) and not self._events

    def take_notices(self) -> list[str]:
        """What happened to the database file since the last call (one line each), for the owner to say."""
        with self._cond:
            notices, self._notices = self._notices, []
        return notices

    @property
    def status(self) -> WriterStatus:
        with self._cond:
            return WriterStatus(self._written, len(self._buffer), self._last_error, self._disk_full,
                                self._dropped, self._last_commit_s, self._submitted)

    # --- the writer thread --------------------------------------------------------------------

    def _run(self) -> None:
        next_write = time.monotonic() + self.flush_interval_s
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._stopping or self._flush_asked > self._flush_served or bool(self._tasks),
                    max(0.0, next_write - time.monotonic()))
                stopping = self._stopping
                ticket = self._flush_asked
                batch = list(self._buffer)
                events = list(self._events)
                tasks, self._tasks = self._tasks, []
            try:
                self._follow_file(final=stopping)
            except Exception:  # the thread must survive anything: the samples wait in memory
                log.exception("history: checking the database file failed")
            if batch or events:
                self._write(batch, events)
            next_write = time.monotonic() + self.flush_interval_s
            for fn, future in tasks:
                self._run_task(fn, future)
            with self._cond:
                self._flush_served = max(self._flush_served, ticket)
                self._cond.notify_all()
            if stopping:
                with self._cond:
                    for _, future in self._tasks:
                        future.cancel()
                    self._tasks = []
                return

    def _run_task(self, fn: Callable[[HistoryStore], Any], future: Future[Any]) -> None:
        if not future.set_running_or_notify_cancel():
            return
        if self._store is None:
            future.set_exception(RuntimeError(self._last_error or "the history database file was replaced"))
            return
        try:
            future.set_result(fn(self._store))
        except BaseException as exc:  # handed to whoever waits on the future
            if isinstance(exc, sqlite3.Error):
                self._note_failure(exc)
            future.set_exception(exc)

    def _wal_file_id(self) -> tuple[int, int] | None:
        return file_id(Path(f"{self._target}-wal"))

    def _check_wal(self) -> None:
        """Reopen the database when the write-ahead log this connection writes no longer has its name.

        That happens only when something broke SQLite's locks (see ``connections``): every commit after
        it would go to a file nobody else can see, and be lost. The old connection is kept, unused
        and never closed, until the process ends: closing it could checkpoint its orphaned log
        into the database or delete the new log by name."""
        if self._wal_id is None or self._wal_file_id() == self._wal_id:
            return
        assert self._store is not None
        message = ("the history database's write-ahead log was removed behind this writer (its file locks "
                   "were lost); reopened the database so that samples land in it again")
        log.error("history: %s (%s)", message, self._target)
        self._orphaned.append(self._store)
        self._store = HistoryStore.open(self._target)
        self._wal_id = None
        with self._cond:
            self._last_error = message

    def _follow_file(self, *, final: bool = False) -> None:
        """Stop writing the file it opened once its name means another file; write to the one there, or aside.

        One ``stat`` when nothing changed. The samples stay in memory until the new file is open; a new file
        that cannot be opened now (busy, a full disk) is tried again next time, and aside at the ``final``
        write, so nothing waits past the close."""
        if self._store is not None:
            if self._db_id is None or file_id(self._target) == self._db_id:
                return
            log.info("history: %s no longer is the file this writer opened (renamed over or removed); "
                     "closing the old one", self._target)
            self._stale = replaced.retire(self._store, self._db_id)
            self._store = None
            self._wal_id = None
        with self._cond:
            kept = len(self._buffer)
        try:
            try:
                store, aside, line = replaced.reopen(self.store_path, stale=self._stale, kept=kept)
            except Exception:
                if not final:
                    raise
                store, aside, line = replaced.reopen(  # the last chance: aside
                    self.store_path, stale=self._stale or "the file at that name could not be opened", kept=kept)
        except Exception as exc:  # kept in memory; tried again at the next interval
            with self._cond:
                self._last_error = (f"the history database {printable(self.store_path)} was replaced by another "
                                    f"file, which cannot be opened yet ({exc}); keeping samples in memory")
            return
        self._store = store
        self._target = aside if aside is not None else self.store_path
        self._db_id = file_id(self._target)
        self.aside = aside
        log.info("history: %s", line)  # said by the owner (take_notices)
        with self._cond:
            self._notices.append(line)
            self._last_error = None

    def _write(self, batch: list[tuple[int, Snapshot]], events: list[tuple[float, str, str | None, str]]) -> None:
        if self._store is None:  # the replaced file's successor is not open yet: the batch waits
            return
        try:
            self._check_wal()
        except Exception as exc:  # the reopen failed: the batch stays in memory, retried next interval
            with self._cond:
                self._last_error = f"cannot reopen the history database: {exc}"
            return
        store = self._store
        assert store is not None
        try:
            with store.transaction():
                if batch:
                    # write_snapshots opens its own transaction; nest by writing inside ours.
                    store.write_snapshots_in_transaction([s for _, s in batch])
                for event in events:
                    store.add_event(*event)
        except Exception as exc:  # the thread must survive anything: the owner keeps submitting
            if isinstance(exc, (sqlite3.Error, OSError)) and self._note_failure(exc):
                return  # kept in the buffer, retried at the next interval
            if not isinstance(exc, (sqlite3.Error, OSError)):
                with self._cond:
                    self._last_error = f"history write failed: {exc!r}"
            # A bug in one snapshot (one value nobody foresaw) costs that snapshot, not the batch.
            log.exception("history: a batch of %d snapshots could not be written; writing them one by one",
                          len(batch))
            dropped = self._write_one_by_one(store, batch, events)
            with self._cond:
                self._forget(batch, events)
                self._dropped += dropped
                self._written += len(batch) - dropped
            return
        if self._wal_id is None:
            self._wal_id = self._wal_file_id()
        with self._cond:
            self._forget(batch, events)
            self._written += len(batch)
            self._last_commit_s = time.time()
            if self._disk_full or self._last_error:
                log.info("history: writing again (%d snapshots caught up)", len(batch))
            self._disk_full = False
            self._last_error = None

    def _write_one_by_one(self, store: HistoryStore, batch: list[tuple[int, Snapshot]],
                          events: list[tuple[float, str, str | None, str]]) -> int:
        """Each snapshot (then each event) in its own transaction; returns how many snapshots failed."""
        failed = 0
        for _, snap in batch:
            try:
                with store.transaction():
                    store.write_snapshots_in_transaction([snap])
            except Exception:
                failed += 1
        for event in events:
            try:
                with store.transaction():
                    store.add_event(*event)
            except Exception:
                log.warning("history: event %s could not be written and is dropped", event[1])
        if failed:
            log.error("history: %d of %d snapshots could not be written and are dropped", failed, len(batch))
        return failed

    def _forget(self, batch: list[tuple[int, Snapshot]], events: list[tuple[float, str, str | None, str]]) -> None:
        last = batch[-1][0] if batch else 0
        while self._buffer and self._buffer[0][0] <= last:
            self._buffer.popleft()
        del self._events[: len(events)]

    def _note_failure(self, exc: BaseException) -> bool:
        """Record an environment failure (True: retry later) or say it is a bug (False)."""
        if dberrors.is_disk_full(exc):
            message = f"the disk holding {self.store_path} is full; keeping samples in memory until space returns"
            with self._cond:
                first = not self._disk_full
                self._disk_full = True
                self._last_error = message
            if first:
                log.info("history: %s", message)
            return True
        reason = dberrors.environment_problem(exc)
        if reason is None:
            with self._cond:
                self._last_error = f"history write failed: {exc}"
            return False
        with self._cond:
            first = self._last_error != reason
            self._last_error = reason
        if first:
            log.info("history: %s (%s); retrying", reason, self.store_path)
        return True
