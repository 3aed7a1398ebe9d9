"""The Jobs page: the jobs run under `rigscope run`, newest first; the selected one's card and charts.

The list and each job's card and telemetry are read on a worker thread (``Loader``), from the
history database opened read-only there (the recorder, or `rigscope run` itself, may be writing).
The charts show the job's own throughput, GPU utilization, temperature and power over its span,
with the thermal guard's pauses shaded.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QGuiApplication, QKeySequence, QResizeEvent, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from advisor.frame import FloatArray
from advisor.job_card import JobCard
from desktop.jobs.card import (
    card_rows,
    duration_text,
    format_card,
    job_status,
)
from desktop.jobs.detail import CHARTS, JobDetail, broken_at_pauses, chart_bins, charts_note
from desktop.jobs.model import JobRecord
from desktop.sessions.jobs_reader import JobsHistory
from desktop.ui.background import Loader
from desktop.ui.pages.base import PageWidget
from desktop.ui.text import heading
from desktop.ui.theme import Theme
from desktop.ui.widgets.charts import LEFT_AXIS_WIDTH_PX
from desktop.ui.widgets.plot_column import PlotColumn
from desktop.ui.widgets.plot_item import TimeItem

#: The empty state (static rich text: nothing from outside goes in it).
EMPTY_TEXT = ("<p style='font-size: 13pt'><b>No jobs recorded yet.</b></p>"
              "<p>Run your own training or inference under Rigscope and its card lands here: how busy the GPU "
              "was, peak VRAM, time throttled, energy and its cost, and what the same job would cost in the "
              "cloud.</p><p><code style='font-size: 12pt'>rigscope run -- python train.py</code></p>"
              "<p>Add <code>--guard-c 85</code> to pause the job instead of letting the GPU overheat.</p>")
PAUSE_NOTE = "Shaded: the thermal guard paused the job."
#: The charts: key, title, unit (the throughput's unit is the job's own).
#: How long the chart width must stay put before a resized page reads the shown job again.
REBIN_DELAY_MS = 300


class JobsPage(PageWidget):
    """The job list (newest first), the selected job's card and its charts; F5 reads the list again."""

    def __init__(self, source: JobsHistory, theme: Theme) -> None:
        super().__init__()
        self.source = source
        self.theme = theme
        self.records: list[JobRecord] = []
        self.detail: JobDetail | None = None
        self._loaded_once = False
        #: The bins the shown job was read with: a much wider or narrower chart reads it again.
        self.bins = 0
        self._rebin = QTimer(self)
        self._rebin.setSingleShot(True)
        self._rebin.setInterval(REBIN_DELAY_MS)
        self._rebin.timeout.connect(self._rebin_now)
        self._pause_regions: list[tuple[TimeItem, pg.LinearRegionItem]] = []
        self.list_loader = Loader(self, name="jobs-list")
        self.detail_loader = Loader(self, name="jobs-detail")

        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        self.status = QLabel("")
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setToolTip("Read the jobs from the history again (F5)")
        self.copy_button = QPushButton("Copy card")
        self.copy_button.setToolTip("Copy the selected job's card as text (Ctrl+Shift+C)")
        self.copy_button.setEnabled(False)
        top.addWidget(self.status, 1)
        top.addWidget(self.copy_button)
        top.addWidget(self.refresh_button)
        layout.addLayout(top)

        self.stack = QStackedWidget()
        self.empty = QLabel(EMPTY_TEXT)
        self.empty.setTextFormat(Qt.TextFormat.RichText)
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.stack.addWidget(self.empty)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        self.table = QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels(["ID", "Started", "Duration", "Status", "Name"])
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        # ID, start, duration and status as wide as their text and header (the ID header read "D"); the name the rest.
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.Stretch)
        splitter.addWidget(self.table)

        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        self.title = QLabel("")
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        heading(self.title, 13.0)
        right_layout.addWidget(self.title)
        self.card_table = QTableWidget(0, 2)
        self.card_table.horizontalHeader().setVisible(False)
        self.card_table.verticalHeader().setVisible(False)
        self.card_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.card_table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.card_table.setShowGrid(False)
        self.card_table.setWordWrap(True)
        self.card_table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.card_table.horizontalHeader().setStretchLastSection(True)
        right_layout.addWidget(self.card_table, 2)
        self.charts = PlotColumn(self.theme)
        for key, title, unit in CHARTS:
            plot = self.charts.add_plot(key, title, unit, y_range=(0.0, 100.0) if unit == "%" else None)
            if unit == "°C":
                plot.set_min_span(10.0)
            elif unit != "%":  # throughput and power: a flat line with noise stays a flat line
                plot.set_min_span(1.0, 0.2)
        right_layout.addWidget(self.charts, 3)
        #: Instead of the charts when there is nothing to chart (a job of a few seconds): says why.
        self.charts_empty = QLabel("")
        self.charts_empty.setTextFormat(Qt.TextFormat.PlainText)
        self.charts_empty.setWordWrap(True)
        self.charts_empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.charts_empty.hide()
        right_layout.addWidget(self.charts_empty, 1)  # the card above takes its full height first
        self.pause_note = QLabel(PAUSE_NOTE)
        self.pause_note.setVisible(False)
        right_layout.addWidget(self.pause_note)
        splitter.addWidget(right)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 5)
        splitter.setSizes([420, 1050])
        self.stack.addWidget(splitter)
        layout.addWidget(self.stack, 1)

        self.refresh_button.clicked.connect(self.refresh)
        self.copy_button.clicked.connect(self.copy_card)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        QShortcut(QKeySequence(Qt.Key.Key_F5), self, self.refresh)
        QShortcut(QKeySequence("Ctrl+Shift+C"), self, self.copy_card)

    # --- loading ------------------------------------------------------------------------
    @property
    def loading(self) -> bool:
        return self.list_loader.busy or self.detail_loader.busy

    def page_shown(self) -> None:
        # Read again each time: a job that `rigscope run` finished in a terminal meanwhile appears.
        if not self.list_loader.busy:
            self.refresh()

    def show_history(self, db_path: Path) -> None:
        """List the jobs of the history at ``db_path`` (the demo week's, or this machine's again)."""
        self.source.db_path = db_path
        self.detail = None
        if self._loaded_once:
            self.refresh()

    def refresh(self) -> None:
        self._loaded_once = True
        self.status.setText("Reading the jobs from the history…")
        self.list_loader.run(self.source.jobs, self._show_list, self._list_failed)

    def _list_failed(self, error: str) -> None:
        self.status.setText(f"Could not read the jobs from the history: {error}")

    def _show_list(self, records: Any) -> None:
        selected = self.detail.record.job_id if self.detail is not None else None
        if self.detail is not None and list(records) == self.records:
            self._say_count()  # read again on show, nothing new: the shown card and charts stay as they are
            return
        self.records = list(records)
        self.table.blockSignals(True)
        self.table.setRowCount(len(self.records))
        for row, record in enumerate(self.records):
            started = datetime.fromtimestamp(record.started_s).strftime("%a %d %b %H:%M")
            duration = duration_text(record.duration_s) if record.duration_s is not None else "running"
            for col, text in enumerate((str(record.job_id), started, duration, job_status(record), record.name)):
                item = QTableWidgetItem(text)
                if col == 0:
                    item.setData(Qt.ItemDataRole.UserRole, record.job_id)
                self.table.setItem(row, col, item)
        self.table.resizeColumnsToContents()
        self.table.blockSignals(False)
        self.copy_button.setVisible(bool(self.records))
        if not self.records:
            self.stack.setCurrentWidget(self.empty)
            self.status.setText("")
            return
        self.stack.setCurrentIndex(1)
        self._say_count()
        ids = [r.job_id for r in self.records]
        self.table.selectRow(ids.index(selected) if selected in ids else 0)

    def _say_count(self) -> None:
        count = len(self.records)
        self.status.setText(f"{count} job{'s' if count != 1 else ''} recorded (newest first).")

    def _selection_changed(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return
        item = self.table.item(rows[0].row(), 0)
        if item is not None:
            self.show_job(int(item.data(Qt.ItemDataRole.UserRole)))

    def show_job(self, job_id: int) -> None:
        self.title.setText(f"Job #{job_id}: reading its card and telemetry…")
        bins = self._chart_bins()  # the plots' width, read on this thread
        self.bins = bins
        self.detail_loader.run(lambda: self.source.detail(job_id, bins), self._show_detail, self._detail_failed)

    def _chart_bins(self) -> int:
        return chart_bins(self.charts.width() - LEFT_AXIS_WIDTH_PX)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        # Re-read the shown job once the resizing settles, when its chart width changed by over a quarter.
        if self.detail is not None and self.bins and abs(self._chart_bins() - self.bins) > self.bins / 4:
            self._rebin.start()

    def _rebin_now(self) -> None:
        if self.detail is not None and not self.detail_loader.busy:
            self.show_job(self.detail.record.job_id)

    def _detail_failed(self, error: str) -> None:
        self.title.setText(f"Could not read this job: {error}")
        self.copy_button.setEnabled(False)

    # --- showing ------------------------------------------------------------------------
    def _show_detail(self, detail: Any) -> None:
        self.detail = detail
        card: JobCard = detail.card
        self.title.setText(f"Job #{detail.record.job_id}: {card.name}")
        rows = card_rows(card)[1:]  # the title says which job
        self.card_table.setRowCount(len(rows))
        for i, (label, text) in enumerate(rows):
            key = QTableWidgetItem(label)
            key.setForeground(QColor(self.theme.muted))
            self.card_table.setItem(i, 0, key)
            self.card_table.setItem(i, 1, QTableWidgetItem(text))
        self.card_table.resizeRowsToContents()
        # As tall as the card, no taller: the charts get the rest.
        height = sum(self.card_table.rowHeight(i) for i in range(len(rows))) + 2 * self.card_table.frameWidth() + 4
        self.card_table.setMaximumHeight(height)
        self.copy_button.setEnabled(True)
        self._draw_charts(detail)

    def _draw_charts(self, detail: JobDetail) -> None:
        note = charts_note(detail)
        self.charts_empty.setText(note)
        self.charts_empty.setVisible(bool(note))
        self.charts.setVisible(not note)
        throughput = self.charts.plot("throughput")
        throughput.unit = detail.record.throughput_unit or "items/s"
        self._set(throughput, "job", "job", *broken_at_pauses(detail.series.time_s, detail.series.throughput,
                                                                detail.pauses))
        for key, _title, _unit in CHARTS[1:]:
            plot = self.charts.plot(key)
            for trace in detail.gpus:
                self._set(plot, f"gpu{trace.index}", f"GPU {trace.index}", trace.time_s, trace.columns[key])
            shown = {f"gpu{t.index}" for t in detail.gpus}
            for series_key in plot.series_keys():
                if series_key not in shown:
                    plot.set_data(series_key, np.zeros(0), np.zeros(0))
        for plot in self.charts.plots():
            plot.show_readout(None)
        self._shade_pauses(detail.pauses)
        self.pause_note.setVisible(bool(detail.pauses))
        self.charts.set_x_range(detail.record.started_s, max(detail.end_s, detail.record.started_s + 1.0))

    @staticmethod
    def _set(plot: Any, key: str, label: str, time_s: FloatArray, values: FloatArray) -> None:
        if key not in plot.series_keys():
            plot.add_series(key, label)
        plot.set_data(key, np.asarray(time_s, dtype=np.float64), np.asarray(values, dtype=np.float64))

    def _shade_pauses(self, pauses: tuple[tuple[float, float], ...]) -> None:
        for item, region in self._pause_regions:
            item.removeItem(region)
        self._pause_regions = []
        colour = QColor(self.theme.warn)
        colour.setAlpha(60)
        for plot in self.charts.plots():
            for start_s, end_s in pauses:
                region = pg.LinearRegionItem(values=(start_s, end_s), movable=False, brush=pg.mkBrush(colour),
                                             pen=pg.mkPen(None))
                region.setZValue(-10)
                plot.item.addItem(region, ignoreBounds=True)
                self._pause_regions.append((plot.item, region))

    def copy_card(self) -> None:
        if self.detail is not None:
            QGuiApplication.clipboard().setText(format_card(self.detail.card))

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        self.charts.apply_theme(theme)
        if self.detail is not None:
            self._show_detail(self.detail)

    def shutdown(self) -> None:
        self.list_loader.discard()
        self.detail_loader.discard()
