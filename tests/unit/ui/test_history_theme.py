"""The weekly summary on the History page follows the dark theme; exported files stay on paper colours."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import pytest
from PySide6.QtGui import QColor, QImage

from desktop import config
from desktop.reporting import ReportData, build_report
from desktop.ui.pages.advisor_history import HistoryPage
from desktop.ui.report.report_charts import PAPER as PAPER_CHARTS
from desktop.ui.report.report_html import PAPER
from desktop.ui.theme import DARK, LIGHT
from tests.unit.advisor.demo_frame import DEMO_WEEK_START_S, TWO_GPUS, demo_week_frame


@pytest.fixture(scope="module")
def data() -> ReportData:
    frame = demo_week_frame(TWO_GPUS)
    return build_report(frame, None, config.Settings(), UTC, "2026-W47", now_s=DEMO_WEEK_START_S + 8 * 86400)


def _corner(png: bytes) -> str:
    image = QImage.fromData(png)
    assert not image.isNull()
    return QColor(image.pixel(2, 2)).name()


def _page(qtbot, data: ReportData) -> HistoryPage:
    page = HistoryPage(lambda: ["2026-W47"], lambda _label: data)
    qtbot.addWidget(page)
    page.apply_theme(DARK)  # as the window does when it builds the page
    page.page_shown()
    qtbot.waitUntil(lambda: not page.loading and page.data is not None, timeout=30_000)
    return page


def test_the_summary_is_dark_in_the_dark_theme(qtbot, data: ReportData) -> None:
    page = _page(qtbot, data)
    assert DARK.base in page.view.styleSheet() and DARK.text in page.view.styleSheet()
    html = page.view.document().toHtml()
    assert "#ffffff" not in page.view.styleSheet()
    assert page.pngs and all(_corner(png) == DARK.plot_background for png in page.pngs.values())
    assert QColor(DARK.text).name() in html.lower()
    # Back to light: redrawn on paper colours, without reading the week again.
    page.apply_theme(LIGHT)
    assert all(_corner(png) == PAPER_CHARTS.background for png in page.pngs.values())
    assert PAPER.page in page.view.styleSheet()


def test_exports_stay_on_paper_colours_from_a_dark_page(qtbot, data: ReportData, tmp_path: Path) -> None:
    page = _page(qtbot, data)
    paper = page.paper_pngs()
    assert paper.keys() == page.pngs.keys()
    assert all(_corner(png) == PAPER_CHARTS.background for png in paper.values())
    page.export(tmp_path / "week.html")
    html = (tmp_path / "week.html").read_text(encoding="utf-8")
    assert f"color: {PAPER.text}" in html and DARK.text not in html
    page.export(tmp_path / "week.pdf")
    assert (tmp_path / "week.pdf").read_bytes().startswith(b"%PDF")
