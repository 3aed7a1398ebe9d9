"""Jobs in a real history file: the row at start, events as they happen, the end, the series; old files migrate."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from advisor.progress import JobSeries
from desktop.history.schema import SCHEMA_VERSION, migrate
from desktop.history.store import HistoryStore
from desktop.jobs.model import GuardEvent, JobRecord


def _record() -> JobRecord:
    return JobRecord(job_id=0, name="train", argv=("python", "train.py", "--lr", "3e-4"), started_s=1000.0,
                     guard_c=83.0, source="simulated")


def test_a_job_is_stored_at_start_updated_at_end_and_read_back(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    with HistoryStore.open(db) as store:
        job_id = store.add_job(_record())
        store.add_job_event(job_id, GuardEvent(1010.0, "pause", 83.5, 0), "GPU-a")
        store.add_job_event(job_id, GuardEvent(1030.0, "resume", 78.0, 0), "GPU-a")
        running = store.job(job_id)
        assert running is not None and running.ended_s is None and running.exit_code is None
        final = replace(running, ended_s=1100.0, exit_code=143, pids=(11, 12), gpu_uuids=("GPU-a",),
                        gpu_indices=(0,), throughput_unit="it/s", paused_s=20.0, card={"verdict": "fine"})
        store.update_job(final)
        store.set_job_series(job_id, JobSeries(np.array([1000.0, 1001.0]), np.array([np.nan, 9.5])))
    with HistoryStore.open(db, readonly=True) as store:
        got = store.job(job_id)
        listed = store.jobs()
        series = store.job_series(job_id)
        timeline = store.events(0, 2000, kinds=["job_pause", "job_resume"])
    assert got == final
    assert got.duration_s == 100.0
    assert [e.kind for e in got.events] == ["pause", "resume"]
    assert listed == [final]
    assert series.time_s.tolist() == [1000.0, 1001.0]
    assert np.isnan(series.throughput[0]) and series.throughput[1] == 9.5
    assert [(e.kind, e.gpu_uuid) for e in timeline] == [("job_pause", "GPU-a"), ("job_resume", "GPU-a")]


def test_jobs_are_listed_newest_first_and_by_start_range(tmp_path: Path) -> None:
    with HistoryStore.open(tmp_path / "h.db") as store:
        for start in (100.0, 300.0, 200.0):
            store.add_job(replace(_record(), started_s=start))
        assert [r.started_s for r in store.jobs()] == [300.0, 200.0, 100.0]
        assert [r.started_s for r in store.jobs(150.0, 300.0)] == [200.0]
        assert store.job(999) is None
        assert store.job_series(1).time_s.size == 0
        with pytest.raises(KeyError):
            store.update_job(replace(_record(), job_id=999))


def test_a_version_6_file_gains_the_job_tables(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=6)
    conn.close()
    with HistoryStore.open(path) as store:
        assert int(store.conn.execute("PRAGMA user_version").fetchone()[0]) == SCHEMA_VERSION
        assert store.add_job(_record()) == 1
