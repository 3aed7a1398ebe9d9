"""The processes page: who holds GPU memory and how much of the GPU each one uses, sortable and
filterable; a chart of the selected process's SM and memory utilization; end your own process after asking.

Per-process utilization (SM, memory, encoder, decoder %) is what the driver reports over the last
process poll; "n/a" where the GPU does not report it (Windows WDDM, MIG, Kepler), never 0.
Process names, users, commands and containers are chosen by whoever runs the process: every place
they are shown is plain text (``desktop.ui.text``), a name like ``<img src=...>`` stays those characters.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
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
from desktop.ui.pages.base import PageWidget
from desktop.ui.text import plain, plain_message_box, plain_tooltip
from desktop.ui.theme import Theme
from desktop.ui.widgets.charts import TimePlot
from desktop.ui.widgets.plot_column import PlotColumn

#: Model columns (tests and sorting use these indices); the header shows them in ``VISUAL_ORDER``.
COLUMNS = ("PID", "Name", "User", "GPU", "VRAM (MiB)", "CPU (%)", "Running for",
           "SM (%)", "Mem (%)", "Enc (%)", "Dec (%)", "Command", "Container")
UTIL_COLUMNS = (7, 8, 9, 10)
NUMERIC_COLUMNS = frozenset({0, 3, 4, 5, 6, *UTIL_COLUMNS})
VISUAL_ORDER = (0, 1, 2, 3, 4, 7, 8, 9, 10, 5, 6, 11, 12)
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
AnyIndex = QModelIndex | QPersistentModelIndex
#: Ends the process ``pid`` that started at ``started_s`` (epoch s) once the user confirmed it: an error message or
#: None. The start is the confirmed process's identity: the PID may belong to another process by the time it acts.
EndProcess = Callable[[int, float | None], str | None]
#: How far back the selected process's utilization chart reaches (from the live snapshots).
HISTORY_WINDOW_S = 600.0
EMPTY_TEXT = ("No process holds GPU memory right now.\n"
              "Processes appear here when they allocate memory on a GPU (refreshed every few seconds).")


class UtilizationHistory:
    """The SM and memory utilization of each (pid, GPU) seen in the last ``window_s``, from live snapshots."""

    def __init__(self, window_s: float = HISTORY_WINDOW_S) -> None:
        self.window_s = window_s
        self._points: dict[tuple[int, int], deque[tuple[float, float, float]]] = {}

    def add(self, processes: tuple[GpuProcess, ...] | list[GpuProcess], time_s: float) -> None:
        for proc in processes:
            points = self._points.setdefault((proc.pid, proc.gpu_index), deque())
            if points and points[-1][0] >= time_s:
                continue  # the same poll again (or time went back): keep the first
            points.append((time_s, _nan(proc.sm_util_pct), _nan(proc.mem_util_pct)))
        cut = time_s - self.window_s
        for key in list(self._points):
            points = self._points[key]
            while points and points[0][0] < cut:
                points.popleft()
            if not points:
                del self._points[key]

    def series(self, pid: int, gpu_index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(time_s, sm %, mem %) float64 arrays, NaN where n/a."""
        points = self._points.get((pid, gpu_index), ())
        arr = np.array(list(points), dtype=np.float64).reshape(-1, 3)
        return arr[:, 0], arr[:, 1], arr[:, 2]


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


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
        return (proc.pid, proc.name, proc.user, proc.gpu_index, proc.vram_mib, proc.cpu_pct, running,
                proc.sm_util_pct, proc.mem_util_pct, proc.enc_util_pct, proc.dec_util_pct, proc.command,
                proc.container)[column]

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        proc = self.rows[index.row()]
        column = index.column()
        value = self._value(proc, column)
        if role == SORT_ROLE:
            if value is None:
                return -math.inf if column in NUMERIC_COLUMNS else ""
            return value.lower() if isinstance(value, str) else value
        if role == Qt.ItemDataRole.DisplayRole:
            if value is None:
                # Outside a container there is nothing to name: blank, not "n/a" (unknown).
                return "" if COLUMNS[column] == "Container" else "n/a"
            if column == 4:
                return f"{value:,.0f}"
            if column == 5:
                return f"{value:.1f}"
            if column in UTIL_COLUMNS:
                return f"{value:.0f}"
            if column == 6:
                return format_duration(value)
            return str(value)
        if role == Qt.ItemDataRole.TextAlignmentRole and column in NUMERIC_COLUMNS:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            mine = "" if proc.own else " — not yours: cannot be ended here"
            lines = [f"{proc.name} (pid {proc.pid}, {proc.kind}){mine}"]
            lines += [text for text in (proc.command, proc.container) if text]
            if column in UTIL_COLUMNS and value is None:
                lines.append("This GPU does not report per-process utilization (n/a: unknown, not idle)")
            return plain_tooltip("\n".join(lines))
        return None

    def process(self, row: int) -> GpuProcess:
        return self.rows[row]


class ProcessesPage(PageWidget):
    """The table, a filter box and an End process button (enabled for your own processes only)."""

    def __init__(self, theme: Theme, end_process: EndProcess | None = None,
                 confirm: Callable[[GpuProcess], bool] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        self._end_process = end_process
        self._confirm = confirm or self._ask
        self.model = ProcessModel()
        self.history = UtilizationHistory()
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
        # Every column as wide as its contents (an empty Container column as its header), the command the rest:
        # fixed widths left a 200 px empty Container and cut long names while the command was squeezed.
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(11, QHeaderView.ResizeMode.Stretch)
        for visual, column in enumerate(VISUAL_ORDER):
            header.moveSection(header.visualIndex(column), visual)
        self.table.selectionModel().selectionChanged.connect(self._selection_changed)

        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter by name, user, command, container or PID")
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

        self.chart_title = plain(QLabel(""))
        #: The chart, built when a selected process first has points to show (``chart``): the window's
        #: first frame does not wait for a plot on a page nobody opened yet.
        self._chart: PlotColumn | None = None
        self._util_plot: TimePlot | None = None
        self.legend = QLabel("")  # our own words and theme colours only: rich text is safe here
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self._set_legend(theme)
        self.chart_note = QLabel("")
        self.chart_note.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.chart_box = QWidget()
        self.chart_box.setFixedHeight(160)
        self.chart_stack = QStackedLayout(self.chart_box)
        self.chart_stack.addWidget(self.chart_note)

        self.empty = QLabel(EMPTY_TEXT)
        self.empty.setTextFormat(Qt.TextFormat.PlainText)
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.stack = QStackedLayout()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.table)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.message)
        layout.addLayout(self.stack, 1)
        chart_top = QHBoxLayout()
        chart_top.addWidget(self.chart_title, 1)
        chart_top.addWidget(self.legend)
        layout.addLayout(chart_top)
        layout.addWidget(self.chart_box)
        self.message.hide()
        #: The process the message says was asked to end (the message goes when it has).
        self._asked_pid: int | None = None
        self._now_s: float | None = None
        self._update_chart()

    def add_snapshot(self, snap: Snapshot) -> None:
        # Where the driver lists no processes at all (WSL2), the empty page says why instead of "none right now".
        self.empty.setText(snap.source.processes_note or EMPTY_TEXT)
        if snap.processes_fresh:
            self.set_processes(snap.processes, snap.time_s)

    def set_processes(self, processes: tuple[GpuProcess, ...] | list[GpuProcess], now_s: float | None = None) -> None:
        selected = self.selected()
        if self._asked_pid is not None and all(p.pid != self._asked_pid for p in processes):
            self._asked_pid = None  # "Asked python (pid 2311) to end" is done once that process is gone
            self.message.hide()
        if now_s is not None:
            self.history.add(processes, now_s)
            self._now_s = now_s
        self.model.set_processes(processes, now_s)
        total = sum(p.vram_mib or 0.0 for p in processes)
        gpus = len({p.gpu_index for p in processes})
        self.summary.setText(f"{len(processes)} process{'es hold' if len(processes) != 1 else ' holds'} "
                             f"{total:,.0f} MiB on {gpus} GPU{'s' if gpus != 1 else ''}" if processes else "")
        self.stack.setCurrentWidget(self.table if processes else self.empty)
        if selected is not None:  # keep the selection across refreshes
            for row, proc in enumerate(self.model.rows):
                if (proc.pid, proc.gpu_index) == (selected.pid, selected.gpu_index):
                    self.table.selectRow(self.proxy.mapFromSource(self.model.index(row, 0)).row())
                    break
        self._selection_changed()

    @property
    def chart(self) -> PlotColumn:
        """The selected process's chart (built on first use, in the chart box's stack)."""
        if self._chart is None:
            self._chart = PlotColumn(self.theme)
            self._util_plot = self._chart.add_plot("util", "SM and memory", "%", y_range=(0.0, 100.0), height=150)
            self._util_plot.add_series("sm", "SM %")
            self._util_plot.add_series("mem", "Memory %")
            self.chart_stack.addWidget(self._chart)
        return self._chart

    @property
    def util_plot(self) -> TimePlot:
        if self._util_plot is None:
            _ = self.chart  # builds it
        assert self._util_plot is not None
        return self._util_plot

    def selected(self) -> GpuProcess | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        return self.model.process(self.proxy.mapToSource(rows[0]).row())

    def _selection_changed(self, *_: object) -> None:
        proc = self.selected()
        self.end_button.setEnabled(proc is not None and proc.own and self._end_process is not None)
        self._update_chart()

    def _update_chart(self) -> None:
        """The selected process's SM and memory utilization over the last minutes, or why there is none."""
        proc = self.selected()
        minutes = f"{HISTORY_WINDOW_S / 60:.0f} min"
        if proc is None:
            self.chart_title.setText("Utilization of the selected process")
            self.chart_note.setText("Select a process to see its SM and memory utilization "
                                    f"over the last {minutes}.")
            self.chart_stack.setCurrentWidget(self.chart_note)
            return
        self.chart_title.setText(f"{proc.name} (pid {proc.pid}) on GPU {proc.gpu_index}: "
                                 f"SM and memory utilization (%), last {minutes}")
        time_s, sm, mem = self.history.series(proc.pid, proc.gpu_index)
        if not (np.isfinite(sm).any() or np.isfinite(mem).any()):
            reported = proc.sm_util_pct is not None or proc.mem_util_pct is not None
            self.chart_note.setText("Collecting: the utilization is read every few seconds." if reported else
                                    "n/a: this GPU does not report per-process utilization "
                                    "(Windows WDDM, MIG or an older GPU).")
            self.chart_stack.setCurrentWidget(self.chart_note)
            return
        self.util_plot.set_data("sm", time_s, sm)
        self.util_plot.set_data("mem", time_s, mem)
        end = self._now_s if self._now_s is not None else float(time_s[-1])
        self.chart.set_x_range(end - HISTORY_WINDOW_S, end)
        self.chart_stack.setCurrentWidget(self.chart)

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
        # The row as it was confirmed: (pid, start). A refresh while the question was open may show another
        # process under that PID; the ender signals only the one confirmed, checked when it acts.
        error = self._end_process(proc.pid, proc.started_s)
        self.message.setText(error or f"Asked {proc.name} (pid {proc.pid}) to end.")
        self._asked_pid = None if error else proc.pid
        self.message.setStyleSheet(f"color: {self.theme.bad if error else self.theme.muted};")
        self.message.show()

    def _set_legend(self, theme: Theme) -> None:
        sm, mem = theme.series[0], theme.series[1]
        self.legend.setText(f'<span style="color:{sm}">━━</span> SM % &nbsp; '
                            f'<span style="color:{mem}">╍╍</span> Memory %')  # dashed: the chart's second style

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        if self._chart is not None:  # built with the theme of its time
            self._chart.apply_theme(theme)
        self._set_legend(theme)
