"""``JobRows``, the job's own rows in a real history file: its heartbeat each second on rigscope's own writer (not
on every step), a guard event under the id the job's row got, and nothing at all where the job has no row."""

from __future__ import annotations

from pathlib import Path

from advisor.progress import JobSeries
from desktop.history.job_owner import this_process
from desktop.history.store import HistoryStore
from desktop.jobs.job_history import JobHistory
from desktop.jobs.job_rows import JobRows
from desktop.jobs.model import GuardEvent, JobRecord
from tests.waits import DEADLINE_S

T0 = 1_800_000_000.0
RECORD = JobRecord(job_id=0, name="train.py", argv=("python", "train.py"), started_s=T0, guard_c=83.0,
                   owner=this_process(), last_seen_s=T0)


def test_the_heartbeat_is_due_each_second_on_our_own_writer_and_the_event_names_the_jobs_id(tmp_path: Path) -> None:
    history = JobHistory(tmp_path / "h.sqlite")
    history.open()
    said: list[str] = []
    try:
        assert history.writer is not None  # no recorder: rigscope run writes the history itself
        rows = JobRows(history, said.append)
        rows.add(RECORD)
        assert rows.heartbeat(RECORD, T0 + 0.5, interval_s=0.2) is RECORD  # not due: a second at least
        beat = rows.heartbeat(RECORD, T0 + 1.0, interval_s=0.2)
        assert beat.last_seen_s == T0 + 1.0
        rows.add_event(GuardEvent(T0 + 1.5, "pause", 84.0, 0), "train.py", 83.0, "GPU-sim-0")
        assert history.writes.settle(DEADLINE_S)
        job_id = rows.stored_job_id()
        assert job_id > 0
        stored = history.do(lambda store: store.job(job_id))
        timeline = history.do(lambda store: store.events(T0, T0 + 10.0))
    finally:
        history.close()
    assert stored is not None and stored.last_seen_s == T0 + 1.0
    assert [(e.kind, e.temperature_c) for e in stored.events] == [("pause", 84.0)]
    assert [e.detail for e in timeline] == [f"job {job_id} (train.py): pause at 84 °C, guard 83 °C"]
    assert said == []


def test_without_the_jobs_row_nothing_is_written(tmp_path: Path) -> None:
    """The history could not take the job (no row was added): heartbeats, events and the end write nothing."""
    path = tmp_path / "h.sqlite"
    history = JobHistory(path)
    history.open()
    try:
        rows = JobRows(history, lambda message: None)  # ``add`` never called
        assert rows.heartbeat(RECORD, T0 + 60.0, interval_s=1.0) is RECORD
        rows.add_event(GuardEvent(T0 + 1.5, "pause", 84.0, 0), "train.py", 83.0, None)
        assert rows.store_end(RECORD, JobSeries()) is None
        assert history.writes.settle(DEADLINE_S) and rows.stored_job_id() == 0
    finally:
        history.close()
    with HistoryStore.open(path, readonly=True) as store:
        assert store.jobs() == [] and store.events(T0, T0 + 100.0) == []
    assert JobRows(None, lambda message: None).later(lambda store: None) is None  # no history at all
