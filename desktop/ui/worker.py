"""The sampler's thread: ticks off the GUI thread and hands each Snapshot to the GUI by signal.

NVML calls can take milliseconds (process lists ~5 ms) and a lost GPU can stall a call, so
they never run on the GUI thread. The tick is the recording's (``RecordingSession.tick``: sample,
write, rollups, calibrations, as `rigscope record` does), so the history keeps being written while
the window is hidden or busy.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, QThread, Signal

from desktop.telemetry.loop import run_every
from desktop.telemetry.model import Snapshot

log = logging.getLogger(__name__)


class SamplerThread(QThread):
    """Calls ``tick()`` every ``interval_s`` until ``stop()``; emits ``snapshot`` (queued to the GUI)."""

    snapshot = Signal(object)
    failed = Signal(str)

    def __init__(self, tick: Callable[[], Snapshot], interval_s: float, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("rigscope-sampler")
        self._tick = tick
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.ticks = 0

    @property
    def interval_s(self) -> float:
        return self._interval_s

    def set_interval(self, interval_s: float) -> None:
        self._interval_s = interval_s

    def run(self) -> None:
        # A Python loop on this thread, not a QTimer: a tick may block in the driver, and the
        # GUI thread's timers must not wait for it. The interval is read before each wait, so
        # Settings can change it while sampling runs.
        run_every(lambda: self._interval_s, self._tick_once, self._stop)

    def _tick_once(self) -> None:
        try:
            snap = self._tick()
        except Exception as exc:  # a backend bug must not kill sampling silently
            log.exception("sampling failed")
            self.failed.emit(f"{type(exc).__name__}: {exc}")
        else:
            self.ticks += 1
            self.snapshot.emit(snap)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop and join; safe to call twice or before ``start``."""
        self._stop.set()
        if self.isRunning() and not self.wait(int(timeout_s * 1000)):
            log.warning("sampler thread did not stop within %.1f s", timeout_s)
