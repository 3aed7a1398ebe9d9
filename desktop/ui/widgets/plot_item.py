"""``TimeItem``: the part of ``pg.PlotItem`` a ``TimePlot`` uses, without what it never shows.

A ``pg.PlotItem`` builds, for every plot, its "Plot Options" context menu (a widget form of
about forty controls, wired signal by signal), a title label and an auto-range button; a time
plot has its menu and mouse off and no title, so none of them is ever seen, yet together they
were the largest part of a plot's construction and so of the window's cold start (issue 27:
24 plots for 4 GPUs). This item lays out the same grid -- title row 0, top axis row 1, left
axis / view box / right axis row 2, bottom axis row 3 -- with the same spacing, stretch and axis
stacking, and forwards the view box calls a ``TimePlot`` makes.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QGraphicsGridLayout, QGraphicsItem, QSizePolicy

#: Where each axis sits in the grid (row, column), as in ``pg.PlotItem``.
AXIS_CELLS: dict[str, tuple[int, int]] = {"top": (1, 1), "bottom": (3, 1), "left": (2, 0), "right": (2, 2)}
_SHOWN_AT_START = ("left", "bottom")


class TimeItem(pg.GraphicsWidget):  # type: ignore[misc]
    """A view box framed by four axes (left and bottom shown), in a grid whose row 0 is left for a band."""

    def __init__(self, axis_items: dict[str, pg.AxisItem] | None = None) -> None:
        super().__init__()
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.layout = QGraphicsGridLayout()
        self.layout.setContentsMargins(1, 1, 1, 1)
        self.layout.setHorizontalSpacing(0)
        self.layout.setVerticalSpacing(0)
        self.setLayout(self.layout)
        self.vb = pg.ViewBox(parent=self, enableMenu=False)
        self.layout.addItem(self.vb, 2, 1)
        #: What ``addItem`` added (as ``pg.PlotItem.items``).
        self.items: list[QGraphicsItem] = []
        self.axes: dict[str, pg.AxisItem] = {}
        given = axis_items or {}
        for name, (row, col) in AXIS_CELLS.items():
            axis = given.get(name) or pg.AxisItem(orientation=name, parent=self)
            axis.linkToView(self.vb)
            self.axes[name] = axis
            self.layout.addItem(axis, row, col)
            # Over images at z 0 and under items that draw over the axes (z >= 1), as PlotItem stacks them.
            axis.setZValue(0.5)
            axis.setFlag(QGraphicsItem.GraphicsItemFlag.ItemNegativeZStacksBehindParent)
            self.showAxis(name, name in _SHOWN_AT_START or name in given)
        # Row 0 holds no item: a TimePlot fixes its height for the band its readout is drawn in.
        self.layout.setRowFixedHeight(0, 0)
        for i in range(4):
            self.layout.setRowPreferredHeight(i, 0)
            self.layout.setRowMinimumHeight(i, 0)
            self.layout.setRowSpacing(i, 0)
            self.layout.setRowStretchFactor(i, 1)
        for i in range(3):
            self.layout.setColumnPreferredWidth(i, 0)
            self.layout.setColumnMinimumWidth(i, 0)
            self.layout.setColumnSpacing(i, 0)
            self.layout.setColumnStretchFactor(i, 1)
        self.layout.setRowStretchFactor(2, 100)
        self.layout.setColumnStretchFactor(1, 100)

    # --- axes -------------------------------------------------------------------------
    def getAxis(self, name: str) -> pg.AxisItem:
        return self.axes[name]

    def showAxis(self, name: str, show: bool = True) -> None:
        """AxisItem's own show/hide (not setVisible): they also give a hidden axis no height or width."""
        axis = self.getAxis(name)
        if show:
            axis.show()
        else:
            axis.hide()

    def hideAxis(self, name: str) -> None:
        self.showAxis(name, False)

    # --- items ------------------------------------------------------------------------
    def addItem(self, item: QGraphicsItem, *, ignoreBounds: bool = False) -> None:
        if item in self.items:
            return
        self.items.append(item)
        self.vb.addItem(item, ignoreBounds=ignoreBounds)

    def removeItem(self, item: QGraphicsItem) -> None:
        if item not in self.items:
            return
        self.items.remove(item)
        self.vb.removeItem(item)

    # --- the view box's range ---------------------------------------------------------
    def viewRange(self) -> list[list[float]]:
        return self.vb.viewRange()  # type: ignore[no-any-return]

    def setXRange(self, low: float, high: float, padding: float | None = None) -> None:
        self.vb.setXRange(low, high, padding=padding)

    def setYRange(self, low: float, high: float, padding: float | None = None) -> None:
        self.vb.setYRange(low, high, padding=padding)

    def enableAutoRange(self, **axes: bool) -> None:
        self.vb.enableAutoRange(**axes)

    def setMouseEnabled(self, x: bool, y: bool) -> None:
        self.vb.setMouseEnabled(x=x, y=y)
