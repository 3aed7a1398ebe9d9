"""Where `rigscope run` writes the history: its own writer when it gets the lock, else beside the recorder.

``JobHistory`` is the job's side of the history database: when `rigscope run` can take the history's writer lock
it writes the samples too, like the recorder; when the recorder holds it, the recorder's samples are the job's
telemetry and the job row, its events and its series are short transactions beside it (``JobWrites``, in order
off the job's path). A database that cannot take the job at all gets a private one for the run's lifetime.
"""

from __future__ import annotations

import collections
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TypeVar

from advisor.progress import JobSeries
from advisor.safetext import printable
from desktop.errors import UserError
from desktop.history.lock import DatabaseBusy
from desktop.history.store import HistoryStore
from desktop.history.writer import HistoryWriter
from desktop.jobs.job_writes import JobWrites, keep_aside
from desktop.jobs.model import JobRecord
from desktop.telemetry.envelope import EnvelopeWatch
from desktop.telemetry.model import Snapshot

T = TypeVar("T")


class JobHistory:
    """The history as `rigscope run` writes it: its own writer when it gets the lock, else beside the recorder.

    A database that cannot take the job (read-only, of a newer schema, damaged and not ours to move) never
    stops it: ``problem`` says why, once, and the run writes to a private database for its lifetime
    instead, so the card is built and printed as usual (and ``-o`` written), then the private one is removed.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writer: HistoryWriter | None = None
        #: Another process (the recorder, the window) writes the samples.
        self.other_writer = False
        #: Why the history at ``path`` cannot take the job (None: it can).
        self.problem: str | None = None
        self._private: Path | None = None
        #: The laptop's power envelope changes, written beside the samples as the recorder writes them.
        self._envelope = EnvelopeWatch()
        #: The job's own rows (start, heartbeats, guard events, end), in order, off the job's path.
        self.writes = JobWrites(self.do)
        #: The samples handed to our writer that it has not committed yet (the newest, as many as it holds).
        self._unwritten: collections.deque[Snapshot] = collections.deque()
        #: What could not be written in time was kept aside (``keep_aside``): closing waits no longer for it.
        self.kept_aside: Path | None = None

    def open(self) -> None:
        try:
            writer = HistoryWriter(self.path)
            try:
                writer.start()
            except DatabaseBusy:
                HistoryStore.open(self.path).close()  # the recorder writes it: can this Rigscope write beside it?
                self.other_writer = True
                return
            self.writer = writer
        except (UserError, OSError, sqlite3.Error) as exc:
            self.other_writer = False
            self.problem = " ".join(printable(exc).split()) or type(exc).__name__
            self._open_private()

    def _open_private(self) -> None:
        """A database of the run's own in a private temporary folder: the card needs the samples somewhere."""
        folder = Path(tempfile.mkdtemp(prefix="rigscope-run-"))
        self._private = folder
        writer = HistoryWriter(folder / "job.sqlite")
        try:
            writer.start()
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            self._private = None
            raise
        self.writer = writer

    def submit(self, snapshot: Snapshot) -> None:
        if self.writer is not None:
            self.writer.submit(snapshot)
            for event in self._envelope.events(snapshot):
                self.writer.add_event(*event)
            if self._private is None:
                self._unwritten.append(snapshot)
                pending = self.writer.status.rows_pending
                while len(self._unwritten) > pending:
                    self._unwritten.popleft()

    def unwritten(self) -> list[Snapshot]:
        """The samples our writer holds, not committed yet (none beside the recorder, or in a private database)."""
        if self.writer is None or self._private is not None:
            return []
        pending = self.writer.status.rows_pending
        return list(self._unwritten)[-pending:] if pending else []

    def do(self, fn: Callable[[HistoryStore], T], timeout_s: float = 60.0) -> T:
        """``fn(store)`` on the writer's thread when we hold the lock, else on a short connection of its own."""
        if self.writer is not None:
            try:
                return self.writer.call(fn).result(timeout=timeout_s)
            except FutureTimeout as exc:
                raise TimeoutError(f"the history database did not answer in {timeout_s:.3g} s") from exc
        store = HistoryStore.open(self.path)
        try:
            return fn(store)
        finally:
            store.close()

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait up to ``timeout_s`` for the samples submitted so far to be written; True when they were."""
        if self.writer is not None:
            return self.writer.flush(timeout_s=max(0.0, timeout_s))
        return True

    def keep_aside(self, record: JobRecord, series: JobSeries | None, now_s: float) -> tuple[Path, int, int]:
        """What the history did not take in time, in a database of its own beside it (``job_writes.keep_aside``):
        (its path, the job's id there, how many samples); nothing more is written here after it."""
        self.writes.abandon()
        snapshots = self.unwritten()
        path, job_id = keep_aside(self.path, record, series, snapshots, now_s)
        self.kept_aside = path
        return path, job_id, len(snapshots)

    def close(self) -> None:
        """Write what is left, then close. After ``keep_aside`` it waits a second at most: what it could not
        write is in the file kept aside, and rigscope exits with the job (the writer's thread ends with it)."""
        if self.kept_aside is None:
            self.writes.settle(None)
        self.writes.abandon()  # its thread ends (nothing is left to write, or it was kept aside)
        if self.writer is not None:
            writer, self.writer = self.writer, None
            if self.kept_aside is None:
                writer.close()
            else:
                closing = threading.Thread(target=writer.close, name="rigscope-run-close", daemon=True)
                closing.start()
                closing.join(1.0)
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None
