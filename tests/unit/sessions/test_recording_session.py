"""`RecordingSession` driven without Qt: `rigscope record`'s headless recording (writer lock, sampling loop, the
rollups and retention in force, the close) and the window's (recording, reading beside another writer, a demo
database shown and never written), and the status line both show."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from desktop.config import RetentionSettings
from desktop.history.lock import DatabaseBusy
from desktop.history.store import HistoryStore
from desktop.history.writer_status import WriterStatus
from desktop.sessions.recording import STALL_AFTER_S, RecordingSession
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list

T0 = 1_800_000_000.0


def _sampler() -> Sampler:
    clock = [T0]

    def tick_clock() -> float:
        clock[0] += 1.0
        return clock[0]

    return Sampler(SimulatedBackend(parse_profile_list("rtx4090-laptop")), clock=tick_clock)


def test_the_headless_session_records_the_samples_and_runs_the_retention_in_force(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    sampler = _sampler()
    session = RecordingSession.open(db, strict=True, retention=RetentionSettings(raw_days=3))
    passes: list[tuple[RetentionSettings, float]] = []
    assert session.maintenance is not None
    session.maintenance.run = lambda _store, retention, _now, *, busy_util_pct: passes.append((retention,
                                                                                               busy_util_pct))
    session.set_retention(RetentionSettings(raw_days=9), busy_util_pct=25.0)  # what Settings applied last
    said: list[str] = []
    try:
        assert session.mode == "recording" and session.label == "Recording"
        assert session.record(sampler, threading.Event(), interval_s=0.01, report=said.append, max_ticks=4) == 4
    finally:
        session.close(say_loss=False)
        sampler.close()
    # The pass at the end (a short run still gets its minutes) used the retention the settings said last.
    assert passes and passes[-1] == (RetentionSettings(raw_days=9), 25.0)
    assert session.final_status is not None and session.final_status.rows_written == 4
    assert session.lost_on_close is None and session.writer is None and not said
    with HistoryStore.open(db, readonly=True) as store:  # the four samples as the history reads them back
        (gpu,) = store.gpus()
        rows = store.query(gpu.uuid, ["utilization_gpu_pct"], T0, T0 + 60, resolution="raw")
        assert len(rows) == 4 and list(rows.time_s) == [T0 + 1, T0 + 2, T0 + 3, T0 + 4]


def test_one_writer_at_a_time_the_window_reads_beside_the_recorder(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    sampler = _sampler()
    recorder = RecordingSession.open(db, strict=True)
    try:
        with pytest.raises(DatabaseBusy):  # a second `rigscope record`
            RecordingSession.open(db, strict=True)
        window = RecordingSession.open(db)
        try:
            assert window.mode == "reading" and window.writer is None and window.store is not None
            text, tip = window.status_text(time.time())
            assert text.startswith("Reading history (not recording): the database is written by ") and tip
            window.start(sampler)
            window.tick()  # a reading window's snapshots go nowhere
        finally:
            window.close()
    finally:
        recorder.close()
        sampler.close()
    again = RecordingSession.open(db)  # the lock is free again: the window records
    try:
        assert again.mode == "recording" and again.status_text(time.time())[0] == "Recording"
    finally:
        again.close()


def test_a_demo_database_is_shown_and_never_written(tmp_path: Path) -> None:
    db = tmp_path / "demo.sqlite"
    store = HistoryStore.open(db)
    with store.conn:
        store.set_meta("demo", "1")
    store.close()
    session = RecordingSession.open(db)
    try:
        assert session.mode == "reading" and session.writer is None and "demo database" in session.detail
    finally:
        session.close()


class _StuckWriter:
    """A writer whose samples wait: nothing committed since ``last_commit_s``."""

    def __init__(self, last_commit_s: float | None, pending: int = 30) -> None:
        self.status = WriterStatus(rows_written=10, rows_pending=pending, last_error=None, disk_full=False,
                                   last_commit_s=last_commit_s)
        self.events: list[tuple[Any, ...]] = []

    def submit(self, _snapshot: object) -> None:
        pass

    def add_event(self, *event: Any) -> None:
        self.events.append(event)


def test_the_status_says_when_samples_stop_landing_and_events_reach_the_writer() -> None:
    writer = _StuckWriter(last_commit_s=T0)
    session = RecordingSession("recording", "writing to h.sqlite", writer=writer, started_s=T0 - 100)
    assert session.status_text(T0 + 5)[0] == "Recording"  # waiting for the next 5 s commit
    text, tip = session.status_text(T0 + STALL_AFTER_S + 1)
    assert text.startswith("Recording problem: nothing written since ") and "(30 samples waiting)" in text
    assert tip == "writing to h.sqlite"
    writer.status = WriterStatus(rows_written=10, rows_pending=0, last_error="disk I/O error", disk_full=False)
    assert session.status_text(T0)[0] == "Recording problem: disk I/O error"
    session.add_event(T0, "alert.thermal", "GPU 0 at 87 °C", "GPU-1")
    assert writer.events == [(T0, "alert.thermal", "GPU-1", "GPU 0 at 87 °C")]
    assert session.events == [(T0, "alert.thermal", "GPU 0 at 87 °C")]


def test_a_session_that_does_not_record_cannot_run_the_recorder(tmp_path: Path) -> None:
    session = RecordingSession("off", "cannot record to x: read-only")
    with pytest.raises(RuntimeError, match="not recording: cannot record to x"):
        session.record(object(), threading.Event(), interval_s=1.0)
    assert session.status_text(0.0)[0] == "Not recording: cannot record to x: read-only"
