"""A live curve whose window only slid repaints just its two ends: what is on screen must still be the picture.

The window's backing store (what the user sees, ``QScreen.grabWindow`` on the offscreen platform) is compared
with a fresh render of the same widget (``QWidget.grab`` paints everything anew) after every step.
"""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage
from pytestqt.qtbot import QtBot

from desktop.ui.theme import DARK
from desktop.ui.widgets import chart_math, charts, plot_curves
from desktop.ui.widgets.plot_column import PlotColumn

WINDOW_S = 120.0


def _screen(widget: PlotColumn) -> QImage:
    window = widget.window().windowHandle()
    return window.screen().grabWindow(window.winId()).toImage().convertToFormat(QImage.Format.Format_RGB32)


def _fresh(widget: PlotColumn) -> QImage:
    return widget.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)


def _differing_pixels(a: QImage, b: QImage) -> int:
    assert a.size() == b.size()
    pa = np.frombuffer(a.constBits(), dtype=np.uint32, count=a.width() * a.height())
    pb = np.frombuffer(b.constBits(), dtype=np.uint32, count=b.width() * b.height())
    return int((pa != pb).sum())


def _column(qtbot: QtBot) -> tuple[PlotColumn, charts.TimePlot]:
    column = PlotColumn(DARK)
    qtbot.addWidget(column)
    plot = column.add_plot("p", "Test", "%", y_range=(0, 100))
    plot.add_series("thin", "Thin")
    plot.add_series("wide", "Wide", width=6, downsample=False, style="solid")
    column.resize(700, 260)
    column.show()
    qtbot.waitExposed(column)
    return column, plot


def _slide(qtbot: QtBot, column: PlotColumn, plot: charts.TimePlot, steps: int,
           resize_at: int | None = None) -> list[int]:
    rng = np.random.default_rng(3)
    times = np.arange(-100.0, 400.0)  # the window full from the start: points go at its start, come at its end
    thin = rng.uniform(5, 95, times.size)
    thin[rng.random(times.size) < 0.05] = np.nan  # gaps too
    thin[times == -15.0] = 99.5  # the highest point leaves the window on the way: the picture's top drops
    thin[times == 110.0] = 0.5  # and a new lowest comes
    wide = np.where(rng.random(times.size) < 0.5, 40.0, np.nan)
    differing = []
    column.set_x_range(100.0 - WINDOW_S, 100.0 + 20.0)
    for step, end in enumerate(range(100, 100 + steps)):
        if step == resize_at:  # the pixel's size in data units changes: the strips must follow
            column.resize(260, 130)
            qtbot.wait(20)
        keep = (times > end - WINDOW_S) & (times <= end)
        plot.set_data("thin", times[keep], thin[keep])
        plot.set_data("wide", times[keep], wide[keep])
        qtbot.wait(20)  # the scene's dirty regions painted into the backing store, as the event loop does
        differing.append(_differing_pixels(_screen(column), _fresh(column)))
    return differing


def test_the_screen_after_each_slide_is_a_fresh_render(qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    strips = []
    strip = plot_curves.LiveCurve._strip

    def spy(self: plot_curves.LiveCurve, lo: float, hi: float, y0: float, y1: float) -> QRectF:
        strips.append(hi - lo)
        return strip(self, lo, hi, y0, y1)

    monkeypatch.setattr(plot_curves.LiveCurve, "_strip", spy)
    column, plot = _column(qtbot)
    assert _slide(qtbot, column, plot, steps=15) == [0] * 15
    assert len(strips) >= 2 * 2 * 12  # both ends of both curves, most steps: the partial repaint was what ran


def test_the_strips_follow_a_resize(qtbot: QtBot) -> None:
    column, plot = _column(qtbot)
    assert _slide(qtbot, column, plot, steps=10, resize_at=4) == [0] * 10


def test_the_check_sees_a_stale_picture(qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    # Were the strips too narrow (here: a speck each; a null rect would mean the whole item), it would show.
    column, plot = _column(qtbot)
    _slide(qtbot, column, plot, steps=2)
    monkeypatch.setattr(plot_curves.LiveCurve, "_strip", lambda self, lo, hi, y0, y1: QRectF(hi, 50.0, 1e-6, 1e-6))
    assert max(_slide(qtbot, column, plot, steps=3)) > 0


def test_only_the_ends_are_marked_when_the_window_slides() -> None:
    x = np.arange(10.0, 20.0)
    y = x * 2
    assert chart_math.slid_ends(x, y, x[2:] + 0, y[2:]) == [(10.0, 12.0)]  # two points gone at the start
    grown_x, grown_y = np.append(x[1:], [20.0, 21.0]), np.append(y[1:], [0.0, 1.0])
    assert chart_math.slid_ends(x, y, grown_x, grown_y) == [(10.0, 11.0), (19.0, 21.0)]
    changed = y[1:].copy()
    changed[3] = -1.0  # a kept point changed: not a slide
    assert chart_math.slid_ends(x, y, x[1:], changed) is None
    assert chart_math.slid_ends(x, y, x + 0.5, y) is None  # new times: not a slide
