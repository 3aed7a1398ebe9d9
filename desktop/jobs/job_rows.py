"""The job's own rows in the history as `rigscope run` goes: its row, heartbeats, guard events, its end.

Each is asked for off the job's path (``JobHistory.writes``, in order on a thread of their own): the job's row
first, and every later row names the id it got. At the end the writes are time-boxed: what the history did not
take by the deadline (a write lock held elsewhere) is kept aside in a database of its own and said, never lost.
A failed write is said once and the job goes on without it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, TypeVar

from advisor.progress import JobSeries
from advisor.safetext import printable
from advisor.wording import count_text
from desktop.history.job_owner import HEARTBEAT_S
from desktop.history.store import HistoryStore
from desktop.jobs.job_history import JobHistory
from desktop.jobs.model import GuardEvent, JobRecord

T = TypeVar("T")


class JobRows:
    """The run's rows in ``history`` (none without one), written after the writes asked for before; ``say`` tells
    the user what could not be written."""

    def __init__(self, history: JobHistory | None, say: Callable[[str], None]) -> None:
        self.history = history
        self.say = say
        #: The job's row being added to the history (its id once done): None where there is no history row.
        self._added: Future[int] | None = None
        #: The job's end being written (``store_end``).
        self._ended: Future[None] | None = None
        #: Heartbeats asked for: one that a newer one follows in the queue is skipped (a held lock piles none up).
        self._heartbeats = 0
        self._problem: str | None = None

    def add(self, record: JobRecord) -> None:
        """The job's row, the first write: every later row is written under the id it gets."""
        self._added = self.later(lambda store: store.add_job(record))

    def stored_job_id(self) -> int:
        """The job's id in the history once its row was added (0 before, or when it could not be)."""
        added = self._added
        if added is None or not added.done() or added.cancelled() or added.exception() is not None:
            return 0
        return int(added.result() or 0)

    def add_event(self, event: GuardEvent, name: str, limit_c: float, uuid: str | None) -> None:
        """A guard event of job ``name`` (guard at ``limit_c``), with the detail `rigscope jobs show` lists."""
        if self._added is None:
            return
        action, temp = event.kind, event.temperature_c
        at = f"{temp:.0f} °C" if temp is not None else "an unknown temperature"

        def write(store: HistoryStore) -> None:
            job_id = self.stored_job_id()  # its row was added before (the writes run in order), or never
            if job_id:
                detail = f"job {job_id} ({name}): {action} at {at}, guard {limit_c:g} °C"
                store.add_job_event(job_id, event, uuid, detail)

        self.later(write)

    def heartbeat(self, record: JobRecord, now: float, interval_s: float) -> JobRecord:
        """Every ``HEARTBEAT_S`` the job's row says this rigscope lives: if it dies, the next command
        that opens the history closes the job at the last heartbeat (``HistoryStore.close_orphaned_jobs``).
        ``record`` with ``last_seen_s`` moved to ``now`` when a heartbeat is due, else ``record``."""
        seen = record.last_seen_s
        # On our own writer's thread a heartbeat is one UPDATE: each second; beside the recorder it opens a
        # connection: every HEARTBEAT_S.
        own = self.history is not None and self.history.writer is not None
        period = max(1.0, interval_s) if own else HEARTBEAT_S
        if self._added is None or (seen is not None and now - seen < period):
            return record
        record = replace(record, last_seen_s=now)
        self._heartbeats += 1
        ticket = self._heartbeats

        def write(store: HistoryStore) -> None:
            job_id = self.stored_job_id()
            if job_id and ticket == self._heartbeats:
                store.heartbeat(replace(record, job_id=job_id), now)

        self.later(write)
        return record

    def store_end(self, record: JobRecord, series: JobSeries) -> Future[None] | None:
        """The finished record and its series into the history (None without one), after the writes asked for
        before: not waited for here (``JobHistory.writes.settle`` does, time-boxed)."""
        if self._added is None:
            return None

        def write(store: HistoryStore) -> None:
            job_id = self.stored_job_id()
            if job_id:
                store.update_job(replace(record, job_id=job_id))
                store.set_job_series(job_id, series)

        self._ended = self.later(write)
        return self._ended

    def settle(self, record: JobRecord, series: JobSeries, deadline: float, clock: Callable[[], float]) -> None:
        """At the end: wait until ``deadline`` (``time.monotonic``) for the job's rows and samples to be written;
        what the history did not take by then (a write lock held elsewhere) is kept aside and said, not lost."""
        history = self.history
        if history is None or self._added is None or history.kept_aside is not None:
            return
        rows_done = history.writes.settle(deadline - time.monotonic())
        samples_done = history.flush(deadline - time.monotonic())
        ended = self._ended
        if rows_done and samples_done and self.stored_job_id() and ended is not None and ended.done() \
                and not ended.cancelled() and ended.exception() is None:
            return
        why = "it did not answer in time: another process holds its write lock" if not (rows_done and samples_done) \
            else (self._problem or "it refused the job")
        try:
            path, job_id, count = history.keep_aside(record, series, clock())
        except Exception as exc:  # nowhere to keep it: said with what is lost
            self.say(f"the job's record and {count_text(len(history.unwritten()), 'sample')} could not be written "
                     f"to the history ({why}) nor kept aside ({' '.join(printable(exc).split())})")
            return
        self.say(f"the history {printable(history.path)} did not take the job ({why}): its record and "
                 f"{count_text(count, 'sample')} not written there are kept in {printable(path)} (job {job_id} there: "
                 f"rigscope jobs show {job_id} --db {printable(path)})")

    def later(self, fn: Callable[[HistoryStore], T]) -> Future[T] | None:
        """Write to the history after the writes asked for before, off the job's path (``JobWrites``); a failure
        is said once and the job goes on without it."""
        if self.history is None:
            return None
        future = self.history.writes.later(fn)
        future.add_done_callback(self._said_failure)
        return future

    def _said_failure(self, future: Future[Any]) -> None:
        exc = None if future.cancelled() else future.exception()
        if isinstance(exc, Exception):  # a full disk or a read-only file must not stop the user's job
            problem = " ".join(printable(exc).split()) or type(exc).__name__
            if problem != self._problem:
                self._problem = problem
                self.say(f"could not write the job to the history ({problem}); the job goes on")
