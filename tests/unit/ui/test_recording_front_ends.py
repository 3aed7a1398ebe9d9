"""Issue 35 item 1: the window and `rigscope record` record through the one tick (``RecordingSession.tick``).

One recording through each front end, on the same simulated GPU and the same passed clock: the same tables
filled with the same number of rows, the rollups and retention run at the same moments (at the start, every
``MAINTENANCE_PERIOD_S`` and once at the end) and the stress-run calibrations read at the same moments (every
``CALIBRATION_RELOAD_S``). Before issue 35 the window ran the rollups on its writer thread's own schedule (first
after five minutes of wall time, none at the end) and read the calibrations on a Qt timer.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from desktop import cli
from desktop.history import calibration
from desktop.history.store import HistoryStore
from desktop.history.writer_status import WriterStatus
from desktop.recorder import CALIBRATION_RELOAD_S, MAINTENANCE_PERIOD_S, Recorder
from desktop.sessions.recording import RecordingSession
from desktop.telemetry import sampler as sampler_module
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list
from tests.unit.ui.conftest import FakeClock, FakeWriter, Harness

STEP_S = 60.0
#: Twelve minutes of samples a minute apart: the start, two maintenance and two calibration periods, the end.
TICKS = 12

Seen = dict[str, list[float]]


def _watch(monkeypatch: pytest.MonkeyPatch) -> Seen:
    """When each rollup/retention pass ran ("now" as handed to it) and when the calibrations were read."""
    seen: Seen = {"maintain": [], "calibrations": []}
    maintain = HistoryStore.maintain
    read = calibration.stress_calibrations

    def watched_maintain(store: HistoryStore, retention: Any, now_s: float, **kwargs: Any) -> Any:
        seen["maintain"].append(now_s)
        return maintain(store, retention, now_s, **kwargs)

    def watched_read(store: HistoryStore) -> Any:
        seen["calibrations"].append(store.conn.execute("SELECT max(ts) FROM gpu_samples").fetchone()[0] or 0.0)
        return read(store)

    monkeypatch.setattr(HistoryStore, "maintain", watched_maintain)
    monkeypatch.setattr(calibration, "stress_calibrations", watched_read)
    return seen


def _stored(db: Path) -> dict[str, int]:
    """Rows per table (the events aside: the window's own alerts are its own)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {name: conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
                for name in tables if name not in {"events", "meta"}}
    finally:
        conn.close()


def _settle(recorder: Recorder) -> None:
    """The writer thread's pass and read done before the next tick: the clock, not the thread's pace, decides."""
    recorder.wait_maintenance()
    recorder.wait_calibration()


def _relative(times: list[float], start_s: float) -> list[float]:
    return [round(t - start_s) for t in times]


def test_the_window_and_rigscope_record_store_the_same_on_the_same_schedule(
        make_app: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    start_s = 1_790_000_000.0

    # The window: offscreen, its sampler thread's tick driven here, one minute a tick.
    window_seen = _watch(monkeypatch)
    window_db = tmp_path / "window.sqlite"
    recording = RecordingSession.open(window_db)
    assert recording.mode == "recording", recording.detail
    h = make_app(recording=recording, clock=FakeClock(start_s=start_s, step_s=STEP_S))
    recorder = recording.recorder
    assert recorder is not None
    for _ in range(TICKS):
        h.tick()
        _settle(recorder)
    h.app.shutdown()
    window_stored = _stored(window_db)
    monkeypatch.undo()

    # `rigscope record`: the command as typed, its loop turned by hand on the same clock.
    cli_seen = _watch(monkeypatch)
    clock = FakeClock(start_s=start_s, step_s=STEP_S)
    made = sampler_module.Sampler

    def on_the_test_clock(gpu: Any, _host: Any, **kwargs: Any) -> Any:
        # The same inputs as the window's test harness: its simulated GPU (the command opened one for
        # --simulate rtx4090-laptop: the same profile), no host, the test's clock.
        gpu.close()
        same = SimulatedBackend(parse_profile_list("rtx4090-laptop"), user="me")
        return made(same, None, clock=clock, monotonic=clock.monotonic, process_period_s=0.0)

    def run(self: Recorder, stop: threading.Event, max_ticks: int | None = None) -> int:
        for _ in range(TICKS):
            clock.now_s += clock.step_s
            self.step()
            _settle(self)
        return self.ticks

    monkeypatch.setattr(sampler_module, "Sampler", on_the_test_clock)
    monkeypatch.setattr(Recorder, "run", run)
    cli_db = tmp_path / "record.sqlite"
    assert cli.main(["record", "--simulate", "rtx4090-laptop", "--db", str(cli_db)]) == 0
    cli_stored = _stored(cli_db)

    # The same tables filled, with as many rows.
    assert window_stored == cli_stored
    assert window_stored["gpu_samples"] == TICKS and window_stored["gpu_minute"] > 0
    # The same schedules: maintenance at the first tick, each period and at the end; calibrations each period.
    first = start_s + STEP_S
    expected_maintenance = [0, MAINTENANCE_PERIOD_S, 2 * MAINTENANCE_PERIOD_S, (TICKS - 1) * STEP_S]  # s
    assert _relative(window_seen["maintain"], first) == expected_maintenance
    assert _relative(cli_seen["maintain"], first) == expected_maintenance
    # Read at the first tick a period after the start, through the writer (its last sample, in ms, says when).
    expected_reads = [CALIBRATION_RELOAD_S, 2 * CALIBRATION_RELOAD_S]
    assert _relative([ms / 1000 for ms in window_seen["calibrations"]], first) == expected_reads
    assert _relative([ms / 1000 for ms in cli_seen["calibrations"]], first) == expected_reads


def _said_through_the_tick(tick: Callable[[], object], writer: FakeWriter) -> None:
    """A disk that fills and empties again, one tick each (the writer's status as the tick reads it)."""
    tick()
    writer.status = WriterStatus(rows_written=1, rows_pending=3, last_error="the disk is full; keeping samples "
                                 "in memory", disk_full=True)
    tick()
    tick()  # said once, not each tick
    writer.status = WriterStatus(rows_written=5, rows_pending=0, last_error=None, disk_full=False)
    tick()


def test_a_write_problem_is_said_by_the_window_as_rigscope_record_says_it(make_app: Callable[..., Harness]) -> None:
    """Errors said one way: the tick's ``report`` prints in the command and is a banner in the window (before
    issue 35 the window showed a write problem only in its status bar, the command printed it)."""
    said: list[str] = []
    writer = FakeWriter()
    sampler = sampler_module.Sampler(SimulatedBackend(parse_profile_list("rtx4090-laptop")), None,
                                     clock=FakeClock())
    headless = RecordingSession("recording", "test writer", writer=writer)
    headless.start(sampler, report=said.append)
    _said_through_the_tick(headless.tick, writer)
    sampler.close()
    assert said == ["the disk is full; keeping samples in memory", "writing to the history again; nothing was lost"]

    window_writer = FakeWriter()
    h = make_app(recording=RecordingSession("recording", "test writer", writer=window_writer))
    shown: list[str] = []

    def seen() -> None:  # each text the recording's banner takes on, in order
        texts = [b.label.text() for b in h.app.window.banners.banners() if b.key == "recording.file"]
        shown.extend(t for t in texts if t not in shown)
    h.app.window.banners.changed.connect(seen)
    _said_through_the_tick(h.tick, window_writer)
    assert [text[:1].lower() + text[1:] for text in shown] == said
