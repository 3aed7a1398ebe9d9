"""Closing the window keeps the app sampling and recording in the tray; Quit ends everything."""

from __future__ import annotations

from PySide6.QtCore import Qt

from desktop.telemetry.model import DeviceState
from desktop.ui.tray import Tray, tooltip_for
from tests.unit.ui.conftest import FakeClock


def test_close_to_tray_keeps_sampling_and_recording(make_app, qtbot):
    h = make_app(tray=True, clock=FakeClock(auto=True))
    h.app.sampling.set_interval(0.02)
    h.app.start()
    qtbot.waitExposed(h.app.window)
    writer = h.app.recording.writer
    qtbot.waitUntil(lambda: len(writer.snapshots) >= 2, timeout=5000)
    with qtbot.waitSignal(h.app.window.hidden_to_tray):
        h.app.window.close()
    assert not h.app.window.isVisible()
    assert not h.app.dashboard.timer.isActive()  # nothing repaints while hidden
    recorded = len(writer.snapshots)
    qtbot.waitUntil(lambda: len(writer.snapshots) >= recorded + 3, timeout=5000)
    assert h.app.sampling.isRunning()
    qtbot.waitUntil(lambda: h.app.tray.tooltip.startswith("Rigscope — GPU 0:"), timeout=5000)
    h.app.tray.show_requested.emit()
    assert h.app.window.isVisible()
    h.app.tray.quit_requested.emit()
    assert not h.app.sampling.isRunning()
    assert writer.closed


def test_without_a_tray_closing_the_window_quits(make_app, qtbot):
    h = make_app(tray=False)
    h.app.start()
    qtbot.waitExposed(h.app.window)
    assert h.app.tray.icon is None
    with qtbot.waitSignal(h.app.window.closed):
        h.app.window.close()
    assert not h.app.sampling.isRunning()
    assert h.app.recording.writer is None  # closed


def test_ctrl_q_quits(make_app, qtbot):
    h = make_app(tray=True)
    h.app.start()
    w = h.app.window
    w.activateWindow()
    qtbot.waitUntil(lambda: w.isActiveWindow())
    qtbot.keyClick(w, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    assert not h.app.sampling.isRunning()


def test_tooltip_shows_utilization_and_temperature(make_app):
    h = make_app("rtx4090-laptop,rtx4090")
    h.backend.manual.set(0, 1.0, 1000.0)
    snap = h.tick(3)
    text = tooltip_for(snap)
    sample = snap.gpus[0].sample
    assert f"GPU 0: {sample.utilization_gpu_pct:.0f} %, {sample.temperature_c:.0f} °C" in text
    h.backend.model.set_lost(1, True)
    snap = h.tick()
    assert snap.gpus[1].state is DeviceState.LOST and "GPU 1: lost" in tooltip_for(snap)


def test_an_unavailable_tray_is_a_quiet_no_op(qtbot):
    tray = Tray(available=False)
    tray.notify("t", "m")
    tray.close()
    assert tray.icon is None and tray.notifications == [("t", "m")]
