"""Readable in both themes: WCAG contrast of every text colour, visible check boxes, and charts whose titles,
readouts and limit labels never sit on the data and whose series differ by more than hue."""

from __future__ import annotations

import time

import numpy as np
import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QCheckBox, QStyle, QStyleOptionButton
from pytestqt.qtbot import QtBot

from desktop.ui.theme import DARK, GRAPHIC_CONTRAST, LIGHT, TEXT_CONTRAST, Theme, apply_theme, contrast_ratio
from desktop.ui.widgets.charts import BAND_PX
from desktop.ui.widgets.plot_column import PlotColumn

THEMES = (DARK, LIGHT)
TEXT_ROLES = ("text", "muted", "accent", "ok", "warn", "bad")
BACKGROUNDS = ("window", "base", "plot_background")


def test_contrast_ratio_is_wcags() -> None:
    assert contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast_ratio("#777777", "#777777") == pytest.approx(1.0)
    assert contrast_ratio("#E69F00", "#ffffff") == pytest.approx(2.2, abs=0.1)  # the old light-theme orange


@pytest.mark.parametrize("theme", THEMES, ids=lambda t: t.name)
def test_every_text_colour_reads_at_4_5_to_1_on_every_background(theme: Theme) -> None:
    low = {(role, bg): round(contrast_ratio(getattr(theme, role), getattr(theme, bg)), 2)
           for role in TEXT_ROLES for bg in BACKGROUNDS}
    assert {k: v for k, v in low.items() if v < TEXT_CONTRAST} == {}
    for level in ("critical", "warning", "info"):  # the Advisor's severity badges are text
        assert contrast_ratio(theme.severity(level), theme.base) >= TEXT_CONTRAST
    assert contrast_ratio(theme.on_accent, theme.accent) >= TEXT_CONTRAST  # selected sidebar item, checked button


@pytest.mark.parametrize("theme", THEMES, ids=lambda t: t.name)
def test_series_lines_stand_out_from_the_plot_background(theme: Theme) -> None:
    low = {c: round(contrast_ratio(c, theme.plot_background), 2) for c in theme.series}
    assert {c: v for c, v in low.items() if v < GRAPHIC_CONTRAST} == {}


def _indicator_contrast(qtbot: QtBot, theme: Theme) -> float:
    qapp = QApplication.instance()
    assert isinstance(qapp, QApplication)
    apply_theme(qapp, theme)
    box = QCheckBox("Record from login")
    qtbot.addWidget(box)
    box.show()
    image = box.grab().toImage()
    option = QStyleOptionButton()
    option.initFrom(box)
    rect = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, option, box)
    edge = [image.pixelColor(QPoint(x, rect.center().y())).name() for x in range(rect.left(), rect.center().x())]
    return max(contrast_ratio(c, theme.window) for c in edge)


@pytest.mark.parametrize("theme", THEMES, ids=lambda t: t.name)
def test_an_unticked_check_box_is_visible(qtbot: QtBot, theme: Theme) -> None:
    try:
        assert _indicator_contrast(qtbot, theme) >= GRAPHIC_CONTRAST
    finally:
        qapp = QApplication.instance()
        assert isinstance(qapp, QApplication)
        apply_theme(qapp, DARK)


def _column(qtbot: QtBot, theme: Theme = DARK) -> PlotColumn:
    column = PlotColumn(theme)
    qtbot.addWidget(column)
    column.resize(700, 260)
    column.show()
    return column


def test_title_and_readout_sit_above_the_plot_area(qtbot: QtBot) -> None:
    column = _column(qtbot)
    plot = column.add_plot("temp", "Temperature", "°C", y_range=(20.0, 95.0))
    plot.add_series("temperature_c", "GPU")
    times = 1_790_000_000.0 + np.arange(60.0)
    plot.set_data("temperature_c", times, np.full(60, 94.0))  # at the top of the range, where the title was
    column.set_x_range(times[0], times[-1])
    column.hover_at(float(times[30]))
    qtbot.wait(10)
    readout = plot.readout.sceneBoundingRect()
    area = plot.item.vb.sceneBoundingRect()
    assert "GPU 94" in plot.readout.textItem.toPlainText()
    assert readout.bottom() <= area.top() + 1 and not readout.intersects(area.adjusted(0, 2, 0, 0))
    assert area.top() - plot.item.sceneBoundingRect().top() >= BAND_PX - 1
    column.hover_at(None)


def test_limit_lines_carry_their_name_value_and_unit_at_the_end(qtbot: QtBot) -> None:
    column = _column(qtbot)
    plot = column.add_plot("temp", "Temperature", "°C", y_range=(20.0, 95.0))
    plot.add_series("temperature_c", "GPU")
    plot.set_limit("slowdown", 87.0, "slowdown")
    assert plot.limit_label("slowdown") == "slowdown 87 °C"
    qtbot.wait(10)
    right = plot.item.getAxis("right").sceneBoundingRect()
    area = plot.item.vb.sceneBoundingRect()
    assert right.left() >= area.right() - 1 and right.width() >= 100  # beside the newest data, not on it
    plot.set_limit("slowdown", None, "slowdown")
    assert plot.limit_label("slowdown") is None


def test_series_of_one_plot_differ_in_line_style_too(qtbot: QtBot) -> None:
    column = _column(qtbot, LIGHT)
    plot = column.add_plot("util", "Utilization", "%")
    for key in ("gpu", "mem", "load"):
        plot.add_series(key, key)
    styles = {plot._series[k].live.opts["pen"].style() for k in ("gpu", "mem", "load")}
    assert len(styles) == 3


def test_dashboard_utilization_series_differ_in_style_and_swatch(make_app) -> None:
    h = make_app()
    h.tick(1)
    util = h.app.dashboard.panels[0].plots.plot("util")
    pens = {k: util._series[k].live.opts["pen"] for k in util.series_keys()}
    assert len({p.style() for p in pens.values()}) == 3
    assert QColor(pens["utilization_mem_pct"].color()) != QColor(pens["effective_load_pct"].color())


def test_the_7_d_axis_names_weekdays(qtbot: QtBot) -> None:
    column = _column(qtbot)
    column.resize(1300, 260)
    plot = column.add_plot("temp", "Temperature", "°C")
    plot.add_series("temperature_c", "GPU")
    end = time.mktime((2026, 12, 1, 12, 0, 0, 0, 0, -1))
    column.set_x_range(end - 7 * 86400, end)
    qtbot.wait(10)
    axis = plot.item.getAxis("bottom")
    levels = axis.tickValues(end - 7 * 86400, end, 1200)
    strings = [s for spacing, values in levels for s in axis.tickStrings(values, 1.0, spacing)]
    assert strings and all(s[:3] in {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"} for s in strings), strings


def test_two_limits_close_together_keep_both_labels_apart(qtbot: QtBot) -> None:
    column = _column(qtbot)
    plot = column.add_plot("temp", "Temperature", "°C", y_range=(30.0, 95.0))
    plot.add_series("temperature_c", "GPU")
    plot.set_limit("slowdown", 87.0, "slowdown")
    plot.set_limit("guard", 90.0, "guard")
    qtbot.wait(10)
    placed = dict((text, y) for y, text in plot.limit_label_positions())
    assert set(placed) == {"slowdown 87 °C", "guard 90 °C"}
    _low, high = plot.y_range()
    px_per_c = plot.item.vb.height() / (high - _low)
    assert (placed["guard 90 °C"] - placed["slowdown 87 °C"]) * px_per_c >= 13.0  # a line of text apart
    assert placed["guard 90 °C"] >= placed["slowdown 87 °C"]  # in the order of their lines


def test_a_limit_out_of_view_has_no_label(qtbot: QtBot) -> None:
    column = _column(qtbot)
    plot = column.add_plot("clock", "SM clock", "MHz", y_range=(1600.0, 1950.0))
    plot.add_series("sm_clock_mhz", "SM")
    plot.set_limit("max", 2040.0, "max")
    qtbot.wait(10)
    assert plot.limit_label_positions() == []
