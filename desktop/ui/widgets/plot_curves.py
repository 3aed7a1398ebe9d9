"""How one series of a ``TimePlot`` is drawn: its pen by line style, its live curve and its history curve.

``LiveCurve`` is the live part, a lean ``pg.GraphicsObject`` set every frame: it draws what a ``pg.PlotDataItem``
would (NaN gaps, "peak" downsampling, no antialias) without its per-``setData`` bookkeeping, keeps a bounding rect
with room to spare, and when the window only slid along repaints just the strips at its two ends. The history part
is a ``pg.PlotDataItem`` (``plot_data_curve``), made by ``Series`` when the first history points come.
``TimePlot`` (``charts.py``) holds one ``Series`` per key.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np
import pyqtgraph as pg
from pyqtgraph.graphicsItems.PlotCurveItem import arrayToLineSegments
from PySide6.QtCore import Qt

from desktop.ui.widgets.chart_math import FloatArray, finite_bounds, peak_downsample, slid_ends

#: The Qt pen style of each series line style (``charts.SERIES_STYLES``).
PEN_STYLES = {"solid": Qt.PenStyle.SolidLine, "dash": Qt.PenStyle.DashLine, "dot": Qt.PenStyle.DotLine,
              "dashdot": Qt.PenStyle.DashDotLine}

#: How far right of its data (pixels) a live curve's bounding rect reaches, and how far above and below.
RECT_LEAD_PX: Final = 100.0
RECT_MARGIN_PX: Final = 20.0
#: Pixels added each side of a repainted strip beyond the pen (a segment's end is rounded to a pixel).
STRIP_SLACK_PX: Final = 2.0


def series_pen(colour: str, width: float, style: str) -> pg.QtGui.QPen:
    """A series' pen: its colour, width and line style (``PEN_STYLES``)."""
    pen = pg.mkPen(colour, width=width, style=PEN_STYLES[style])
    if width > 1:  # wide lane marks: a cause held for under a pixel still shows as a square
        pen.setCapStyle(Qt.PenCapStyle.SquareCap)
    return pen


def plot_data_curve(colour: str, width: float, style: str = "solid") -> pg.PlotDataItem:
    """A ``pg.PlotDataItem`` drawn as a ``LiveCurve`` is (NaN gaps, no antialias, "peak" downsampling): the history
    part's curve."""
    curve = pg.PlotDataItem(pen=series_pen(colour, width, style), connect="finite", antialias=False)
    curve.setDownsampling(ds=1, auto=False, method="peak")
    return curve


class LiveCurve(pg.GraphicsObject):  # type: ignore[misc]
    """The live part of one series: a lean stand-in for ``pg.PlotDataItem``, set every frame.

    It draws what a PlotDataItem with ``connect="finite"``, antialias off and "peak" downsampling
    draws (a NaN is a gap; a wide solid pen as separate line segments, as PlotCurveItem does), without
    its per-``setData`` bookkeeping (display datasets, scatter item, option passes): the path is made
    once per new data, at the first paint after it, and the bounds come from the arrays' finite min/max.
    ``opts`` keeps the keys that are read: ``pen``, ``connect``, ``downsample`` (the "peak" factor
    applied by the next ``setData``) and ``downsampleMethod``; ``getData()`` gives the drawn points.
    """

    def __init__(self, pen: pg.QtGui.QPen) -> None:
        super().__init__()
        self.opts: dict[str, object] = {"pen": pen, "connect": "finite", "antialias": False, "downsample": 1,
                                        "downsampleMethod": "peak"}
        # As PlotCurveItem's "auto" segmented-line mode: drawLines is the faster way to stroke a wide solid pen.
        self._segmented = (pen.widthF() > 1.0 and pen.style() == Qt.PenStyle.SolidLine and pen.isSolid()
                           and pen.color().alphaF() == 1.0)
        self._pad_px = pen.widthF() * 0.7072 if pen.isCosmetic() else 0.0
        empty = np.empty(0, dtype=np.float64)
        self._x: FloatArray = empty
        self._y: FloatArray = empty
        self._bounds = ((math.nan, math.nan), (math.nan, math.nan))
        self._rect: pg.QtCore.QRectF | None = None
        #: The data extent (x0, x1, y0, y1) ``_rect`` was made for: data inside it keeps the rect.
        self._covered: tuple[float, float, float, float] | None = None
        self._path: pg.QtGui.QPainterPath | None = None
        self._lines: Any = None

    def setData(self, time_s: FloatArray, values: FloatArray) -> None:
        factor = int(self.opts["downsample"])  # type: ignore[call-overload]
        if factor > 1:
            time_s, values = peak_downsample(time_s, values, factor)
        x, y = self._x, self._y
        if x.size == time_s.size and np.array_equal(x, time_s) and np.array_equal(y, values, equal_nan=True):
            return  # the same picture: no new path, no repaint
        changed = slid_ends(x, y, time_s, values)
        old_y0, old_y1 = self._bounds[1]
        self._x, self._y = time_s, values
        self._bounds = (finite_bounds(time_s), finite_bounds(values))
        self._path = None
        self._lines = None
        if not self._rect_covers(self._bounds):
            self.prepareGeometryChange()  # repaints where it was; the new rect is made when next asked
            self._rect = None
            self._covered = None
            self.update()
        elif changed is None:
            self.update()
        else:
            # The window slid along: only its two ends look different. Repainting just those strips (each
            # segment that came or went, with the pen's width) is what keeps an idle window cheap.
            y0, y1 = self._bounds[1]
            y0, y1 = min(y0, old_y0), max(y1, old_y1)  # a segment that went may have reached past what stays
            for lo, hi in changed:
                self.update(self._strip(lo, hi, y0, y1))
        self.informViewBoundsChanged()

    def _rect_covers(self, bounds: tuple[tuple[float, float], tuple[float, float]]) -> bool:
        covered = self._covered
        if covered is None or self._rect is None:
            return False
        (x0, x1), (y0, y1) = bounds
        return covered[0] <= x0 and x1 <= covered[1] and covered[2] <= y0 and y1 <= covered[3]

    def _strip(self, lo: float, hi: float, y0: float, y1: float) -> pg.QtCore.QRectF:
        """[lo, hi] x [y0, y1] (the data's height before and after), widened by the pen and ``STRIP_SLACK_PX`` each
        way (not the bounding rect's spare room: that reaches past the view box, into the axes and plots beside)."""
        vx, vy = self.pixelVectors()
        extra = self._pad_px + STRIP_SLACK_PX
        pad_x = extra * (0.0 if vx is None else vx.length())
        pad_y = extra * (0.0 if vy is None else vy.length())
        return pg.QtCore.QRectF(lo - pad_x, y0 - pad_y, hi - lo + 2 * pad_x, y1 - y0 + 2 * pad_y)

    def getData(self) -> tuple[FloatArray, FloatArray]:
        return self._x, self._y

    def dataBounds(self, ax: int, frac: float = 1.0,
                   orthoRange: tuple[float, float] | None = None) -> tuple[float, float] | tuple[None, None]:
        if frac >= 1.0 and orthoRange is None:
            return self._bounds[ax]
        data, other = (self._x, self._y) if ax == 0 else (self._y, self._x)
        if orthoRange is not None:
            data = data[(other >= orthoRange[0]) & (other <= orthoRange[1])]
        data = data[np.isfinite(data)]
        if data.size == 0:
            return None, None
        if frac >= 1.0:
            return float(data.min()), float(data.max())
        low, high = np.percentile(data, [50 * (1 - frac), 50 * (1 + frac)])
        return float(low), float(high)

    def pixelPadding(self) -> float:
        return self._pad_px

    def boundingRect(self) -> pg.QtCore.QRectF:
        """The data's bounds and the pen, with room to spare (``RECT_LEAD_PX`` right, ``RECT_MARGIN_PX`` above
        and below): the window's new samples stay inside it for a while, so it need not change (and have the
        curve repainted whole) with each."""
        if self._rect is None:
            (x0, x1), (y0, y1) = self._bounds
            if not (math.isfinite(x0) and math.isfinite(y0)):
                return pg.QtCore.QRectF()
            vx, vy = self.pixelVectors()
            x_px = 0.0 if vx is None else vx.length()
            y_px = 0.0 if vy is None else vy.length()
            x1 += RECT_LEAD_PX * x_px
            y0, y1 = y0 - RECT_MARGIN_PX * y_px, y1 + RECT_MARGIN_PX * y_px
            px, py = x_px * self._pad_px, y_px * self._pad_px
            self._rect = pg.QtCore.QRectF(x0 - px, y0 - py, 2 * px + x1 - x0, 2 * py + y1 - y0)
            self._covered = (x0, x1, y0, y1)
        return self._rect

    def viewTransformChanged(self) -> None:
        self._rect = None  # the pixel padding is in data units: it changes with the view
        self._covered = None
        self.prepareGeometryChange()

    def paint(self, painter: pg.QtGui.QPainter, *_: object) -> None:
        if self._x.size == 0:
            return
        painter.setRenderHint(painter.RenderHint.Antialiasing, False)
        painter.setPen(self.opts["pen"])
        if self._segmented:
            if self._lines is None:
                self._lines = arrayToLineSegments(self._x, self._y, connect="finite", finiteCheck=True)
            painter.drawLines(*self._lines.drawargs())
        else:
            if self._path is None:
                self._path = pg.arrayToQPath(self._x, self._y, connect="finite", finiteCheck=True)
            painter.drawPath(self._path)


class Series:
    """One series of a ``TimePlot``: its label and look, its live curve, and its history curve once it has one."""

    __slots__ = ("colour", "downsample", "history", "history_fill", "label", "live", "style", "width")

    def __init__(self, label: str, colour: str, live: LiveCurve, downsample: bool = True, *,
                 style: str = "solid", width: float = 1.0, history_fill: float | None = None) -> None:
        self.downsample = downsample
        self.label = label
        self.colour = colour
        self.style = style
        self.width = width
        self.history_fill = history_fill
        self.live = live
        #: The curve of the part read from history: made when the first history points come (most
        #: plots never get any), so a window's cold start builds half the curves.
        self.history: pg.PlotDataItem | None = None

    def history_curve(self) -> pg.PlotDataItem:
        """A new curve for the history part: the live one's look (or a filled area), drawn just under it."""
        fill = self.history_fill
        curve = plot_data_curve(self.colour, 1.0 if fill is not None else self.width, self.style)
        if fill is not None:
            curve.setFillLevel(fill)
            curve.setBrush(pg.mkBrush(self.colour))
        # Under its own live curve, as when both were added in order (history first): made later, it
        # would otherwise be drawn over it.
        curve.setZValue(self.live.zValue() - 0.5)
        return curve
