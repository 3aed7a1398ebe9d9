"""The Stress page's earlier runs: the table, the panel that reads them, and what the verdict card says before
this session's first run.

Every number in the table carries its unit: the throughput unit differs by workload
(TFLOP/s for GEMM, GB/s for bandwidth), so it is in each cell, not in the header.
The panel (``EarlierRuns``) reads the stored runs off the GUI thread (``background.Loader``), and again every
``RUNS_RELOAD_S`` while it is shown: a run that `rigscope stress` (or another window) saved meanwhile appears
without a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QHeaderView,
    QLabel,
    QLayout,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from advisor.frame import StressResult
from advisor.verdict_text import format_duration
from desktop.ui.background import Loader

log = logging.getLogger(__name__)

HEADERS = ("Started (local time)", "Workload", "Device", "Sustained", "Peak", "Verdict")
#: Said by the verdict card while no run is stored and none has run since the page opened.
NO_RUN_TITLE = "No test run yet"
#: While the panel is shown, how often it reads the stored runs again: a run that `rigscope stress` (or another
#: window) saved meanwhile appears in "Earlier runs" without a restart.
RUNS_RELOAD_S = 5.0


def run_cells(run: StressResult) -> list[str]:
    """One table row: start and length, workload and precision, device, sustained and peak with units, verdict."""
    when = datetime.fromtimestamp(run.started_s).strftime("%Y-%m-%d %H:%M")
    length = format_duration(max(0.0, run.ended_s - run.started_s))
    return [f"{when} ({length})", f"{run.workload} {run.dtype}", run.device or run.gpu_name,
            f"{run.sustained_throughput:.3g} {run.unit}", f"{run.peak_throughput:.3g} {run.unit}", run.summary]


def last_run_card(run: StressResult) -> tuple[str, str]:
    """(title, text) for the verdict card when the newest stored run is all there is to show."""
    when = datetime.fromtimestamp(run.started_s).strftime("%a %d %b %Y %H:%M")
    return f"Last run: {when}", f"{run.workload} {run.dtype} on {run.gpu_name}: {run.summary}"


class RunsTable(QTableWidget):
    """The stored runs, newest first, read-only."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(HEADERS), parent)
        self.setHorizontalHeaderLabels(list(HEADERS))
        self.horizontalHeader().setSectionResizeMode(len(HEADERS) - 1, QHeaderView.ResizeMode.Stretch)
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.setMaximumHeight(150)

    def show_runs(self, runs: Sequence[StressResult]) -> None:
        self.setRowCount(len(runs))
        for row, run in enumerate(runs):
            for col, text in enumerate(run_cells(run)):
                self.setItem(row, col, QTableWidgetItem(text))
        self.resizeColumnsToContents()
        self.horizontalHeader().setSectionResizeMode(len(HEADERS) - 1, QHeaderView.ResizeMode.Stretch)


class EarlierRuns(QWidget):
    """"Earlier runs": a title that says what is shown (reading, none stored, could not be read) over the table.

    ``db_path``: where the runs are stored (None: nothing to read); ``read_runs`` reads them, on a worker thread
    (tests pass slow or failing ones); ``busy``: a run is under way or being stored (it refreshes the table
    itself, so the timer leaves the table alone then). ``shown`` is emitted with each list the table shows.
    """

    shown = Signal(object)  # the runs now in the table, newest first

    def __init__(self, db_path: Path | None, read_runs: Callable[[Path | None], list[StressResult]],
                 busy: Callable[[], bool], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.db_path = db_path
        self.read_runs = read_runs
        self._busy = busy
        #: The runs in the table, newest first.
        self.runs: list[StressResult] = []
        self.title = QLabel("Earlier runs")
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        # Its own height and the table's at most: the page's charts take the rest, as if both sat in its layout.
        self.title.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.table = RunsTable()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSizeConstraint(QLayout.SizeConstraint.SetMinAndMaxSize)
        layout.addWidget(self.title)
        layout.addWidget(self.table, 1)
        self.loader = Loader(self, name="stress-runs")
        self.timer = QTimer(self)
        self.timer.setInterval(round(RUNS_RELOAD_S * 1000))
        self.timer.timeout.connect(self.reload)

    @property
    def loading(self) -> bool:
        """The stored runs are being read."""
        return self.loader.busy

    def refresh(self) -> None:
        """Read the stored runs on a worker thread; the table shows them when they arrive."""
        if self.db_path is None:
            self.show_runs([])
            return
        self.title.setText("Earlier runs: reading…")
        db_path, read_runs = self.db_path, self.read_runs
        self.loader.run(lambda: read_runs(db_path), self.show_runs, self.failed)

    def reload(self) -> None:
        """Read the stored runs again (the panel shown, or its timer while shown); the table changes only when the
        stored runs did, and a run under way or being stored is left alone (it refreshes the table itself)."""
        if self.db_path is None or self.loader.busy or self._busy():
            return
        db_path, read_runs = self.db_path, self.read_runs
        self.loader.run(lambda: read_runs(db_path), self._reloaded,
                        lambda error: log.warning("cannot list stress runs: %s", error))

    def _reloaded(self, runs: Sequence[StressResult]) -> None:
        if [r.run_id for r in runs] != [r.run_id for r in self.runs]:
            self.show_runs(runs)

    def failed(self, error: str) -> None:
        """The runs could not be read: said in the title (the table is a convenience; never let it break the page)."""
        log.warning("cannot list stress runs: %s", error)
        self.title.setText(f"Earlier runs: could not be read ({error})")

    def show_runs(self, runs: Sequence[StressResult]) -> None:
        self.runs = list(runs)
        self.title.setText("Earlier runs" if runs else "Earlier runs: none stored yet")
        self.table.show_runs(runs)
        self.shown.emit(self.runs)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.reload()
        self.timer.start()

    def hideEvent(self, event: QHideEvent) -> None:
        # Another page, the window closed or hidden in the tray: nobody looks at the table.
        self.timer.stop()
        super().hideEvent(event)
