"""A job card's power-limit note, from the envelope.limit events around the job."""

from __future__ import annotations

from pathlib import Path

from desktop.history.job_model import JobRecord
from desktop.history.store import HistoryStore
from desktop.jobs.envelope_note import envelope_note

T0 = 1_790_000_000.0
UUID = "GPU-lap"


def test_the_line_in_force_at_the_start_and_the_change_during_the_job(tmp_path: Path) -> None:
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        with store.transaction():
            store.add_event(T0 - 86400, "envelope.limit", UUID, "at its rated power (175 W)")
            store.add_event(T0 - 3600, "envelope.limit", "GPU-other", "capped at 1 W of 2 W: on battery")
            store.add_event(T0 + 480, "envelope.limit", UUID, "capped at 56 W of 175 W: on battery")
            store.add_event(T0 + 9000, "envelope.limit", UUID, "at its rated power (175 W)")  # after the job
        job = JobRecord(job_id=1, name="train", argv=("python", "train.py"), started_s=T0, ended_s=T0 + 2400,
                        gpu_uuids=(UUID,))
        assert envelope_note(store, job, T0 + 2400) == (
            "Power limit: capped at 56 W of 175 W: on battery (32 minutes), at its rated power (175 W) (8 minutes)")
        assert envelope_note(store, JobRecord(job_id=2, name="x", argv=(), started_s=T0, gpu_uuids=()), T0 + 1) is None
        quiet = JobRecord(job_id=3, name="y", argv=(), started_s=T0 - 7200, ended_s=T0 - 3600, gpu_uuids=(UUID,))
        assert envelope_note(store, quiet, T0 - 3600) == "Power limit: at its rated power (175 W) (the whole job)"
