"""`rigscope run`'s history writes, off the job's path: in order on a thread of their own, time-boxed at the end.

A write to the history can wait for its write lock: 30 s when another process holds it (a long import, a
`sqlite3` shell in a transaction). The job must not wait with it: neither its measured time (that is the
wrapper's, desktop/jobs/wrap.py) nor rigscope's exit after it, nor the guard's next look while it runs.
So ``JobWrites`` runs the job's rows (its start, heartbeats, guard events, its end) one after another on a
daemon thread; at the end ``settle`` waits a few seconds for them, and what the history did not take by then
is kept aside (``keep_aside``): a history database of its own beside the one asked for, with the job's
record, its series and events and the samples that were not written, said with its path. Nothing is lost.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from advisor.progress import JobSeries
    from desktop.history.store import HistoryStore
    from desktop.jobs.model import JobRecord
    from desktop.telemetry.model import Snapshot

log = logging.getLogger(__name__)
T = TypeVar("T")

#: How long the history writes at a job's end may take (a write lock held elsewhere) before they are kept aside.
END_WRITES_S = 5.0


class JobWrites:
    """An ordered queue of history writes run on one daemon thread by ``run_one(fn)``; never blocks its caller."""

    def __init__(self, run_one: Callable[[Callable[[HistoryStore], Any]], Any]) -> None:
        self._run_one = run_one
        self._cond = threading.Condition()
        self._queue: collections.deque[tuple[Callable[[HistoryStore], Any], Future[Any]]] = collections.deque()
        self._busy = False
        self._abandoned = False
        self._thread: threading.Thread | None = None

    def later(self, fn: Callable[[HistoryStore], T]) -> Future[T]:
        """``fn(store)`` after every write asked for before it; its future (cancelled if abandoned first)."""
        future: Future[T] = Future()
        with self._cond:
            if self._abandoned:
                future.cancel()
                return future
            self._queue.append((fn, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rigscope-run-history", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return future

    def settle(self, timeout_s: float | None) -> bool:
        """Wait up to ``timeout_s`` (None: as long as it takes) for every write asked for so far to be done (or to
        fail); True when they were."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy,
                                       None if timeout_s is None else max(0.0, timeout_s))

    def abandon(self) -> None:
        """Run nothing more (what waits is cancelled); a write under way when this is called may still finish."""
        with self._cond:
            self._abandoned = True
            while self._queue:
                self._queue.popleft()[1].cancel()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue) or self._abandoned)
                if self._abandoned:
                    return
                fn, future = self._queue.popleft()
                self._busy = True
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(self._run_one(fn))
                    except BaseException as exc:  # handed to whoever reads the future
                        future.set_exception(exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()


def aside_path(db: Path, now_s: float) -> Path:
    """A new file beside ``db`` for what it did not take: ``<name>.aside-<UTC stamp>[-n].sqlite``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now_s))
    target = db.with_name(f"{db.name}.aside-{stamp}.sqlite")
    n = 1
    while target.exists():
        target = db.with_name(f"{db.name}.aside-{stamp}-{n}.sqlite")
        n += 1
    return target


def keep_aside(db: Path, record: JobRecord, series: JobSeries | None, snapshots: Sequence[Snapshot],
               now_s: float) -> tuple[Path, int]:
    """The job (record with its events and card, series) and ``snapshots`` in a new history database beside
    ``db`` (in the temporary folder where that cannot be written); (its path, the job's id in it)."""
    import tempfile
    from dataclasses import replace

    from desktop.errors import UserError
    from desktop.history.store import HistoryStore

    try:
        target = aside_path(db, now_s)
        store = HistoryStore.open(target)
    except (UserError, OSError):
        target = aside_path(Path(tempfile.gettempdir()) / db.name, now_s)
        store = HistoryStore.open(target)
    try:
        if snapshots:
            store.write_snapshots(list(snapshots))
        job_id = store.add_job(replace(record, job_id=0))
        if series is not None:
            store.set_job_series(job_id, series)
    finally:
        store.close()
    return target, job_id
