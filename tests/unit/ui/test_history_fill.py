"""Windows longer than the live buffer are filled from the history database."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

from desktop.history.store import HistoryStore
from desktop.sessions.recording import RecordingSession
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list
from tests.unit.ui.conftest import FakeClock, gui_stays_responsive
from tests.waits import DEADLINE_S

START_S = 1_790_000_000.0


def shown(qtbot, dash) -> None:
    """History is read on a worker thread: wait for its answer to be painted."""
    qtbot.waitUntil(lambda: not dash.loading, timeout=20_000)


def write_history(path, minutes: float, end_s: float) -> None:
    """``minutes`` of 1 Hz simulated history ending at ``end_s``, loaded as GPU 0 at 90 % load."""
    clock = FakeClock(start_s=end_s - minutes * 60)
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), user="me")
    backend.manual.set(0, 0.9, 5000.0)
    sampler = Sampler(backend, None, clock=clock, monotonic=clock.monotonic)
    snaps = []
    while clock.now_s < end_s - 1:
        clock.now_s += 1.0
        snaps.append(sampler.tick())
    store = HistoryStore.open(path)
    try:
        store.write_snapshots(snaps)
    finally:
        store.close()


def test_the_1_h_window_fills_from_history(make_app, qtbot, tmp_path):
    db = tmp_path / "history.sqlite"
    write_history(db, minutes=50, end_s=START_S)
    store = HistoryStore.open(db, readonly=True)
    h = make_app(recording=RecordingSession("reading", "test", store=store), clock=FakeClock(start_s=START_S))
    h.app.window.show()
    h.tick(30)  # 30 s of live data: the ring buffer covers only the end of the hour
    dash = h.app.dashboard
    dash.set_window("10 min")
    shown(qtbot, dash)
    util = dash.panels[0].plots.plot("util")
    hist_t, _ = util.history("utilization_gpu_pct")
    assert hist_t.size > 0  # 10 min > 30 s of ring: history fills the rest
    dash.set_window("1 h")
    shown(qtbot, dash)
    hist_t, hist_v = util.history("utilization_gpu_pct")
    live_t, _ = util.data("utilization_gpu_pct")
    assert live_t.size == 30
    assert 1000 <= hist_t.size <= 2000  # 50 min of 1 Hz rows, merged to at most the points asked for
    assert hist_t[0] < START_S - 49 * 60 and hist_t[-1] < live_t[0]
    assert np.nanmean(hist_v) > 80  # the stored 90 % load, not the idle live GPU
    temp_t, temp_v = dash.panels[0].plots.plot("temp").history("temperature_c")
    assert temp_t.size == hist_t.size and np.isfinite(temp_v).all()
    assert "history" in dash.history_note.text()
    dash.set_window("1 min")  # 30 s live + the 30 s before from history
    shown(qtbot, dash)
    assert 25 <= util.history("utilization_gpu_pct")[0].size <= 31
    h.tick(60)
    dash.set_window("1 min")  # now inside the ring buffer: no history curve
    assert util.history("utilization_gpu_pct")[0].size == 0


def test_without_a_database_long_windows_say_so(make_app):
    h = make_app(recording=RecordingSession("off", "no database"))
    h.app.window.show()
    h.tick(5)
    h.app.dashboard.set_window("24 h")
    assert "No history database" in h.app.dashboard.history_note.text()
    assert "Not recording: no database" in h.app.window.recording_label.text()


def test_the_window_records_unless_a_recorder_holds_the_database(tmp_path):
    from desktop.history.lock import WriterLock

    db = tmp_path / "h.sqlite"
    rec = RecordingSession.open(db)
    try:
        assert rec.mode == "recording" and rec.writer is not None
    finally:
        rec.close()
    with WriterLock(db):  # the recorder service
        reader = RecordingSession.open(db)
        try:
            assert reader.mode == "reading" and reader.writer is None and reader.store is not None
            assert "pid" in reader.detail
        finally:
            reader.close()


def test_recording_writes_snapshots_and_alert_events(make_app, tmp_path):
    db = tmp_path / "h.sqlite"
    rec = RecordingSession.open(db)
    h = make_app(recording=rec)
    h.tick(3)
    rec.add_event(START_S, "alert.temperature", "hot", "GPU-x")
    assert rec.writer.flush(timeout_s=10)
    rec.close()
    store = HistoryStore.open(db, readonly=True)
    try:
        assert store.counts()["gpu_samples"] >= 3
        assert any(e.kind == "alert.temperature" for e in store.events(0, 2e9))
    finally:
        store.close()


class HeldHistory:
    """A history store whose reads block until released (a slow disk, a long week), then answer or fail."""

    POINTS = 100

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.release = threading.Event()
        self.asked: list[tuple[float, float]] = []

    def query(self, gpu_uuid, metrics, start_s, end_s, max_points=2000):
        self.asked.append((start_s, end_s))
        assert self.release.wait(10)
        if self.error is not None:
            raise self.error
        time_s = np.linspace(start_s, end_s - 1.0, self.POINTS)
        return SimpleNamespace(time_s=time_s, columns={m: np.full(self.POINTS, 42.0) for m in metrics},
                               resolution="minute")


def held_dashboard(make_app, history: HeldHistory):
    h = make_app(recording=RecordingSession("reading", "test", store=history), clock=FakeClock(start_s=START_S))
    h.app.window.show()
    h.tick(30)
    return h, h.app.dashboard


def test_a_long_window_is_read_off_the_gui_thread_and_lands_when_read(make_app, qtbot):
    history = HeldHistory()
    h, dash = held_dashboard(make_app, history)
    try:
        dash.set_window("24 h")
        assert dash.loading and dash.history_note.text() == "Reading history…"
        gui_stays_responsive(qtbot)
        util = dash.panels[0].plots.plot("util")
        assert util.data("utilization_gpu_pct")[0].size == 30  # the live part is painted at once
        h.tick(120)  # readings go on arriving and being painted (two pixels of 24 h) while the read is held
        dash.repaint_plots()
        assert util.data("utilization_gpu_pct")[0].size == 150
        assert util.history("utilization_gpu_pct")[0].size == 0
    finally:
        history.release.set()
    shown(qtbot, dash)
    hist_t, hist_v = util.history("utilization_gpu_pct")
    assert hist_t.size == HeldHistory.POINTS and np.all(hist_v == 42.0)
    # The 24 h window asked for from its start (the 10 min window shown before it may have asked first), then
    # last (a minute on, it was asked again) up to the live part.
    day_asks = [(start, end) for start, end in history.asked if end - start > 3600.0]
    assert day_asks[0][0] == pytest.approx(START_S + 30 - 86400.0)
    assert (hist_t[0], hist_t[-1] + 1.0) == pytest.approx(history.asked[-1])
    assert hist_t[-1] < util.data("utilization_gpu_pct")[0][0]
    note = dash.history_note.text()
    assert note.startswith("Before the last ") and note.endswith(": from the history (minute averages)"), note


def test_only_the_newest_window_is_painted_and_a_pause_drops_a_read(make_app, qtbot):
    history = HeldHistory()
    _, dash = held_dashboard(make_app, history)
    util = dash.panels[0].plots.plot("util")
    try:
        dash.set_window("24 h")
        dash.set_window("7 d")  # picked while the 24 h read is held: only the week is shown
        gui_stays_responsive(qtbot)
    finally:
        history.release.set()
    shown(qtbot, dash)
    assert util.history("utilization_gpu_pct")[0][0] == pytest.approx(START_S + 30 - 7 * 86400.0)
    history.release.clear()
    try:
        dash.set_window("24 h")
        assert dash.loading
        dash.set_paused(True)  # frozen means frozen: the 24 h answer must not land
        assert not dash.loading
    finally:
        history.release.set()
    assert dash.fill.wait(DEADLINE_S)
    qtbot.wait(20)
    assert util.history("utilization_gpu_pct")[0][0] == pytest.approx(START_S + 30 - 7 * 86400.0)
    dash.set_paused(False)  # a fresh read for the window shown
    shown(qtbot, dash)
    assert util.history("utilization_gpu_pct")[0][0] == pytest.approx(START_S + 30 - 86400.0)


def test_a_failing_read_is_said_and_the_live_part_goes_on(make_app, qtbot):
    history = HeldHistory(error=OSError("database is locked"))
    h, dash = held_dashboard(make_app, history)
    try:
        dash.set_window("7 d")
        gui_stays_responsive(qtbot)
    finally:
        history.release.set()
    shown(qtbot, dash)
    assert dash.history_note.text() == "History unavailable: OSError: database is locked"
    assert dash.panels[0].plots.plot("util").data("utilization_gpu_pct")[0].size == 30
    h.tick(2)
    assert len(dash.panels[0].ring) == 32

