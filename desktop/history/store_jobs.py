"""``HistoryStore``'s methods for the jobs of `rigscope run` (the ``jobs``, ``job_series`` and ``job_events``
tables), as a mixin the store inherits: callers see one store API; each method hands the store to ``jobs``,
the jobs tables' own code.

Each method types ``self`` as ``store_api.StoreApi`` (which ``HistoryStore`` is), since this module, like the
table modules, cannot import ``store``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from advisor.progress import JobSeries
from desktop.history import jobs
from desktop.history.job_model import GuardEvent, JobRecord
from desktop.history.store_api import StoreApi


class StoreJobs:
    """The jobs part of ``HistoryStore`` (`rigscope run`: its job rows, throughput series and guard events)."""

    def add_job(self: StoreApi, record: JobRecord) -> int:
        """Store a job (running or finished) with its events; returns its new job_id (``record.job_id`` is ignored)."""
        return jobs.add_job(self, record)

    def update_job(self: StoreApi, record: JobRecord) -> None:
        """Store what ``record`` says now (its end, PIDs, GPUs, card); its events are added by ``add_job_event``."""
        jobs.update_job(self, record)

    def heartbeat(self: StoreApi, record: JobRecord, now_s: float) -> None:
        """Say that ``record``'s `rigscope run` is alive at ``now_s`` (a job taken for lost runs again)."""
        jobs.heartbeat(self, record, now_s)

    def add_job_event(self: StoreApi, job_id: int, event: GuardEvent, gpu_uuid: str | None = None,
                      detail: str = "") -> None:
        """One guard event of a job, also on the history's timeline (``job_pause``/``job_resume``)."""
        jobs.add_job_event(self, job_id, event, gpu_uuid, detail)

    def set_job_series(self: StoreApi, job_id: int, series: JobSeries) -> None:
        """The job's throughput series, replacing any stored before."""
        jobs.set_job_series(self, job_id, series)

    def job_series(self: StoreApi, job_id: int) -> JobSeries:
        """The job's throughput series; empty when it reported none."""
        return jobs.job_series(self, job_id)

    def jobs(self: StoreApi, start_s: float | None = None, end_s: float | None = None, *,
             limit: int | None = None) -> list[JobRecord]:
        """Stored jobs, newest first; optionally those that started in [start_s, end_s), the newest ``limit``."""
        return jobs.jobs(self, start_s, end_s, limit=limit)

    def job(self: StoreApi, job_id: int) -> JobRecord | None:
        """One job with its events; None when there is no such job."""
        return jobs.job(self, job_id)

    def close_orphaned_jobs(self: StoreApi, now_s: float, *,
                            alive: Callable[[JobRecord, float], bool] | None = None) -> list[JobRecord]:
        """Close every job still "running" whose `rigscope run` is gone, at its last heartbeat; returns them."""
        if alive is None:
            return jobs.close_orphaned_jobs(self.conn, now_s)
        return jobs.close_orphaned_jobs(self.conn, now_s, alive=alive)

    @staticmethod
    def close_orphaned_jobs_at(path: Path, now_s: float) -> list[JobRecord]:
        """``close_orphaned_jobs`` on the database at ``path`` for a command about to open it: never creates,
        migrates or fails (what is wrong with the file is said by the command that opens it)."""
        return jobs.close_orphaned_jobs_at(path, now_s)
