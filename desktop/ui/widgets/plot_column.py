"""A column of live time plots over one shared time axis, with one hover crosshair across them.

``PlotColumn(theme)`` -- a ``pg.GraphicsLayoutWidget`` holding plots stacked vertically
    with linked x axes (wall time, local, via ``DateAxisItem``) and one hover crosshair
    across all of them. ``add_plot(key, title, unit, y_range=None, height=None)`` returns a
    ``TimePlot`` (``desktop/ui/widgets/charts.py``); ``plot(key)`` finds it again; ``set_x_range(start_s,
    end_s)`` moves the shared time window; ``apply_theme(theme)`` recolours; signal
    ``hovered(float)`` gives the time under the mouse (NaN when it leaves).
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from pyqtgraph.graphicsItems import DateAxisItem as date_axis
from PySide6.QtCore import QEvent, QPointF, Signal

from desktop.ui.theme import Theme
from desktop.ui.widgets.charts import TimePlot
from desktop.ui.widgets.plot_item import TimeItem

#: Days over a week or two: each day tick names its weekday ("Mon 25"), a month tick its month too
#: ("Tue 01 Dec"); pyqtgraph's own level reads "25 26 … Dec".
WEEKDAY_ZOOM_LEVEL = date_axis.ZoomLevel([
    date_axis.TickSpec(date_axis.MONTH_SPACING, date_axis.makeMStepper(1), "%a %d %b"),
    date_axis.TickSpec(date_axis.DAY_SPACING, date_axis.makeSStepper(date_axis.DAY_SPACING), "%a %d", autoSkip=[1, 5]),
], "Mon 00")


class TimeAxis(pg.DateAxisItem):  # type: ignore[misc]
    """pyqtgraph's date axis with weekdays on the day ticks of a multi-day window."""

    def __init__(self) -> None:
        super().__init__(orientation="bottom")
        levels: dict[float, object] = dict(self.zoomLevels)  # type: ignore[has-type]
        self.zoomLevels = {limit: WEEKDAY_ZOOM_LEVEL if level is date_axis.MONTH_DAY_ZOOM_LEVEL else level
                           for limit, level in levels.items()}


class PlotColumn(pg.GraphicsLayoutWidget):  # type: ignore[misc]
    """Plots stacked over one shared time axis, with a crosshair that follows the mouse."""

    hovered = Signal(float)

    def __init__(self, theme: Theme, parent: pg.QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent=parent)
        self.theme = theme
        self.setBackground(theme.plot_background)
        self.ci.layout.setSpacing(6)
        self.ci.setContentsMargins(2, 2, 6, 2)
        self._plots: dict[str, TimePlot] = {}
        self._hover_s: float | None = None
        self.scene().sigMouseMoved.connect(self._mouse_moved)

    def add_plot(self, key: str, title: str, unit: str, y_range: tuple[float, float] | None = None,
                 height: int | None = None) -> TimePlot:
        first = next(iter(self._plots.values()), None)
        for plot in self._plots.values():  # only the bottom plot has a time axis: each one costs a
            plot.item.hideAxis("bottom")   # tick layout per frame, the largest part of an idle repaint
            plot.item.getAxis("bottom").unlinkFromView()  # hidden: no range bookkeeping per x move
        # Not a pg.PlotItem: its options menu, title and button, never shown here, were most of a
        # plot's construction and so of the window's cold start (plot_item.py).
        item = TimeItem({"bottom": TimeAxis()})
        self.ci.addItem(item, row=len(self._plots), col=0)
        plot = TimePlot(item, title, unit, self.theme)
        if first is not None:  # no setXLink: set_x_range moves every plot itself, without the link cascade
            (x0, x1), _ = first.item.viewRange()
            item.setXRange(x0, x1, padding=0)
        if y_range is not None:
            plot.set_y_range(*y_range)
        if height is not None:
            item.setMaximumHeight(height)
            item.setMinimumHeight(height)
        self._plots[key] = plot
        return plot

    def plot(self, key: str) -> TimePlot:
        return self._plots[key]

    def plots(self) -> list[TimePlot]:
        return list(self._plots.values())

    def set_x_range(self, start_s: float, end_s: float) -> None:
        """Move the time window of every plot; a move of less than a pixel is skipped.

        Each move makes every curve recompute its downsampled view; at 1 Hz in a 1 h window
        the window slides ~0.4 px per second, so most frames need no move at all.
        """
        if not self._plots:
            return
        first = next(iter(self._plots.values()))
        (x0, x1), _ = first.item.viewRange()
        width_px = max(1.0, first.item.vb.width())
        pixel_s = (end_s - start_s) / width_px
        if abs(x0 - start_s) < pixel_s and abs(x1 - end_s) < pixel_s:
            return
        for plot in self._plots.values():
            plot.item.setXRange(start_s, end_s, padding=0)
            # pyqtgraph applies the new transform lazily, inside the next paint, which then
            # schedules a second full paint; applying it now makes one paint per frame.
            plot.item.vb.prepareForPaint()

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        self.setBackground(theme.plot_background)
        for plot in self._plots.values():
            plot.apply_theme(theme)

    def hover_at(self, time_s: float | None) -> None:
        """Show the crosshair at ``time_s`` in every plot (None hides it)."""
        self._hover_s = time_s
        for plot in self._plots.values():
            plot.set_crosshair(time_s)
        self.hovered.emit(math.nan if time_s is None else time_s)

    def refresh_readouts(self) -> None:
        """Re-read the values under a crosshair that stayed put while new data came in."""
        if self._hover_s is not None:
            for plot in self._plots.values():
                plot.show_readout(self._hover_s)

    def _mouse_moved(self, pos: QPointF) -> None:
        for plot in self._plots.values():
            if plot.item.vb.sceneBoundingRect().contains(pos):
                self.hover_at(plot.item.vb.mapSceneToView(pos).x())
                return
        if self._hover_s is not None:
            self.hover_at(None)

    def leaveEvent(self, event: QEvent) -> None:
        if self._hover_s is not None:
            self.hover_at(None)
        super().leaveEvent(event)
