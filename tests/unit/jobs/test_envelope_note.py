"""A job card's power-limit note, from the envelope.limit events around the job."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def test_jobs_show_and_the_jobs_page_carry_the_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from desktop import cli
    from desktop.config import CostSettings
    from desktop.sessions.jobs_reader import JobsHistory
    from tests.unit.cli.jobs_history import END, INFO, START, write_job_history

    db = tmp_path / "h.sqlite"
    job_id = write_job_history(db)
    with HistoryStore.open(db) as store, store.transaction():
        store.add_event(START - 600, "envelope.limit", INFO.uuid, "at its rated power (175 W)")
        store.add_event(START + 40, "envelope.limit", INFO.uuid, "capped at 56 W of 175 W: on battery")
    assert cli.main(["jobs", "show", str(job_id), "--db", str(db)], now_s=END + 60.0) == 0
    out = capsys.readouterr().out
    assert ("Power limit: capped at 56 W of 175 W: on battery (2 minutes), at its rated power (175 W) (40 seconds)"
            in out)
    assert cli.main(["jobs", "show", str(job_id), "--db", str(db), "--json"], now_s=END + 60.0) == 0
    card = json.loads(capsys.readouterr().out)["card"]
    assert any(n.startswith("Power limit: capped at 56 W") for n in card["notes"])
    detail = JobsHistory(db, CostSettings(), clock=lambda: END + 60.0).detail(job_id)
    assert sum(n.startswith("Power limit: ") for n in detail.card.notes) == 1


def test_the_card_rigscope_run_prints_and_stores_has_the_note(tmp_path: Path) -> None:
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[3]
    db = tmp_path / "h.db"
    done = subprocess.run([sys.executable, "-m", "desktop", "run", "--simulate", "--interval", "0.2", "--db", str(db),
                           "--", sys.executable, "-c", "import time; time.sleep(1.5)"],
                          cwd=repo, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()
    line = "Power limit: capped at 150 W of 175 W: firmware mode Balanced (the whole job)"
    assert line in done.stderr.decode()
    with HistoryStore.open(db, readonly=True) as store:
        (record,) = store.jobs()
    assert record.card is not None and line in record.card["notes"]
