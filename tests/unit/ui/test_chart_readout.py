"""Live charts: the hover readout names the date in the 24 h and 7 d windows; a minimum y span per metric."""

from __future__ import annotations

import time

import numpy as np
import pytest
from pytestqt.qtbot import QtBot

from desktop.ui.theme import DARK
from desktop.ui.widgets.chart_math import min_span_range, readout_time
from desktop.ui.widgets.plot_column import PlotColumn

NOON_S = time.mktime((2026, 11, 10, 12, 0, 0, 0, 0, -1))  # local noon: no midnight within an hour of it


def test_readout_time_has_the_date_in_long_windows_only() -> None:
    t = NOON_S + 3 * 60 + 7
    assert readout_time(t, NOON_S - 600, NOON_S + 600) == "12:03:07"
    day = time.strftime("%a %d %b", time.localtime(t))
    assert readout_time(t, NOON_S - 86400, NOON_S + 600) == f"{day} 12:03"
    assert readout_time(t, NOON_S - 7 * 86400, NOON_S + 600) == f"{day} 12:03"
    # A short window across midnight is dated too: "00:10" alone would not say which day.
    midnight = time.mktime((2026, 11, 11, 0, 0, 0, 0, 0, -1))
    assert readout_time(midnight + 60, midnight - 300, midnight + 300).endswith("00:01")
    assert time.strftime("%d %b", time.localtime(midnight + 60)) in readout_time(midnight + 60, midnight - 300,
                                                                                 midnight + 300)


def test_the_dashboard_7_d_hover_readout_shows_the_date(make_app) -> None:
    h = make_app()
    h.app.window.show()
    h.tick(10)
    dash = h.app.dashboard
    for window, dated in (("10 min", False), ("24 h", True), ("7 d", True)):
        dash.set_window(window)
        dash.repaint_plots()
        column = dash.panels[0].plots
        times, _ = column.plot("temp").data("temperature_c")
        column.hover_at(float(times[4]))
        html = column.plot("temp").readout.textItem.toHtml()
        day = time.strftime("%a %d %b", time.localtime(float(times[4])))
        assert (day in html) is dated, window
        column.hover_at(None)


def _column(qtbot: QtBot) -> PlotColumn:
    column = PlotColumn(DARK)
    qtbot.addWidget(column)
    column.resize(600, 300)
    column.show()
    return column


def test_min_span_range_widens_about_the_middle() -> None:
    assert min_span_range(64.0, 65.0, 10.0) == (59.5, 69.5)
    assert min_span_range(40.0, 80.0, 10.0) == (40.0, 80.0)


def test_a_flat_noisy_temperature_is_not_blown_up_to_full_height(qtbot: QtBot) -> None:
    column = _column(qtbot)
    plot = column.add_plot("temp", "Temperature", "°C")
    plot.add_series("temp", "Temperature")
    plot.set_min_span(10.0)
    times = NOON_S + np.arange(120, dtype=np.float64)
    noise = 64.5 + np.where(np.arange(120) % 2 == 0, -0.5, 0.5)
    plot.set_data("temp", times, noise)
    column.set_x_range(float(times[0]), float(times[-1]))
    low, high = plot.y_range()
    assert high - low >= 10.0 and low < 64.0 and high > 65.0
    # A real rise taller than the minimum is fitted as it is.
    rise = np.linspace(40.0, 85.0, 120)
    plot.set_data("temp", times, rise)
    qtbot.waitUntil(lambda: plot.y_range()[0] < 45.0)  # pyqtgraph fits it at the next paint
    low, high = plot.y_range()
    assert 35.0 < low <= 40.0 and 85.0 <= high < 90.0


def test_the_span_can_be_a_share_of_the_value(qtbot: QtBot) -> None:
    column = _column(qtbot)
    plot = column.add_plot("tp", "Throughput", "TFLOP/s")
    plot.add_series("tp", "Throughput")
    plot.set_min_span(1.0, fraction=0.2)
    times = NOON_S + np.arange(60, dtype=np.float64)
    plot.set_data("tp", times, np.full(60, 70.0) + np.linspace(0, 0.3, 60))
    low, high = plot.y_range()
    assert high - low >= 0.2 * 70.0


def test_gaps_and_an_infinite_reading_do_not_move_the_minimum_span(qtbot: QtBot) -> None:
    """The span is widened about the finite readings only: a NaN gap (a lost GPU) or an inf (a broken sensor
    read) neither hides the data nor stretches the range to infinity; all-NaN history adds nothing."""
    column = _column(qtbot)
    plot = column.add_plot("temp", "Temperature", "°C")
    plot.add_series("temp", "Temperature")
    plot.set_min_span(10.0)
    times = NOON_S + np.arange(120, dtype=np.float64)
    readings = np.full(120, 64.5)
    readings[10:20] = np.nan
    readings[50] = np.inf
    readings[51] = -np.inf
    plot.set_history("temp", times - 120.0, np.full(120, np.nan))
    plot.set_data("temp", times, readings)
    low, high = plot.y_range()
    assert high - low == pytest.approx(10.0 * 1.04)  # 59.5 to 69.5 with pyqtgraph's 2 % padding each side
    assert low < 59.5 and high > 69.5
