"""The PDF report's pages: table headers repeat on each page, no word broken in the middle, no page left
nearly empty before the charts, and a heading or caption never parted from what it introduces."""

from __future__ import annotations

from datetime import UTC

import pytest
from PySide6.QtGui import QTextBlock, QTextCursor, QTextDocument, QTextFrame, QTextTable

from desktop import config
from desktop.reporting import ReportData, build_report
from desktop.ui.report import reports
from desktop.ui.report.report_charts import ensure_app
from tests.unit.advisor.demo_frame import DEMO_WEEK_START_S, TWO_GPUS, demo_week_frame

#: A4 at 96 dpi less 15 mm margins, as the PDF writer gives it.
PAGE = (679.0, 1008.0)


@pytest.fixture(scope="module")
def doc() -> QTextDocument:
    ensure_app()
    data: ReportData = build_report(demo_week_frame(TWO_GPUS), None, config.Settings(), UTC, "2026-W47",
                                    now_s=DEMO_WEEK_START_S + 8 * 86400)
    doc = reports.report_document(data, reports.render_charts(data), *PAGE)
    assert doc.pageCount() > 0  # lays it out (Qt lays a document out lazily)
    return doc


def _blocks(doc: QTextDocument) -> list[QTextBlock]:
    out, block = [], doc.begin()
    while block.isValid():
        out.append(block)
        block = block.next()
    return out


def _top_level(doc: QTextDocument) -> list[QTextBlock]:
    return [b for b in _blocks(doc) if QTextCursor(b).currentTable() is None]


def _page(y: float) -> int:
    return int(y // PAGE[1])


def _tables(frame: QTextFrame) -> list[QTextTable]:
    found = []
    for child in frame.childFrames():
        if isinstance(child, QTextTable):
            found.append(child)
        found.extend(_tables(child))
    return found


def test_every_table_repeats_its_header_row_on_each_page(doc: QTextDocument) -> None:
    tables = _tables(doc.rootFrame())
    assert tables and all(t.format().headerRowCount() == 1 for t in tables)


def test_no_word_is_broken_in_the_middle(doc: QTextDocument) -> None:
    broken = []
    for block in _blocks(doc):
        layout, text = block.layout(), block.text()
        for i in range(layout.lineCount() - 1):
            end = layout.lineAt(i).textStart() + layout.lineAt(i).textLength()
            if 0 < end < len(text) and text[end - 1].isalnum() and text[end].isalnum():
                broken.append(text[max(0, end - 12):end + 12])
    assert broken == []


def test_a_block_that_fits_a_page_is_not_split_across_two(doc: QTextDocument) -> None:
    layout = doc.documentLayout()
    split = [b.text()[:40] for b in _top_level(doc)
             if (r := layout.blockBoundingRect(b)).height() < PAGE[1] and _page(r.top()) != _page(r.bottom() - 1)]
    assert split == []


def test_a_heading_stays_with_what_follows_it(doc: QTextDocument) -> None:
    layout = doc.documentLayout()
    parted = []
    for block in _top_level(doc):
        if block.blockFormat().headingLevel() == 0 or not block.next().isValid():
            continue
        after = block.next()
        table = QTextCursor(after).currentTable()
        next_top = layout.frameBoundingRect(table).top() if table is not None else layout.blockBoundingRect(after).top()
        if _page(layout.blockBoundingRect(block).top()) != _page(next_top):
            parted.append(block.text())
    assert parted == []


def test_no_page_but_the_last_is_left_nearly_empty(doc: QTextDocument) -> None:
    layout = doc.documentLayout()
    bottoms: dict[int, float] = {}
    for block in _blocks(doc):
        r = layout.blockBoundingRect(block)
        table = QTextCursor(block).currentTable()
        if table is not None:
            r = layout.frameBoundingRect(table)
        page = _page(r.top())
        bottoms[page] = max(bottoms.get(page, 0.0), min(r.bottom(), (page + 1) * PAGE[1]) - page * PAGE[1])
    pages = doc.pageCount()
    assert pages >= 3
    low = {p: round(bottoms.get(p, 0.0) / PAGE[1], 2) for p in range(pages - 1) if bottoms.get(p, 0.0) < 0.5 * PAGE[1]}
    assert low == {}
