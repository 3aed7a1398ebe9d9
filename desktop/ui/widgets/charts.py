"""Reusable live time-series plots: pyqtgraph curves drawn from numpy views, with a hover readout.

The pieces (the dashboard, the stress page and the reports reuse them): ``RingBuffer``
(``desktop/ui/widgets/ring_buffer.py``) keeps the live numbers; ``PlotColumn``
(``desktop/ui/widgets/plot_column.py``) stacks plots over one time axis with one crosshair; each series is
drawn by the curves of ``desktop/ui/widgets/plot_curves.py`` (``LiveCurve``, ``Series``); the readout's words and
the arrays' arithmetic are in ``desktop/ui/widgets/chart_math.py`` (no Qt); and here:

``TimePlot`` -- one plot. ``add_series(key, label, colour=None, width=1, style=...)`` adds a
    persistent curve (created once, fed by ``setData``; the series of one plot differ in line
    style as well as hue: solid, dashed, dotted); ``set_data(key, time_s, values)`` feeds the
    live part and ``set_history(key, time_s, values)`` the part filled from the history
    database (same colour, its own curve, so neither array is copied into the other);
    ``set_limit(key, value, label)`` draws a dashed horizontal line (a power limit, a
    slowdown temperature) labelled at its right end ("slowdown 87 °C"), ``value=None`` hides it;
    ``set_y_range(low, high)`` fixes the y range (the device's own limits, never hard-coded
    maxima); ``set_min_span(span_abs, fraction)`` keeps an auto y range at least that tall, so
    sensor noise is not blown up to full height; ``set_categories(labels)`` turns the plot into a lane chart whose row i
    is labelled ``labels[i]``. The title and the hover readout sit in a band above the plot
    area (``BAND_PX``), never over the data; each series is named in the text colour after a
    swatch of its line. The readout names the date with the time when the window is longer
    than ``chart_math.DATED_WINDOW_S`` or crosses midnight.

Curves follow pyqtgraph's live-plot habits: ``connect="finite"`` so NaN leaves a gap (a
missing metric, a lost GPU), ``"peak"`` downsampling (spikes survive it) to about a point
pair per pixel, antialias off, x as float64 epoch seconds. Pass only the points of the
visible window (``RingBuffer.view(name, start_s)``): the plots do not clip to the view
themselves, because pyqtgraph's clipToView/autoDownsample re-process every curve on every
x-range move, which doubled the cost of a live frame.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QFont

from desktop.ui.theme import Theme
from desktop.ui.widgets.chart_math import (
    finite_bounds,
    limit_text,
    min_span_range,
    nearest_index,
    readout_time,
    share_text,
)
from desktop.ui.widgets.plot_curves import LiveCurve, Series, series_pen
from desktop.ui.widgets.plot_item import TimeItem

FloatArray = npt.NDArray[np.float64]

LEFT_AXIS_WIDTH_PX = 84
#: The right margin that names the limit lines at their end, beside the plot area (never over the newest data).
RIGHT_AXIS_WIDTH_PX = 120
#: Limit labels closer than this are moved apart (a guard at 90 °C beside the slowdown at 87 °C).
LIMIT_LABEL_GAP_PX = 14.0
#: Height of the band above each plot area that holds the title and the hover readout.
BAND_PX = 18
#: Line styles by series order within one plot, so two series never differ by hue alone.
SERIES_STYLES = ("solid", "dash", "dot", "dashdot")
#: The readout's swatch of each line style (box-drawing glyphs, drawn in the series colour).
_SWATCHES = {"solid": "\u2501\u2501", "dash": "\u254d\u254d", "dot": "\u2505\u2505", "dashdot": "\u2509\u2509"}


class TimePlot:
    """One plot of a ``PlotColumn``: persistent curves, limit lines, a hover readout."""

    def __init__(self, item: TimeItem, title: str, unit: str, theme: Theme) -> None:
        self.item = item
        self.title = title
        self.unit = unit
        self.theme = theme
        self.categories: tuple[str, ...] = ()
        self._series: dict[str, Series] = {}
        self._data: dict[str, tuple[FloatArray, FloatArray]] = {}
        self._history: dict[str, tuple[FloatArray, FloatArray]] = {}
        self._limits: dict[str, tuple[pg.InfiniteLine, str]] = {}
        #: What the right margin says for each visible limit line.
        self._limit_texts: dict[str, str] = {}
        #: The least y span shown while the y range is automatic: absolute, and as a fraction of the top value.
        self.min_span = 0.0
        self.min_span_fraction = 0.0
        self._y_fixed = False
        self._y_widened = False
        item.setMouseEnabled(x=False, y=False)
        item.enableAutoRange(x=False, y=True)
        item.getAxis("left").setWidth(LEFT_AXIS_WIDTH_PX)
        # The y axes rarely change (fixed device ranges): repaint them from a cached pixmap.
        item.getAxis("left").setCacheMode(pg.QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache)
        for name in ("left", "bottom"):  # units are in the title; SI relabelling per range change costs
            item.getAxis(name).enableAutoSIPrefix(False)
        item.getAxis("top").unlinkFromView()  # never shown: unlinked, it skips a label re-layout per x move
        # The right axis carries only the limit lines' labels, as ticks at their values ("slowdown 87 °C").
        item.showAxis("right")
        right = item.getAxis("right")
        right.setWidth(RIGHT_AXIS_WIDTH_PX)
        right.setStyle(tickLength=0, autoExpandTextSpace=False, hideOverlappingLabels=False)
        right.setTicks([[], []])
        right.setCacheMode(pg.QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.crosshair = pg.InfiniteLine(angle=90, movable=False)
        self.crosshair.setVisible(False)
        self.crosshair.setZValue(50)
        item.addItem(self.crosshair, ignoreBounds=True)
        # The title row of the PlotItem's layout (its own title label stays hidden) is the band: the
        # readout is parented to the PlotItem above the view box, so it never covers a curve or a limit.
        item.layout.setRowFixedHeight(0, BAND_PX)
        self.readout = pg.TextItem(anchor=(0, 0))
        self.readout.setParentItem(item)
        self.readout.setPos(QPointF(LEFT_AXIS_WIDTH_PX, -3))
        self.readout.setZValue(60)
        # The readout changes only on hover: paint it from a cached pixmap, not from HTML each frame.
        self.readout.setCacheMode(pg.QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.apply_theme(theme)
        self.show_readout(None)

    # --- building -------------------------------------------------------------------
    def add_series(self, key: str, label: str, colour: str | None = None, width: float = 1.0,
                   downsample: bool = True, *, style: str | None = None, below: bool = False,
                   history_fill: float | None = None) -> None:
        """``downsample=False`` for sparse series (lane marks): a "peak" block holding a NaN is NaN,
        so downsampling would erase isolated points. ``style`` ("solid", "dash", "dot", "dashdot";
        by default the next of ``SERIES_STYLES``): "dash" for a derived series (an estimate);
        ``below`` draws it under the other series (still over the limit lines), so where it equals a
        measured one the measured line stays visible. ``history_fill``: the history curve is an area filled
        down to that y under a 1 px edge (a lane row drawn as each bucket's share), the live one keeps its pen."""
        colour = colour or self.theme.series[len(self._series) % len(self.theme.series)]
        style = style or SERIES_STYLES[len(self._series) % len(SERIES_STYLES)]
        live = LiveCurve(series_pen(colour, width, style))
        if below:
            live.setZValue(-1)
        self.item.addItem(live)
        self._series[key] = Series(label, colour, live, downsample, style=style, width=width,
                                    history_fill=history_fill)

    def relabel(self, title: str, labels: dict[str, str]) -> None:
        """A new title and series labels (an estimate that the GPU turned out to measure)."""
        self.title = title
        for key, label in labels.items():
            self._series[key].label = label
        self.show_readout(None)

    def set_limit(self, key: str, value: float | None, label: str) -> None:
        """A dashed line at ``value`` with ``label``, the value and the unit written at its right end."""
        line_label = self._limits.get(key)
        if line_label is None:
            line = pg.InfiniteLine(angle=0, movable=False, pen=self._limit_pen())
            line.setZValue(-5)  # under the curves: a reading at its limit stays visible
            self.item.addItem(line, ignoreBounds=True)
            self._limits[key] = (line, label)
        line = self._limits[key][0]
        self._limits[key] = (line, label)
        if value is None or not math.isfinite(value):
            line.setVisible(False)
        else:
            line.setPos(value)
            line.setVisible(True)
        self._limit_texts = {k: limit_text(text, float(line.value()), self.unit)
                             for k, (line, text) in self._limits.items() if line.isVisible()}
        if len(self._limits) == 1 and line_label is None:  # the first line: follow the y range from now on
            self.item.vb.sigYRangeChanged.connect(self._place_limit_labels)
            self.item.vb.sigResized.connect(self._place_limit_labels)
        self._place_limit_labels()

    def _place_limit_labels(self, *_: object) -> None:
        """Each limit's label beside its line in the right margin, top down, moved apart where two would
        overlap and kept inside the plot's height."""
        limits = sorted(((float(self._limits[k][0].value()), text) for k, text in self._limit_texts.items()),
                        reverse=True)
        (_x0, _x1), (y0, y1) = self.item.viewRange()
        height = float(self.item.vb.height())
        placed: list[tuple[float, str]] = []
        if height > 0 and y1 > y0:
            gap = LIMIT_LABEL_GAP_PX * (y1 - y0) / height
            for value, text in limits:
                if not y0 <= value <= y1:  # the line is out of view (an automatic range below the max clock)
                    continue
                y = min(value, y1 - gap / 2) if not placed else min(value, placed[-1][0] - gap)
                placed.append((y, text))
        else:
            placed = limits
        self.item.getAxis("right").setTicks([placed, []])

    def limit_label(self, key: str) -> str | None:
        """The text at the end of limit line ``key`` (None while it is hidden)."""
        return self._limit_texts.get(key)

    def limit_label_positions(self) -> list[tuple[float, str]]:
        """Where the right margin writes each limit's label (y in data units) and what."""
        levels = self.item.getAxis("right")._tickLevels
        return list(levels[0]) if levels else []

    def set_y_range(self, low: float, high: float) -> None:
        self._y_fixed = True
        self.item.setYRange(low, high, padding=0.02)
        self.item.enableAutoRange(y=False)

    def set_min_span(self, span: float, fraction: float = 0.0) -> None:
        """Keep the automatic y range at least ``max(span, fraction * |top value|)`` tall (e.g. 10 °C for a
        temperature, a fifth of the throughput): a flat line with noise stays a flat line."""
        self.min_span = span
        self.min_span_fraction = fraction
        self._fit_y()

    def _fit_y(self) -> None:
        """Widen the automatic y range to the minimum span about the data; let pyqtgraph fit it when taller."""
        if self._y_fixed or (self.min_span <= 0 and self.min_span_fraction <= 0):
            return
        lows, highs = [], []
        for store in (self._data, self._history):
            for _times, values in store.values():
                low, high = finite_bounds(values)  # the bounds the live curve reports to its view box
                if not math.isnan(low):
                    lows.append(low)
                    highs.append(high)
        if not lows:
            return
        low, high = min(lows), max(highs)
        span = max(self.min_span, self.min_span_fraction * max(abs(low), abs(high)))
        if high - low >= span:
            if self._y_widened:
                self._y_widened = False
                self.item.enableAutoRange(y=True)
            return
        self._y_widened = True
        self.item.setYRange(*min_span_range(low, high, span), padding=0.02)

    def y_range(self) -> tuple[float, float]:
        """The y range shown now."""
        (_x0, _x1), (y0, y1) = self.item.viewRange()
        return float(y0), float(y1)

    def set_categories(self, labels: Sequence[str]) -> None:
        self.categories = tuple(labels)
        axis = self.item.getAxis("left")
        axis.setTicks([[(float(i), text) for i, text in enumerate(self.categories)], []])
        self.set_y_range(-0.6, len(self.categories) - 0.4)

    # --- feeding --------------------------------------------------------------------
    def set_data(self, key: str, time_s: FloatArray, values: FloatArray,
                 drawn: tuple[FloatArray, FloatArray] | None = None) -> None:
        """``drawn``: fewer points that draw the same picture (lane runs); hover still reads ``values``."""
        self._data[key] = (time_s, values)
        self._feed(self._series[key], self._series[key].live, *(drawn or (time_s, values)))
        self._fit_y()

    def set_history(self, key: str, time_s: FloatArray, values: FloatArray,
                    drawn: tuple[FloatArray, FloatArray] | None = None) -> None:
        self._history[key] = (time_s, values)
        series = self._series[key]
        if series.history is None:
            if time_s.size == 0:
                self._fit_y()
                return  # no history yet, and none to draw: no curve
            series.history = series.history_curve()
            self.item.addItem(series.history)
        self._feed(series, series.history, *(drawn or (time_s, values)))
        self._fit_y()

    def _feed(self, series: Series, curve: pg.PlotDataItem | LiveCurve, time_s: FloatArray,
              values: FloatArray) -> None:
        """setData with a "peak" downsampling factor of about one point pair per pixel."""
        width_px = max(200.0, self.item.vb.width())
        factor = max(1, int(time_s.size / width_px)) if series.downsample else 1
        if curve.opts["downsample"] != factor:
            curve.opts["downsample"] = factor  # applied by the setData below (no extra pass)
        if isinstance(curve, LiveCurve):
            curve.setData(time_s, values)
        else:
            curve.setData(time_s, values, connect="finite")

    def series_keys(self) -> list[str]:
        return list(self._series)

    def data(self, key: str) -> tuple[FloatArray, FloatArray]:
        """The live arrays last given to ``set_data`` (empty before the first)."""
        empty = np.empty(0, dtype=np.float64)
        return self._data.get(key, (empty, empty))

    def history(self, key: str) -> tuple[FloatArray, FloatArray]:
        empty = np.empty(0, dtype=np.float64)
        return self._history.get(key, (empty, empty))

    # --- hover ----------------------------------------------------------------------
    def value_at(self, key: str, time_s: float) -> float | None:
        for times, values in (self.data(key), self.history(key)):
            i = nearest_index(times, time_s)
            if i is not None and math.isfinite(values[i]):
                return float(values[i])
        return None

    def show_readout(self, time_s: float | None) -> None:
        """The title with units and, with several series, a legend; while hovering, the values at ``time_s`` and
        the clock time instead of the legend."""
        muted, text = self.theme.muted, self.theme.text
        unit = f" ({self.unit})" if self.unit else ""
        parts = [f"<span style='color:{text}'><b>{self.title}</b></span><span style='color:{muted}'>{unit}</span>"]
        if time_s is not None and math.isfinite(time_s):
            if self.categories:
                # Lane values are each cause's share of the time (1.0 for a live sample where it held).
                shares = {k: self.value_at(k, time_s) for k in self._series}
                active = [share_text(self._series[k].label, v) for k, v in shares.items() if v is not None]
                parts.append(f"<span style='color:{text}'>{', '.join(active) or 'none'}</span>")
            else:
                for key, series in self._series.items():
                    value = self.value_at(key, time_s)
                    shown = "n/a" if value is None else f"{value:,.0f} {self.unit}".strip()
                    # The series colour on the swatch only: light-theme series colours are too pale for text.
                    parts.append(f"<span style='color:{series.colour}'>{_SWATCHES[series.style]}</span>"
                                 f"&nbsp;<span style='color:{text}'>{series.label} {shown}</span>")
            (x0, x1), _ = self.item.viewRange()
            parts.append(f"<span style='color:{muted}'>{readout_time(time_s, x0, x1)}</span>")
        elif len(self._series) > 1 and not self.categories:
            # Not hovering: a legend, so every line is named where it is drawn (the dotted memory line was not).
            parts.extend(f"<span style='color:{series.colour}'>{_SWATCHES[series.style]}</span>"
                         f"&nbsp;<span style='color:{muted}'>{series.label}</span>"
                         for series in self._series.values())
        self.readout.setHtml("&nbsp;&nbsp;".join(parts))

    def legend(self) -> list[tuple[str, str, str]]:
        """What the title band names when not hovering: (label, colour, line style) of each series, in order."""
        if len(self._series) < 2 or self.categories:
            return []
        return [(series.label, series.colour, series.style) for series in self._series.values()]

    def set_crosshair(self, time_s: float | None) -> None:
        if time_s is None:
            self.crosshair.setVisible(False)
        else:
            self.crosshair.setPos(time_s)
            self.crosshair.setVisible(True)
        self.show_readout(time_s)

    # --- looks ----------------------------------------------------------------------
    def _limit_pen(self) -> pg.QtGui.QPen:
        return pg.mkPen(self.theme.muted, width=1, style=Qt.PenStyle.DashLine)

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        for name in ("left", "bottom", "right"):
            axis = self.item.getAxis(name)
            axis.setPen(pg.mkPen(theme.muted))
            axis.setTextPen(pg.mkPen(theme.muted))
        # No pyqtgraph grid: offscreen at 1600x1000 its alpha lines cost more than all the curves
        # (measured ~40 ms of a 70 ms column repaint); the limit lines give the reference instead.
        self.crosshair.setPen(pg.mkPen(theme.text, width=1, style=Qt.PenStyle.DotLine))
        self.item.vb.setBorder(pg.mkPen(theme.border))  # separates the stacked plots (no grid)
        for line, _label in self._limits.values():
            line.setPen(self._limit_pen())
        font = QFont()
        font.setPointSizeF(8.5)
        self.readout.setFont(font)
        self.show_readout(None)
