"""The Stress page's work off the GUI thread: the run on a QThread, and the history it is judged against.

``StressWorker`` runs one ``StressRunner`` (it blocks for the whole test) and queues its
progress and outcome to the GUI. ``finish_run`` and ``list_runs`` are the database side:
judge a finished run against the earlier ones on its GPU, store it, list the runs for the
table; the page calls them through a ``background.Loader``, so a slow or locked database
never freezes the window.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal

from advisor.frame import StressResult
from advisor.verdict import Verdict
from desktop.errors import UserError
from desktop.history.lock import DeviceLock, GpuClaims
from desktop.stress.records import gpu_identity, judge_run, load_earlier, save_failure_reason, save_run
from desktop.stress.run_model import RunResult
from desktop.stress.runner import StressRunner

log = logging.getLogger(__name__)

#: Rows in the table of earlier runs.
TABLE_RUNS = 50


def list_runs(db_path: Path | None) -> list[StressResult]:
    """The newest stored runs, for the table (worker thread); none without a database."""
    if db_path is None or not db_path.exists():
        return []
    from desktop.history.store import HistoryStore

    with HistoryStore.open(db_path, readonly=True) as store:
        return store.stress_runs()[:TABLE_RUNS]


def _load_earlier(db_path: Path | None, uuid: str, workload: str) -> list[StressResult]:
    if db_path is None:
        return []
    try:
        return load_earlier(db_path, uuid, workload)
    except Exception as exc:  # a missing or locked history must not hide the verdict
        log.warning("earlier stress runs unavailable: %s", exc)
        return []


@dataclass(frozen=True)
class FinishedRun:
    """A run judged against the earlier ones, its stored id (None: not stored), and the table's runs."""

    verdict: Verdict
    earlier: list[StressResult]
    run_id: int | None
    runs: list[StressResult]
    #: Why the table could not be read ("" when it was).
    runs_error: str = ""
    #: Why the run could not be stored ("" when it was, or when there was nothing to store).
    save_error: str = ""


def finish_run(db_path: Path | None, result: RunResult) -> FinishedRun:
    """Judge ``result`` against the earlier runs on its GPU, store it, list the runs (worker thread)."""
    uuid, _name, _driver = gpu_identity(result)
    earlier = _load_earlier(db_path, uuid, result.config.workload)
    verdict = judge_run(result, earlier)
    run_id = None
    save_error = ""
    if db_path is not None and result.time_s.size:
        try:
            run_id = save_run(db_path, result, verdict)
        except Exception as exc:  # the verdict still shows when the history cannot take it
            save_error = f"Not saved to {db_path}: {save_failure_reason(exc)}"
            log.warning("stress run not saved: %s", save_error)
    try:
        return FinishedRun(verdict, earlier, run_id, list_runs(db_path), save_error=save_error)
    except Exception as exc:  # the table is a convenience; the verdict still shows
        log.warning("cannot list stress runs: %s", exc)
        return FinishedRun(verdict, earlier, run_id, [], f"{type(exc).__name__}: {exc}", save_error)


class StressWorker(QThread):
    """Runs one ``StressRunner`` off the GUI thread; ``progress`` and ``done`` are queued to the GUI."""

    progress = Signal(object)
    started_on = Signal(object, object)  # GpuInfo | None, guard °C | None
    done = Signal(object)
    failed = Signal(str)
    #: The test was not started: the GPU cannot be told apart, or the guard is at shutdown.
    refused = Signal(str)

    def __init__(self, runner: StressRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("rigscope-stress")
        self.runner = runner
        runner.on_progress = self.progress.emit
        runner.on_start = self.started_on.emit
        #: The GPU lock taken once the run knows its NVML GPU (released when the run ends).
        self._claims = GpuClaims()
        if runner.config.device != "sim":
            runner.claim = self._claims.claim

    def run(self) -> None:
        # The runner closes its own backend (its NVML session) however the run ends.
        try:
            with self._device_lock():
                try:
                    result = self.runner.run()
                finally:
                    self._claims.release()
        except UserError as exc:  # DeviceBusy too: `rigscope stress` already loads this device
            self.refused.emit(str(exc))
        except Exception as exc:  # a runner bug must reach the page, not vanish with the thread
            log.exception("stress run failed")
            self.failed.emit(f"{type(exc).__name__}: {exc}")
        else:
            self.done.emit(result)

    def cancel(self) -> None:
        self.runner.cancel()

    def _device_lock(self) -> AbstractContextManager[object]:
        """The lock `rigscope stress` takes on the same device: one test per device, window or terminal.

        Not on the simulated GPU: the window's is its own machine, which no other process loads."""
        device = self.runner.config.device
        if device == "sim":
            return nullcontext()
        lock = DeviceLock(device)
        try:
            lock.acquire()
        except OSError as exc:  # an unwritable data folder: run, as the CLI does, without the guard of a lock
            log.warning("cannot create the device lock %s (%s)", lock.lock_path, exc)
            return nullcontext()
        return lock  # held: entering it again is a no-op, leaving it releases it
