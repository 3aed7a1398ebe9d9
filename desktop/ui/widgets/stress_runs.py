"""The Stress page's table of earlier runs, and what the verdict card says before this session's first run.

Every number in the table carries its unit: the throughput unit differs by workload
(TFLOP/s for GEMM, GB/s for bandwidth), so it is in each cell, not in the header.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from PySide6.QtWidgets import QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from advisor.frame import StressResult
from advisor.verdict_text import format_duration

HEADERS = ("Started (local time)", "Workload", "Device", "Sustained", "Peak", "Verdict")
#: Said by the verdict card while no run is stored and none has run since the page opened.
NO_RUN_TITLE = "No test run yet"


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
