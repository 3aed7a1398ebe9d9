"""TimeItem lays a plot out as pg.PlotItem does (the cold-start saving must not move a pixel), and is lighter."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from pytestqt.qtbot import QtBot

from desktop.ui.widgets.plot_item import TimeItem

BAND_PX = 18


def _configure(item: pg.PlotItem | TimeItem, *, bottom: bool, right: bool) -> None:
    # What PlotColumn / TimePlot do: the band row, the right axis for limit labels, the bottom axis only last.
    item.layout.setRowFixedHeight(0, BAND_PX)
    item.getAxis("left").setWidth(48)
    if right:
        item.showAxis("right")
        item.getAxis("right").setWidth(120)
    if not bottom:
        item.hideAxis("bottom")


def _layout(qtbot: QtBot, item: pg.PlotItem | TimeItem) -> dict[str, tuple[float, float, float, float]]:
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    widget.resize(900, 260)
    widget.ci.addItem(item, row=0, col=0)
    widget.show()
    qtbot.waitExposed(widget)
    item.layout.activate()
    rects = {"view": item.vb.geometry()}
    rects.update({name: item.getAxis(name).geometry() for name in ("left", "bottom", "right", "top")
                  if item.getAxis(name).isVisible()})
    return {k: (r.x(), r.y(), r.width(), r.height()) for k, r in rects.items()}


@pytest.mark.parametrize(("bottom", "right"), [(True, True), (False, True), (True, False), (False, False)])
def test_the_view_and_axes_sit_where_a_plot_items_would(qtbot: QtBot, bottom: bool, right: bool) -> None:
    ours, theirs = TimeItem(), pg.PlotItem(enableMenu=False)
    _configure(ours, bottom=bottom, right=right)
    _configure(theirs, bottom=bottom, right=right)
    assert _layout(qtbot, ours) == _layout(qtbot, theirs)


def test_a_hidden_axis_takes_no_room(qtbot: QtBot) -> None:
    # AxisItem.hide(), not setVisible(False): only it gives the axis no height (it left a gap under every plot).
    item = TimeItem()
    item.hideAxis("bottom")
    view = _layout(qtbot, item)["view"]
    assert view[1] + view[3] == pytest.approx(item.geometry().height() - 1)  # down to the 1 px margin


def test_items_and_ranges_go_through_its_view_box(qtbot: QtBot) -> None:
    item = TimeItem()
    line = pg.InfiniteLine(pos=5.0, angle=90)
    item.addItem(line, ignoreBounds=True)
    item.addItem(line, ignoreBounds=True)  # twice: kept once, as PlotItem does
    assert item.items == [line]
    assert line.parentItem() is item.vb.childGroup
    item.setXRange(10.0, 20.0, padding=0)
    assert item.viewRange()[0] == pytest.approx([10.0, 20.0])
    item.removeItem(line)
    assert item.items == [] and line.parentItem() is None
    # The axes follow the view box: a range move reaches the bottom axis as PlotItem's linked axes do.
    assert item.getAxis("bottom").range == pytest.approx([10.0, 20.0])


def test_it_builds_no_options_menu() -> None:
    # The point of it: pg.PlotItem builds its "Plot Options" form for every plot; this item has none.
    assert not hasattr(TimeItem(), "ctrlMenu")
    assert hasattr(pg.PlotItem(enableMenu=False), "ctrlMenu")
