"""The processes page: who holds GPU memory, sortable and filterable; end your own process after asking.

Process names and users are chosen by whoever runs the process: every place they are shown
is plain text (``desktop.ui.text``), a name like ``<img src=...>`` stays those characters.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QStackedLayout,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from desktop.telemetry.model import GpuProcess, Snapshot
from desktop.ui.text import plain, plain_message_box, plain_tooltip
from desktop.ui.theme import Theme

COLUMNS = ("PID", "Name", "User", "GPU", "VRAM (MiB)", "CPU (%)", "Running for")
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
AnyIndex = QModelIndex | QPersistentModelIndex


def format_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "n/a"
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s"


class ProcessModel(QAbstractTableModel):
    """One row per (process, GPU); numbers sort as numbers (``SORT_ROLE``), missing values last."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.rows: list[GpuProcess] = []
        self._now = now

    def set_processes(self, processes: tuple[GpuProcess, ...] | list[GpuProcess], now_s: float | None = None) -> None:
        """Replace the rows; ``now_s`` (the snapshot's time) is what "running for" counts to."""
        if now_s is not None:
            self._now = lambda: now_s
        self.beginResetModel()
        self.rows = list(processes)
        self.endResetModel()

    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008 - Qt's default argument
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def _value(self, proc: GpuProcess, column: int) -> Any:
        running = self._now() - proc.started_s if proc.started_s is not None else None
        return (proc.pid, proc.name, proc.user, proc.gpu_index, proc.vram_mib, proc.cpu_pct, running)[column]

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        proc = self.rows[index.row()]
        column = index.column()
        value = self._value(proc, column)
        if role == SORT_ROLE:
            if value is None:
                return -math.inf if column >= 3 else ""
            return value.lower() if isinstance(value, str) else value
        if role == Qt.ItemDataRole.DisplayRole:
            if value is None:
                return "n/a"
            if column == 4:
                return f"{value:,.0f}"
            if column == 5:
                return f"{value:.1f}"
            if column == 6:
                return format_duration(value)
            return str(value)
        if role == Qt.ItemDataRole.TextAlignmentRole and column in (0, 3, 4, 5, 6):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            mine = "" if proc.own else " — not yours: cannot be ended here"
            return plain_tooltip(f"{proc.name} (pid {proc.pid}, {proc.kind}){mine}")
        return None

    def process(self, row: int) -> GpuProcess:
        return self.rows[row]


class ProcessesPage(QWidget):
    """The table, a filter box and an End process button (enabled for your own processes only)."""

    def __init__(self, theme: Theme, end_process: Callable[[int], str | None] | None = None,
                 confirm: Callable[[GpuProcess], bool] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        self._end_process = end_process
        self._confirm = confirm or self._ask
        self.model = ProcessModel()
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.proxy.setFilterKeyColumn(-1)  # match any column: name, user, pid
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(4, Qt.SortOrder.DescendingOrder)  # biggest VRAM first
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        for column, width in ((0, 80), (2, 120), (3, 60), (4, 110), (5, 90), (6, 130)):
            self.table.setColumnWidth(column, width)
        self.table.selectionModel().selectionChanged.connect(self._selection_changed)

        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter by name, user or PID")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.end_button = QPushButton("End process…")
        self.end_button.setEnabled(False)
        self.end_button.setToolTip("Ends the selected process after asking; only your own processes")
        self.end_button.clicked.connect(self.end_selected)
        self.message = plain(QLabel(""))  # "Asked <name> ... to end"
        self.summary = QLabel("")
        top = QHBoxLayout()
        top.addWidget(self.summary)
        top.addSpacing(12)
        top.addWidget(self.filter, 1)
        top.addWidget(self.end_button)

        self.empty = QLabel("No process holds GPU memory right now.\n"
                            "Processes appear here when they allocate memory on a GPU (refreshed every few seconds).")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.stack = QStackedLayout()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.table)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.message)
        layout.addLayout(self.stack, 1)
        self.message.hide()

    def add_snapshot(self, snap: Snapshot) -> None:
        if snap.processes_fresh:
            self.set_processes(snap.processes, snap.time_s)

    def set_processes(self, processes: tuple[GpuProcess, ...] | list[GpuProcess], now_s: float | None = None) -> None:
        selected = self.selected()
        self.model.set_processes(processes, now_s)
        total = sum(p.vram_mib or 0.0 for p in processes)
        gpus = len({p.gpu_index for p in processes})
        self.summary.setText(f"{len(processes)} process{'es' if len(processes) != 1 else ''} hold "
                             f"{total:,.0f} MiB on {gpus} GPU{'s' if gpus != 1 else ''}" if processes else "")
        self.stack.setCurrentWidget(self.table if processes else self.empty)
        if selected is not None:  # keep the selection across refreshes
            for row, proc in enumerate(self.model.rows):
                if (proc.pid, proc.gpu_index) == (selected.pid, selected.gpu_index):
                    self.table.selectRow(self.proxy.mapFromSource(self.model.index(row, 0)).row())
                    break
        self._selection_changed()

    def selected(self) -> GpuProcess | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        return self.model.process(self.proxy.mapToSource(rows[0]).row())

    def _selection_changed(self, *_: object) -> None:
        proc = self.selected()
        self.end_button.setEnabled(proc is not None and proc.own and self._end_process is not None)

    def confirm_box(self, proc: GpuProcess) -> QMessageBox:
        """The "End process?" question for ``proc`` (not yet shown)."""
        return plain_message_box(
            self, "End process?",
            f"End {proc.name} (pid {proc.pid})? It holds {proc.vram_mib or 0:,.0f} MiB on GPU {proc.gpu_index}.\n"
            "Unsaved work in that process is lost.", icon=QMessageBox.Icon.Question,
            buttons=QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            default=QMessageBox.StandardButton.Cancel)

    def _ask(self, proc: GpuProcess) -> bool:
        box = self.confirm_box(proc)
        try:
            return box.exec() == QMessageBox.StandardButton.Yes
        finally:
            box.deleteLater()

    def end_selected(self) -> None:
        proc = self.selected()
        if proc is None or not proc.own or self._end_process is None:
            return
        if not self._confirm(proc):
            return
        error = self._end_process(proc.pid)
        self.message.setText(error or f"Asked {proc.name} (pid {proc.pid}) to end.")
        self.message.setStyleSheet(f"color: {self.theme.bad if error else self.theme.muted};")
        self.message.show()

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
