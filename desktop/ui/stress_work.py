"""The Stress page's test off the GUI thread: a thin Qt adapter over the stress session.

``StressWorker`` runs ``StressSession.run_test`` (the device and GPU locks and the runner; it
blocks for the whole test) on a QThread and turns the session's callbacks into queued signals.
Judging the finished run against the earlier ones and storing it is the session's too
(``StressSession.finish``, the call `rigscope stress` makes); the page runs it with ``finish_on_worker``
through a ``background.Loader``, so a slow or locked database never freezes the window.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal

from advisor.frame import StressResult
from advisor.verdict_model import Verdict
from desktop.errors import UserError
from desktop.sessions.stress import StressSession
from desktop.stress.run_model import RunResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FinishedRun:
    """The Stress page's view of a judged run: verdict, earlier runs, stored id (None: not stored), the table."""

    verdict: Verdict
    earlier: list[StressResult]
    run_id: int | None
    runs: list[StressResult]
    #: Why the table could not be read ("" when it was).
    runs_error: str = ""
    #: Why the run could not be stored ("" when it was, or when there was nothing to store).
    save_error: str = ""


def finish_on_worker(session: StressSession, result: RunResult,
                     read_runs: Callable[[Path | None], list[StressResult]]) -> FinishedRun:
    """The session's ``finish`` (judged against the earlier runs, stored), then the table's runs after it; on a
    worker thread. A table that cannot be read is said in ``runs_error``: the verdict still shows."""
    outcome = session.finish(result)
    db_path = session.request.db_path
    save_error = f"Not saved to {db_path}: {outcome.save_error}" if outcome.save_error is not None else ""
    if save_error:
        log.warning("stress run not saved: %s", save_error)
    try:
        runs = read_runs(db_path)
    except Exception as exc:  # the table is a convenience; the verdict still shows
        log.warning("cannot list stress runs: %s", exc)
        return FinishedRun(outcome.verdict, outcome.earlier, outcome.run_id, [], f"{type(exc).__name__}: {exc}",
                           save_error)
    return FinishedRun(outcome.verdict, outcome.earlier, outcome.run_id, runs, save_error=save_error)


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
