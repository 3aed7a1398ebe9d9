"""The Jobs page's reads of the history: the newest jobs, and one job's card and charts (``read_job_card``, the
read `rigscope jobs show` makes too).

No Qt: the page calls it on a worker thread. The history database is opened read-only for each read (the
recorder, or `rigscope run` itself, may be writing it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from desktop.config import CostSettings
from desktop.jobs.detail import CHART_BINS, JOBS_LISTED, JobDetail, job_detail
from desktop.jobs.model import JobRecord
from desktop.sessions.job import read_job_card


class JobsHistory:
    """Reads jobs from the history database (read-only, opened on the calling thread, closed after).

    ``costs``: the electricity price and currency now (a callable: Settings may change them while the page lives).
    """

    def __init__(self, db_path: Path, costs: CostSettings | Callable[[], CostSettings],
                 clock: Callable[[], float] | None = None) -> None:
        self.db_path = db_path
        self._costs = costs
        self.clock = clock or time.time

    @property
    def costs(self) -> CostSettings:
        return self._costs if isinstance(self._costs, CostSettings) else self._costs()

    def _open(self) -> Any:
        from desktop.advice import open_history

        return open_history(self.db_path)

    def jobs(self, limit: int | None = JOBS_LISTED) -> list[JobRecord]:
        """The newest ``limit`` recorded jobs, newest first; none when there is no history (or no job in it) yet."""
        from desktop.errors import UserError

        try:
            store = self._open()
        except UserError:
            return []
        try:
            records: list[JobRecord] = store.jobs(limit=limit)
            return records
        finally:
            store.close()

    def detail(self, job_id: int, bins: int = CHART_BINS) -> JobDetail:
        """The job's card and telemetry, a long job's as means over ``bins`` stretches (``chart_bins``)."""
        now_s = self.clock()
        store = self._open()
        try:
            read = read_job_card(store, job_id, self.costs, now_s=now_s, with_frame=True)
        finally:
            store.close()
        if read is None or read.frame is None:
            raise LookupError(f"job {job_id} is not in the history any more")
        return job_detail(read.record, read.card, read.series, read.frame, now_s=now_s, bins=bins)
