"""The weekly report drawn and rendered: its charts as PNG, and the report as HTML and PDF (Qt's PDF writer).

The data comes from ``desktop.reporting`` (no Qt there: the summary; the week is ``desktop.report_week``'s,
JSON, CSV and the file written whole ``desktop.report_output``'s); the charts are pyqtgraph exported
offscreen (``report_charts``), so no display is needed, and the HTML (``report_html``) is what both
the browser and the PDF show.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from advisor.summary import WEEKDAYS
from desktop.report_output import write_beside
from desktop.reporting import ReportData, chart_key
from desktop.ui.report.report_html import data_uri, render_html

FloatArray = npt.NDArray[np.float64]

if TYPE_CHECKING:
    from PySide6.QtGui import QTextBlock, QTextDocument

    from desktop.ui.report.report_charts import ChartStyle


def render_charts(data: ReportData, style: ChartStyle | None = None) -> dict[str, bytes]:
    """Every chart of the report as PNG bytes (needs a QApplication, not a display); ``style``: the
    window's theme for the History page (``report_charts.chart_style``), paper by default."""
    from desktop.ui.report import report_charts as rc

    rc.ensure_app()
    style = style or rc.PAPER
    pngs: dict[str, bytes] = {}
    metas = {g.meta.uuid: g.meta for g in data.advice.frame.gpus}
    for n, week in enumerate(data.summary.gpus):
        s = data.series[week.uuid]
        meta = metas[week.uuid]
        name = data.labels.get(week.uuid, f"GPU {week.index}")
        pngs[chart_key("util", n)] = rc.time_chart_png(
            s["time_s"], [("utilization", s["utilization_gpu_pct"])], title=f"{name} utilization", y_label="%",
            y_range=(0, 100), style=style)
        drawn, limit = _with_limit(s, ("temperature_c", "temperature"), ("temp_slowdown_c", "slowdown"),
                                   meta.temp_slowdown_c)
        pngs[chart_key("temp", n)] = rc.time_chart_png(s["time_s"], drawn, title=f"{name} temperature", y_label="°C",
                                                       limit=limit, style=style)
        drawn, limit = _with_limit(s, ("power_w", "power"), ("power_limit_w", "power limit"), meta.power_limit_w)
        pngs[chart_key("power", n)] = rc.time_chart_png(s["time_s"], drawn, title=f"{name} power", y_label="W",
                                                        limit=limit, style=style)
        pngs[chart_key("heat", n)] = rc.heatmap_png(week.heatmap_pct, title=f"{name}: mean utilization, local time",
                                                  style=style)
        pngs[chart_key("daily", n)] = rc.bar_chart_png(WEEKDAYS, week.daily_busy_hours,
                                                       title=f"{name}: busy hours per day", y_label="h", style=style)
    if chart_key("who", 0) in data.chart_captions:  # the week's energy per user, the top 8 and the rest
        lines = data.who[0].lines
        labels = [line.key for line in lines[:8]] + (["others"] if len(lines) > 8 else [])
        values = [line.energy_wh for line in lines[:8]]
        values += [sum(x.energy_wh for x in lines[8:])] if len(lines) > 8 else []
        pngs[chart_key("who", 0)] = rc.bar_chart_png(labels, values, title="Who used the GPU: energy per user",
                                                     y_label="Wh", style=style)
    return pngs


def _with_limit(s: dict[str, FloatArray], line: tuple[str, str], limit: tuple[str, str], last_read: float | None
                ) -> tuple[list[tuple[str, FloatArray]], tuple[float, str] | None]:
    """A metric's line and its limit in force (``reporting.hourly``): a dashed line where one limit held all week,
    its own step line ("power limit in force") where it moved; the GPU's last read where none is stored."""
    (metric, label), (limit_key, limit_label) = line, limit
    limits = s.get(limit_key, np.full(len(s["time_s"]), np.nan))
    held = sorted({float(v) for v in limits if np.isfinite(v)})
    if len(held) > 1:
        return [(label, s[metric]), (f"{limit_label} in force", limits)], None
    value = held[0] if held else last_read
    return [(label, s[metric])], ((value, limit_label) if value else None)


def to_html(data: ReportData, pngs: dict[str, bytes]) -> str:
    """The report as one self-contained HTML file (the charts inline as data URIs)."""
    return render_html(data, lambda key: data_uri(pngs[key]))


def write_pdf(data: ReportData, pngs: dict[str, bytes], path: Path) -> int:
    """Render the HTML through QTextDocument into a PDF (A4) written beside ``path`` and renamed over it
    (``write_beside``: never through a symlink, an old file kept when it fails); returns the page count.
    OSError when Qt's PDF writer gave no file (a full disk, a folder it cannot write)."""
    pages = 0

    def write(temporary: Path) -> None:
        nonlocal pages
        pages = _render_pdf(data, pngs, temporary)
        if temporary.stat().st_size == 0:
            raise OSError(errno.EIO, "Qt's PDF writer gave no file (a full disk, or the folder is not writable?)")

    write_beside(path, write)
    return pages


def _render_pdf(data: ReportData, pngs: dict[str, bytes], path: Path) -> int:
    from PySide6.QtCore import QMarginsF
    from PySide6.QtGui import QPageLayout, QPageSize, QPdfWriter

    writer = QPdfWriter(str(path))
    writer.setPageSize(QPageSize(QPageSize.PageSizeId.A4))
    writer.setPageMargins(QMarginsF(15, 15, 15, 15), QPageLayout.Unit.Millimeter)
    writer.setResolution(96)
    writer.setTitle(f"Rigscope weekly report {data.week_label}")
    writer.setCreator("Rigscope")
    rect = writer.pageLayout().paintRectPixels(writer.resolution())
    doc = report_document(data, pngs, rect.width(), rect.height())
    doc.print_(writer)
    return int(doc.pageCount())


def report_document(data: ReportData, pngs: dict[str, bytes], page_width: float, page_height: float) -> QTextDocument:
    """The report laid out on pages of this size (pixels at the writer's resolution), as the PDF prints it."""
    from PySide6.QtCore import QSizeF, QUrl
    from PySide6.QtGui import QImage, QTextDocument, QTextOption

    doc = QTextDocument()
    for key, png in pngs.items():
        doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(f"chart-{key}.png"), QImage.fromData(png))
    # Break lines between words only: Qt's default also breaks inside a word that does not fit its cell
    # ("instances.vant|age.sh"); a column is now as wide as its longest word.
    option = QTextOption(doc.defaultTextOption())
    option.setWrapMode(QTextOption.WrapMode.WordWrap)
    doc.setDefaultTextOption(option)
    doc.setHtml(render_html(data, lambda key: f"chart-{key}.png"))
    doc.setPageSize(QSizeF(page_width, page_height))
    keep_together(doc, page_height)
    return doc


def keep_together(doc: QTextDocument, page_height: float) -> None:
    """Qt's pagination has no keep-together: a paragraph that fits one page but would run across a page
    break (a chart's caption and its image) starts the next page, and so does a heading whose next
    paragraph or table would start on the next page. One pass, top to bottom (each break moves what follows)."""
    from PySide6.QtGui import QTextCursor, QTextFormat

    layout = doc.documentLayout()

    def page(y: float) -> int:
        return int(y // page_height)

    def top_of(block: QTextBlock) -> float:
        table = QTextCursor(block).currentTable()
        rect = layout.frameBoundingRect(table) if table is not None else layout.blockBoundingRect(block)
        return float(rect.top())

    def break_before(block: QTextBlock) -> None:
        cursor = QTextCursor(block)
        fmt = block.blockFormat()
        fmt.setPageBreakPolicy(QTextFormat.PageBreakFlag.PageBreak_AlwaysBefore)
        cursor.setBlockFormat(fmt)

    def parted(block: QTextBlock) -> bool:
        """Split by a page break (though it fits one page), or a heading whose follower starts the next page."""
        rect = layout.blockBoundingRect(block)
        if rect.top() % page_height <= 1.0:  # already at the top of a page
            return False
        if rect.height() < page_height and page(rect.top()) != page(rect.bottom() - 1.0):
            return True
        following = block.next()
        return (block.blockFormat().headingLevel() > 0 and following.isValid()
                and page(rect.top()) != page(top_of(following)))

    block = doc.begin()
    while block.isValid():
        # A table's rows may run onto the next page (its header row repeats there).
        if QTextCursor(block).currentTable() is None and parted(block):
            break_before(block)
        block = block.next()
