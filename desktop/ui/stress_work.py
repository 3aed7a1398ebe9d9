"""The Stress page's test off the GUI thread: a thin Qt adapter over the stress session.

``StressWorker`` runs ``StressSession.run_test`` (the device and GPU locks and the runner; it
blocks for the whole test) on a QThread and turns the session's callbacks into queued signals.
Judging the finished run against the earlier ones and storing it is the session's too
(``desktop.sessions.stress.finish_run``); the page calls it through a ``background.Loader``,
so a slow or locked database never freezes the window.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, QThread, Signal

from desktop.errors import UserError
from desktop.sessions.stress import StressSession

log = logging.getLogger(__name__)


class StressWorker(QThread):
    """Runs one session's test off the GUI thread; ``progress`` and ``done`` are queued to the GUI."""

    progress = Signal(object)
    started_on = Signal(object, object)  # GpuInfo | None, guard °C | None
    done = Signal(object)
    failed = Signal(str)
    #: The test was not started: the GPU cannot be told apart, the guard is at shutdown, or the device is busy.
    refused = Signal(str)

    def __init__(self, session: StressSession, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("rigscope-stress")
        self.session = session
        session.on_progress = self.progress.emit
        session.on_start = self.started_on.emit

    def run(self) -> None:
        # The runner closes its own backend (its NVML session) however the run ends.
        try:
            result = self.session.run_test()
        except UserError as exc:  # DeviceBusy too: `rigscope stress` already loads this device
            self.refused.emit(str(exc))
        except Exception as exc:  # a runner bug must reach the page, not vanish with the thread
            log.exception("stress run failed")
            self.failed.emit(f"{type(exc).__name__}: {exc}")
        else:
            self.done.emit(result)

    def cancel(self) -> None:
        self.session.cancel()
