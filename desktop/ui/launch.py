"""The window as a program (`rigscope gui`): the Qt application, the recording, Ctrl+C and SIGTERM, the event loop.

``RigscopeApp`` (``app.py``) wires the window's objects; this module runs it until the user quits.
"""

from __future__ import annotations

import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QObject, QSocketNotifier, QTimer
from PySide6.QtWidgets import QApplication

from desktop.config import Settings
from desktop.paths import ensure_private_dir
from desktop.sessions.recording import RecordingSession
from desktop.telemetry.sampler import Sampler, end_process
from desktop.telemetry.simulated import SimulatedBackend
from desktop.ui.app import RigscopeApp


def run_window(sampler: Sampler, settings: Settings, db: Path,
               problems: Sequence[tuple[str, str]] = ()) -> int:
    """Open the window on ``sampler``, recording to ``db``, until the user quits (`rigscope gui`,
    wired in desktop/cli/gui.py); ``problems`` in the settings are shown among the alerts (status bar)."""
    ensure_private_dir(db.parent)  # 0700 when created here; an existing folder keeps its mode
    qt_app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(qt_app, QApplication)
    qt_app.setApplicationName("Rigscope")
    qt_app.setDesktopFileName("rigscope")
    qt_app.setQuitOnLastWindowClosed(False)  # the tray keeps the app alive; quit is explicit
    # Each GPU's own stress run calibrates the sampler before the writer holds its connection.
    recording = RecordingSession.open(db, calibrate=sampler.effective_load.calibrate_all, retention=settings.retention,
                                      busy_util_pct=settings.advisor.busy_util_pct)
    # On the simulated GPU, "End process" ends the simulated process, never a real one with its pid.
    ender = None if isinstance(sampler.gpu, SimulatedBackend) else end_process
    app = RigscopeApp(qt_app, sampler, settings, recording, end_process=ender, db_path=db)
    if problems:
        app.window.show_banner("Some settings were invalid and defaults are used: "
                               + "; ".join(f"{k}: {m}" for k, m in problems), "warning")
    app.start()
    wake = _quit_on_signals(app)
    try:
        return qt_app.exec()
    finally:
        app.shutdown()
        wake.close()


class SignalWake:
    """The socket a signal's arrival writes to, and Qt's watch on it; ``close()`` undoes both."""

    def __init__(self, parent: QObject) -> None:
        self.reader, self.writer = socket.socketpair()
        for end in (self.reader, self.writer):
            end.setblocking(False)
        self.notifier = QSocketNotifier(self.reader.fileno(), QSocketNotifier.Type.Read, parent)
        self.notifier.activated.connect(self._woken)
        signal.set_wakeup_fd(self.writer.fileno())

    def _woken(self) -> None:
        try:
            self.reader.recv(64)  # the signal numbers; the handler has run by the time this slot returns
        except OSError:
            pass

    def close(self) -> None:
        signal.set_wakeup_fd(-1)
        self.notifier.setEnabled(False)
        self.reader.close()
        self.writer.close()


def _quit_on_signals(app: RigscopeApp) -> SignalWake:
    """Ctrl+C / SIGTERM in the terminal quit cleanly (flush, no traceback from whatever slot ran).

    Python runs signal handlers only between bytecodes, never while Qt's event loop (C++) waits.
    The signal's arrival writes a byte to a socket (``signal.set_wakeup_fd``) that Qt watches:
    reading it runs Python, and so the handler, at once. (A timer that woke Python 4 times a
    second for the same purpose cost the idle window CPU for nothing.)
    """
    def handler(_signum: int, _frame: object) -> None:
        QTimer.singleShot(0, app.quit)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, handler)
    return SignalWake(app)

