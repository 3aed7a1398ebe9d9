"""The idle window wakes only for work (issue 27 item 2): the dashboard repaints when a snapshot
came (at once when the last repaint is an interval old), at most every REPAINT_INTERVAL_MS, and nothing
polls between snapshots; Ctrl+C / SIGTERM
quit through a wake-up socket instead of a polling timer."""

from __future__ import annotations

import os
import signal
import threading
import time

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication

from desktop.ui import launch
from desktop.ui.pages.dashboard import REPAINT_INTERVAL_MS


def test_dashboard_repaints_once_per_snapshot_and_polls_nothing_between(make_app, qtbot):
    h = make_app()
    h.app.window.show()
    qtbot.waitExposed(h.app.window)
    dash = h.app.dashboard
    calls: list[float] = []
    original = dash.repaint_plots

    def counting() -> None:
        calls.append(time.monotonic())
        original()

    dash.repaint_plots = counting  # both ways in: at once from add_snapshot, and the timer
    dash.timer.timeout.disconnect()
    dash.timer.timeout.connect(counting)
    h.tick()  # nothing painted for an interval: at once, in the same frame as the card's new values
    assert len(calls) == 1 and not dash.timer.isActive()
    h.tick(2)  # both within the interval: one timed repaint for the two
    assert len(calls) == 1 and dash.timer.isActive() and dash.timer.isSingleShot()
    qtbot.waitUntil(lambda: len(calls) == 2, timeout=2000)
    before = dash.repaints
    assert before >= 2 and not dash.timer.isActive()
    qtbot.wait(3 * REPAINT_INTERVAL_MS)  # no snapshot: no wake-up, no repaint
    assert len(calls) == 2 and not dash.timer.isActive()
    h.tick()  # the interval has passed: painted at once again, no timer
    assert len(calls) == 3 and not dash.timer.isActive()
    assert dash.repaints == before + 1


def test_hidden_dashboard_schedules_no_repaint(make_app, qtbot):
    h = make_app()
    h.app.window.show()
    qtbot.waitExposed(h.app.window)
    h.app.window.show_page("processes")
    h.tick(3)
    assert not h.app.dashboard.timer.isActive()
    h.app.window.show_page("dashboard")
    painted = h.app.dashboard.repaints
    assert painted >= 1  # shown again: painted at once with what came meanwhile
    assert h.app.dashboard.panels[0].plots.plot("util").data("utilization_gpu_pct")[0].size == 3


def test_sigterm_quits_the_event_loop_without_a_polling_timer(qapp: QApplication):
    class App(QObject):
        def __init__(self) -> None:
            super().__init__()
            self.quits = 0

        def quit(self) -> None:
            self.quits += 1
            qapp.quit()

    app = App()
    timers_before = len(app.findChildren(QTimer))
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    wake = launch._quit_on_signals(app)
    try:
        assert len(app.findChildren(QTimer)) == timers_before  # nothing wakes Python while idle
        guard = threading.Timer(5.0, qapp.quit)  # the test's own stop, should the signal not arrive
        guard.start()
        threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
        started = time.monotonic()
        qapp.exec()
        guard.cancel()
        assert app.quits == 1 and time.monotonic() - started < 4.0
    finally:
        wake.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
