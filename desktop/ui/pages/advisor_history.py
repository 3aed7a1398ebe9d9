"""The History page: a week picker, the weekly summary with its charts and heatmap, and export.

The week's data comes from ``desktop.reporting`` (``HistorySource.report``, on a worker thread);
this page draws the charts and shows the report's HTML. Its screenshot comes from the running
app: `make screenshots` (tools/screenshots.py).

The summary follows the window's theme (charts and page colours, redrawn on a theme switch);
exported files stay on paper colours (dark on white), as they are printed and opened elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QImage, QTextDocument
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
)

from desktop.advice import span_text
from desktop.reporting import ReportData
from desktop.ui.background import Loader
from desktop.ui.pages.base import PageWidget
from desktop.ui.theme import LIGHT, Theme


class HistoryPage(PageWidget):
    """A week picker, the weekly summary with its charts and heatmap (the report's HTML), and export."""

    def __init__(self, weeks: Callable[[], list[str]], report: Callable[[str], ReportData],
                 theme: Theme = LIGHT, default_week: Callable[[], str | None] | None = None) -> None:
        super().__init__()
        self.weeks_source = weeks
        #: The week shown first: `rigscope report`'s default (``desktop.report_week.default_week``); else the newest.
        self.default_week = default_week
        self.report_source = report
        self.theme = theme
        self.data: ReportData | None = None
        #: The charts as shown (in the window's theme); on paper for export (drawn when first exported).
        self.pngs: dict[str, bytes] = {}
        self._paper_pngs: dict[str, bytes] | None = None
        self.loader = Loader(self)
        #: The cost inputs changed since the shown week was read: read it again when next shown.
        self.stale = False
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
        # Issue 16: jump to the week's usage per user, command and container (the report's section).
        self.who_button = QPushButton("&Who used the GPU")
        self.who_button.setToolTip("GPU time, energy and its cost per user, command and container (Alt+W)")
        self.who_button.setEnabled(False)  # until a week with process samples is shown
        top.addWidget(self.who_button)
        top.addWidget(self.export_button)
        layout.addLayout(top)
        #: How much history the shown week holds, and what advice needs when it is too little (plain text).
        self.note = QLabel("")
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.note.setWordWrap(True)
        self.note.setVisible(False)
        layout.addWidget(self.note)
        self.view = QTextBrowser()
        self.view.setOpenLinks(False)
        layout.addWidget(self.view, 1)
        self._paint_view()
        self.previous_button.clicked.connect(lambda: self._step(+1))
        self.next_button.clicked.connect(lambda: self._step(-1))
        self.week_combo.currentTextChanged.connect(self.show_week)
        self.export_button.clicked.connect(self._export_dialog)
        self.who_button.clicked.connect(lambda: self.view.scrollToAnchor("who"))

    @property
    def loading(self) -> bool:
        return self.loader.busy

    def page_shown(self) -> None:
        if self.week_combo.count() == 0 and not self.loading:
            self.refresh()
        elif self.stale and not self.loading:
            self.show_week(self.week_combo.currentText())

    def inputs_changed(self) -> None:
        """A price was typed on the Costs page: the week's cost part is read again (at once when shown,
        else when next shown), not only when another week is picked."""
        self.stale = True
        if self.isVisible() and self.week_combo.count():
            self.page_shown()

    def refresh(self) -> None:
        self.week_combo.blockSignals(True)
        self.week_combo.clear()
        self.week_combo.addItems(self.weeks_source())  # newest first
        first = self.default_week() if self.default_week is not None else None
        if first is not None and self.week_combo.findText(first) >= 0:
            self.week_combo.setCurrentIndex(self.week_combo.findText(first))
        self.week_combo.blockSignals(False)
        if self.week_combo.count():
            self.show_week(self.week_combo.currentText())
        else:
            self.view.setPlainText("No history yet: record some (or run rigscope demo) to see weekly summaries.")

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
        self.who_button.setEnabled(False)
        self.note.setVisible(False)
        self.view.setPlainText(f"Reading {label} from the history and summarising it...")
        self.loader.run(lambda: self.report_source(label), self._show_data, self._failed)

    def _failed(self, error: str) -> None:
        self._enable_steps()
        self.view.setPlainText(f"Could not read this week from the history: {error}")

    def _enable_steps(self) -> None:
        self.previous_button.setEnabled(self.week_combo.currentIndex() < self.week_combo.count() - 1)
        self.next_button.setEnabled(self.week_combo.currentIndex() > 0)

    def _paint_view(self) -> None:
        from desktop.ui.report.report_html import report_colours

        colours = report_colours(self.theme)
        self.view.setStyleSheet(f"QTextBrowser {{ background: {colours.page}; color: {colours.text}; }}")

    def apply_theme(self, theme: Theme) -> None:
        """Redraw the summary (page and charts) in ``theme``."""
        self.theme = theme
        self._paint_view()
        if self.data is not None:
            self._render()

    def _show_data(self, data: Any) -> None:
        self.data = data
        self.stale = False
        self._paper_pngs = None
        advice = data.advice
        shortfall = advice.shortfall()
        self.note.setText(f"{data.week_label}: {span_text(advice.recorded_s)} of recorded history."
                          + (f" {shortfall}" if shortfall is not None else ""))
        self.note.setVisible(True)
        self._render()
        self.who_button.setEnabled(bool(self.data.who))
        self.export_button.setEnabled(True)
        self._enable_steps()

    def _render(self) -> None:
        """Draw the charts and the HTML of the shown week in the page's theme."""
        from desktop.ui.report.report_charts import chart_style
        from desktop.ui.report.report_html import render_html, report_colours
        from desktop.ui.report.reports import render_charts

        assert self.data is not None
        self.pngs = render_charts(self.data, chart_style(self.theme))
        scroll = self.view.verticalScrollBar().value()
        doc = QTextDocument(self.view)
        for key, png in self.pngs.items():
            doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(f"chart-{key}.png"), QImage.fromData(png))
        doc.setHtml(render_html(self.data, lambda key: f"chart-{key}.png", report_colours(self.theme)))
        self.view.setDocument(doc)
        self.view.verticalScrollBar().setValue(scroll)

    def paper_pngs(self) -> dict[str, bytes]:
        """The charts on paper colours, for exported files (the shown ones when the page is light)."""
        if not self.theme.dark:
            return self.pngs
        if self._paper_pngs is None:
            from desktop.ui.report.reports import render_charts

            assert self.data is not None
            self._paper_pngs = render_charts(self.data)
        return self._paper_pngs

    def export(self, path: Path) -> None:
        """Write the shown week as HTML, PDF, JSON or CSV, by the file's extension."""
        from desktop.report_output import to_csv, to_json, write_report_text
        from desktop.ui.report.reports import to_html, write_pdf

        if self.data is None:
            return
        suffix = path.suffix.lower()
        # Beside the target and renamed over it, as `rigscope report -o FILE`: never through a symlink there.
        if suffix == ".pdf":
            write_pdf(self.data, self.paper_pngs(), path)
        elif suffix == ".json":
            write_report_text(path, to_json(self.data))
        elif suffix == ".csv":
            write_report_text(path, to_csv(self.data))
        else:
            write_report_text(path, to_html(self.data, self.paper_pngs()))

    def _export_dialog(self) -> None:
        if self.data is None:
            return
        name, _ = QFileDialog.getSaveFileName(self, "Export the weekly report", f"rigscope-{self.data.week_label}.html",
                                              "HTML (*.html);;PDF (*.pdf);;JSON (*.json);;CSV (*.csv)")
        if name:
            self.export(Path(name))
