"""Static charts rendered offscreen to PNG with pyqtgraph's exporter, for reports and the advisor pages.

Small and self-contained on purpose (reports must work without the window); the live
charts in ``desktop/ui/widgets/charts.py`` could later share the styling. Every function returns
PNG bytes and needs a Qt application object (``ensure_app``), not a display. Each takes a
``ChartStyle``: ``PAPER`` (the default, for exported reports) or ``chart_style(theme)`` for
charts shown in the window.
"""

from __future__ import annotations

import html
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyqtgraph as pg
import pyqtgraph.exporters
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from advisor.safetext import neutralise_bidi
from advisor.summary import WEEKDAYS
from desktop.ui.theme import Theme
from desktop.ui.widgets.plot_column import TimeAxis

FloatArray = npt.NDArray[np.float64]

PALETTE = ("#2f6fdf", "#e0672b", "#2a9d5b", "#b0359b", "#c9a227", "#5d6d7e")
BACKGROUND = "#ffffff"
FOREGROUND = "#222222"


@dataclass(frozen=True)
class ChartStyle:
    """A chart's colours: background, axes and text, series, the limit line and the "you" marker."""

    background: str
    foreground: str
    palette: tuple[str, ...]
    limit: str
    marker: str


#: Dark on white, for reports that are exported and printed.
PAPER = ChartStyle(BACKGROUND, FOREGROUND, PALETTE, limit="#c0392b", marker="#7f8c8d")


def chart_style(theme: Theme) -> ChartStyle:
    """Charts in the window's theme: ``PAPER`` when light, the theme's colours when dark."""
    if not theme.dark:
        return PAPER
    return ChartStyle(theme.plot_background, theme.text, theme.series, limit=theme.bad, marker=theme.muted)


def ensure_app() -> QApplication:
    """The running QApplication, or a new one (offscreen when there is no display, e.g. in a terminal)."""
    app = QApplication.instance()
    if isinstance(app, QApplication):
        return app
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    return QApplication([])


def png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")  # type: ignore[call-overload]  # the stubs say bytes; the binding wants str
    buffer.close()
    return bytes(data.data())


def _layout(width_px: int, height_px: int, style: ChartStyle) -> pg.GraphicsLayoutWidget:
    ensure_app()
    widget = pg.GraphicsLayoutWidget()
    widget.setBackground(style.background)
    widget.resize(width_px, height_px)
    return widget


def _style(plot: pg.PlotItem, title: str, y_label: str, style: ChartStyle) -> None:
    # pyqtgraph renders a title as HTML, and titles name GPUs (an imported log names its own)
    plot.setTitle(neutralise_bidi(html.escape(title)), color=style.foreground, size="10pt")
    for name in ("left", "bottom"):
        axis = plot.getAxis(name)
        axis.setPen(pg.mkPen(style.foreground))
        axis.setTextPen(pg.mkPen(style.foreground))
    plot.setLabel("left", y_label, color=style.foreground)
    # The unit is the label's: pyqtgraph's automatic SI scaling wrote "h (x0.001)" for minutes of busy time.
    plot.getAxis("left").enableAutoSIPrefix(False)
    plot.showGrid(x=True, y=True, alpha=0.15)


def readable_scale(values: Sequence[float], unit: str) -> tuple[list[float], str]:
    """Values in a unit that shows them: hours under one as minutes, 1,000 Wh and more as kWh."""
    finite = [v for v in values if math.isfinite(v)]
    top = max(finite, default=0.0)
    if unit == "h" and 0 < top < 1.0:
        return [v * 60.0 for v in values], "min"
    if unit == "Wh" and top >= 1000.0:
        return [v / 1000.0 for v in values], "kWh"
    return list(values), unit


def _export(widget: pg.GraphicsLayoutWidget, item: pg.GraphicsItem, width_px: int) -> bytes:
    # A hidden view never lays itself out: size the layout by hand so the exporter sees it.
    size = widget.size()
    widget.ci.setGeometry(QRectF(0, 0, size.width(), size.height()))
    exporter = pyqtgraph.exporters.ImageExporter(item)
    exporter.parameters()["width"] = width_px
    exporter.parameters()["antialias"] = True
    image = exporter.export(toBytes=True)
    widget.close()
    widget.deleteLater()
    assert isinstance(image, QImage)
    return png_bytes(image)


def time_chart_png(time_s: FloatArray, series: Sequence[tuple[str, FloatArray]], *, title: str, y_label: str,
                   y_range: tuple[float, float] | None = None, limit: tuple[float, str] | None = None,
                   width_px: int = 900, height_px: int = 260, style: ChartStyle = PAPER) -> bytes:
    """Lines over wall time (local), NaN as gaps; an optional dashed limit line (power limit, slowdown)."""
    widget = _layout(width_px, height_px, style)
    plot = widget.addPlot(axisItems={"bottom": TimeAxis()})  # weekdays on a week: "Mon 09"
    _style(plot, title, y_label, style)
    if len(series) > 1:
        plot.addLegend(offset=(10, 5), labelTextColor=style.foreground)
    for i, (label, values) in enumerate(series):
        plot.plot(time_s, values, pen=pg.mkPen(style.palette[i % len(style.palette)], width=2), name=label,
                  connect="finite")
    if limit is not None and math.isfinite(limit[0]):
        pen = pg.mkPen(style.limit, width=1, style=Qt.PenStyle.DashLine)
        line = pg.InfiniteLine(pos=limit[0], angle=0, pen=pen, label=limit[1],
                               labelOpts={"color": style.limit, "position": 0.05})
        plot.addItem(line)
    if y_range is not None:
        plot.setYRange(*y_range, padding=0.02)
    if time_s.size:
        plot.setXRange(float(time_s[0]), float(time_s[-1]), padding=0.0)
    return _export(widget, plot, width_px)


def bar_chart_png(labels: Sequence[str], values: Sequence[float], *, title: str, y_label: str,
                  width_px: int = 600, height_px: int = 240, style: ChartStyle = PAPER) -> bytes:
    widget = _layout(width_px, height_px, style)
    plot = widget.addPlot()
    values, y_label = readable_scale(values, y_label)
    _style(plot, title, y_label, style)
    x = np.arange(len(values), dtype=np.float64)
    plot.addItem(pg.BarGraphItem(x=x, height=np.nan_to_num(np.asarray(values, dtype=np.float64)), width=0.7,
                                 brush=style.palette[0], pen=pg.mkPen(style.palette[0])))
    plot.getAxis("bottom").setTicks([list(enumerate(labels))])
    plot.setXRange(-0.6, len(values) - 0.4, padding=0.0)
    return _export(widget, plot, width_px)


def xy_chart_png(x: Sequence[float], series: Sequence[tuple[str, Sequence[float]]], *, title: str, x_label: str,
                 y_label: str, marker_x: float | None = None, width_px: int = 700, height_px: int = 280,
                 style: ChartStyle = PAPER) -> bytes:
    """Lines over a numeric x (e.g. the break-even chart: busy hours per month -> monthly cost)."""
    widget = _layout(width_px, height_px, style)
    plot = widget.addPlot()
    _style(plot, title, y_label, style)
    plot.setLabel("bottom", x_label, color=style.foreground)
    plot.addLegend(offset=(10, 5), labelTextColor=style.foreground)
    for i, (label, values) in enumerate(series):
        plot.plot(list(x), list(values), pen=pg.mkPen(style.palette[i % len(style.palette)], width=2), name=label)
    if marker_x is not None and math.isfinite(marker_x):
        pen = pg.mkPen(style.marker, style=Qt.PenStyle.DashLine)
        plot.addItem(pg.InfiniteLine(pos=marker_x, angle=90, pen=pen, label="you",
                                     labelOpts={"color": style.foreground, "position": 0.9, "fill": style.background}))
    return _export(widget, plot, width_px)


def heatmap_png(matrix_pct: Sequence[Sequence[float]], *, title: str, width_px: int = 900,
                height_px: int = 260, style: ChartStyle = PAPER) -> bytes:
    """7 x 24 utilization heatmap (Monday at the top), 0-100 %, blank where nothing was recorded."""
    widget = _layout(width_px, height_px, style)
    plot = widget.addPlot()
    _style(plot, title, "", style)
    data = np.asarray(matrix_pct, dtype=np.float64)  # [weekday][hour]
    cmap = pg.colormap.get("viridis")
    lut = cmap.getLookupTable(0.0, 1.0, 256, alpha=True)
    image = pg.ImageItem(data.T, levels=(0.0, 100.0), lut=lut)
    image.setRect(0, 0, 24, 7)
    plot.addItem(image)
    plot.invertY(True)
    plot.getAxis("left").setTicks([[(i + 0.5, d) for i, d in enumerate(WEEKDAYS)]])
    plot.getAxis("bottom").setTicks([[(h + 0.5, f"{h:02d}") for h in range(0, 24, 2)]])
    plot.setXRange(0, 24, padding=0.0)
    plot.setYRange(0, 7, padding=0.0)
    plot.setLabel("bottom", "hour of day (local time); colour: mean GPU utilization 0-100 %", color=style.foreground)
    return _export(widget, plot, width_px)
