"""The History page (week picker, the weekly summary with its charts and heatmap, export) and the
history reader behind the Advisor, Costs and History pages.

Their screenshots come from the running app: `make screenshots` (desktop/ui/screenshots.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QUrl
from PySide6.QtGui import QImage, QTextDocument
from PySide6.QtWidgets import QComboBox, QFileDialog, QHBoxLayout, QPushButton, QTextBrowser, QVBoxLayout, QWidget

from desktop.advice import Advice
from desktop.ui.background import Loader


class HistoryPage(QWidget):
    """A week picker, the weekly summary with its charts and heatmap (the report's HTML), and export."""

    def __init__(self, weeks: Callable[[], list[str]], report: Callable[[str], Any]) -> None:
        super().__init__()
        self.weeks_source = weeks
        self.report_source = report
        self.data: Any = None
        self.pngs: dict[str, bytes] = {}
        self.loader = Loader(self)
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        self.previous_button = QPushButton("< Previous week")
        self.week_combo = QComboBox()
        self.next_button = QPushButton("Next week >")
        self.export_button = QPushButton("Export...")
        self.export_button.setEnabled(False)  # until a week is shown
        for widget in (self.previous_button, self.week_combo, self.next_button):
            top.addWidget(widget)
        top.addStretch(1)
        top.addWidget(self.export_button)
        layout.addLayout(top)
        self.view = QTextBrowser()
        self.view.setOpenLinks(False)
        # The summary is the report's page, shown as on paper in either theme.
        self.view.setStyleSheet("QTextBrowser { background: #ffffff; color: #222222; }")
        layout.addWidget(self.view, 1)
        self.previous_button.clicked.connect(lambda: self._step(+1))
        self.next_button.clicked.connect(lambda: self._step(-1))
        self.week_combo.currentTextChanged.connect(self.show_week)
        self.export_button.clicked.connect(self._export_dialog)

    @property
    def loading(self) -> bool:
        return self.loader.busy

    def page_shown(self) -> None:
        if self.week_combo.count() == 0 and not self.loading:
            self.refresh()

    def refresh(self) -> None:
        self.week_combo.blockSignals(True)
        self.week_combo.clear()
        self.week_combo.addItems(self.weeks_source())  # newest first
        self.week_combo.blockSignals(False)
        if self.week_combo.count():
            self.show_week(self.week_combo.currentText())
        else:
            self.view.setPlainText("No history yet: record some (or run `rigscope demo`) to see weekly summaries.")

    def _step(self, delta: int) -> None:
        index = self.week_combo.currentIndex() + delta
        if 0 <= index < self.week_combo.count():
            self.week_combo.setCurrentIndex(index)

    def show_week(self, label: str) -> None:
        """Load and summarise the week on a worker thread; the charts are drawn here when it is done."""
        if not label:
            return
        self.previous_button.setEnabled(False)
        self.next_button.setEnabled(False)
        self.export_button.setEnabled(False)
        self.view.setPlainText(f"Reading {label} from the history and summarising it...")
        self.loader.run(lambda: self.report_source(label), self._show_data, self._failed)

    def _failed(self, error: str) -> None:
        self._enable_steps()
        self.view.setPlainText(f"Could not read this week from the history: {error}")

    def _enable_steps(self) -> None:
        self.previous_button.setEnabled(self.week_combo.currentIndex() < self.week_combo.count() - 1)
        self.next_button.setEnabled(self.week_combo.currentIndex() > 0)

    def _show_data(self, data: Any) -> None:
        from desktop.ui.report_html import render_html
        from desktop.ui.reports import render_charts

        self.data = data
        self.pngs = render_charts(self.data)
        doc = QTextDocument(self.view)
        for key, png in self.pngs.items():
            doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(f"chart-{key}.png"), QImage.fromData(png))
        doc.setHtml(render_html(self.data, lambda key: f"chart-{key}.png"))
        self.view.setDocument(doc)
        self.export_button.setEnabled(True)
        self._enable_steps()

    def export(self, path: Path) -> None:
        """Write the shown week as HTML, PDF, JSON or CSV, by the file's extension."""
        from desktop.ui import reports

        if self.data is None:
            return
        suffix = path.suffix.lower()
        if suffix == ".pdf":
            reports.write_pdf(self.data, self.pngs, path)
        elif suffix == ".json":
            path.write_text(reports.to_json(self.data), encoding="utf-8")
        elif suffix == ".csv":
            path.write_text(reports.to_csv(self.data), encoding="utf-8")
        else:
            path.write_text(reports.to_html(self.data, self.pngs), encoding="utf-8")

    def _export_dialog(self) -> None:
        if self.data is None:
            return
        name, _ = QFileDialog.getSaveFileName(self, "Export the weekly report", f"rigscope-{self.data.week_label}.html",
                                              "HTML (*.html);;PDF (*.pdf);;JSON (*.json);;CSV (*.csv)")
        if name:
            self.export(Path(name))


class HistorySource:
    """Reads the history database on demand for the three pages (read-only; the recorder may be writing)."""

    def __init__(self, db_path: Path, settings: Any, days: float = 7.0) -> None:
        self.db_path = db_path
        self.settings = settings
        self.days = days

    def advice(self) -> Advice | None:
        from desktop.advice import compute_advice, load_recent_frame, open_history
        from desktop.errors import UserError

        try:
            store = open_history(str(self.db_path))
            try:
                frame = load_recent_frame(store, self.days)
            finally:
                store.close()
        except UserError:
            return None
        return compute_advice(frame, self.settings)

    def weeks(self) -> list[str]:
        from desktop.advice import open_history
        from desktop.errors import UserError
        from desktop.ui.reports import SystemLocalTime, week_label

        try:
            store = open_history(str(self.db_path))
        except UserError:
            return []
        with store:
            span = store.time_range()
        if span is None:
            return []
        tz = SystemLocalTime()
        labels: list[str] = []
        t = max(span[0], span[1] - 3600.0)  # as the report's default: a lone sample does not make a week
        while t >= span[0] - 7 * 86400 and len(labels) < 520:
            label = week_label(max(t, span[0]), tz)
            if label not in labels:
                labels.append(label)
            t -= 7 * 86400.0
        return labels

    def report(self, label: str) -> Any:
        from desktop.advice import open_history
        from desktop.ui.reports import SystemLocalTime, build_report, load_week

        tz = SystemLocalTime()
        with open_history(str(self.db_path)) as store:
            label, frame, previous, notes = load_week(store, label, tz, time.time())
        return build_report(frame, previous, self.settings, tz, label, notes=notes)
