"""The ring buffer returns the newest rows in order without copies; plots keep one curve per series."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PySide6.QtGui import QImage

from desktop.ui.pages.dashboard_panel import LANE_REASONS, lane_rows, lane_segments
from desktop.ui.theme import DARK, LIGHT
from desktop.ui.widgets.chart_math import peak_downsample
from desktop.ui.widgets.plot_column import PlotColumn
from desktop.ui.widgets.plot_curves import LiveCurve, plot_data_curve
from desktop.ui.widgets.ring_buffer import RingBuffer


@given(capacity=st.integers(1, 20), n=st.integers(0, 60))
def test_ring_buffer_keeps_the_newest_rows_in_order(capacity, n):
    ring = RingBuffer(capacity, ("a",))
    for i in range(n):
        ring.append(float(i), {"a": i * 10.0})
    kept = list(range(max(0, n - capacity), n))
    assert ring.times().tolist() == [float(i) for i in kept]
    assert ring.view("a").tolist() == [i * 10.0 for i in kept]
    assert len(ring) == len(kept)
    assert ring.version == n


def test_views_are_zero_copy_and_start_at_the_window():
    ring = RingBuffer(5, ("a", "b"))
    for i in range(12):
        ring.append(100.0 + i, {"a": float(i), "b": None})
    view = ring.view("a")
    assert view.base is not None  # a view into the buffer, not a copy
    assert ring.times(start_s=109.0).tolist() == [109.0, 110.0, 111.0]
    assert ring.view("a", start_s=109.0).tolist() == [9.0, 10.0, 11.0]
    assert np.isnan(ring.view("b")).all()  # missing is NaN, never 0
    assert ring.oldest_s() == 107.0 and ring.latest_s() == 111.0
    ring.clear()
    assert len(ring) == 0 and ring.oldest_s() is None and ring.times().size == 0


def test_ring_buffer_rejects_zero_capacity():
    with pytest.raises(ValueError, match="capacity"):
        RingBuffer(0, ("a",))


def test_lane_rows_mark_each_throttle_cause_on_its_own_row():
    power = int(LANE_REASONS[0])
    hw_thermal = int(LANE_REASONS[3])
    mask = np.array([0.0, power, power | hw_thermal, 0.0, 1.0, np.nan])
    rows = lane_rows(mask)
    # A set sample reaches to the next one: each cause is a segment, even when seen once.
    # The value is the cause's share of the sample (1.0: it held); the drawing puts it on its row.
    assert np.array_equal(rows[0], [np.nan, 1.0, 1.0, 1.0, np.nan, np.nan], equal_nan=True)
    assert np.array_equal(rows[3], [np.nan, np.nan, 1.0, 1.0, np.nan, np.nan], equal_nan=True)
    assert all(r is None for i, r in enumerate(rows) if i not in (0, 3))  # never set: no points at all


def test_lane_segments_draw_each_run_as_two_points_and_a_break():
    times = np.arange(8.0)
    rows = np.array([np.nan, 1.0, 1.0, 1.0, np.nan, 1.0, 1.0, np.nan])
    t, y = lane_segments(times, rows, 2)
    assert np.array_equal(t, [1.0, 3.0, 3.0, 5.0, 6.0, 6.0])
    assert np.array_equal(y, [2.0, 2.0, np.nan, 2.0, 2.0, np.nan], equal_nan=True)
    assert lane_segments(times, np.full(8, np.nan), 2)[0].size == 0


def test_plot_column_curves_persist_and_follow_the_theme(qtbot):
    column = PlotColumn(LIGHT)
    qtbot.addWidget(column)
    plot = column.add_plot("p", "Power", "W")
    plot.add_series("power_w", "Board")
    curve = plot._series["power_w"].live
    items_before = len(plot.item.items)
    for i in range(5):
        plot.set_data("power_w", np.arange(10.0 + i), np.arange(10.0 + i))
    assert plot._series["power_w"].live is curve and len(plot.item.items) == items_before
    assert curve.opts["connect"] == "finite"
    assert curve.opts["downsampleMethod"] == "peak" and curve.opts["downsample"] == 1
    many = np.arange(20_000.0)
    plot.set_data("power_w", many, many % 97)  # far more points than pixels: peak-downsampled
    assert curve.opts["downsample"] >= 10
    x_shown, y_shown = curve.getData()
    assert x_shown.size < many.size and np.nanmax(y_shown) == 96  # the peaks survive
    plot.set_limit("limit", 150.0, "limit")
    plot.set_limit("limit", None, "limit")
    assert not plot._limits["limit"][0].isVisible()
    column.apply_theme(DARK)
    assert column.backgroundBrush().color().name() == DARK.plot_background
    assert plot.value_at("power_w", 3.2) == 3.0
    assert plot.value_at("power_w", 1e9) is None


def test_sparse_lane_marks_survive_many_points(qtbot):
    column = PlotColumn(LIGHT)
    qtbot.addWidget(column)
    lane = column.add_plot("lane", "Throttle causes", "")
    lane.add_series("hw", "HW thermal", width=6, downsample=False)
    times = np.arange(20_000.0)
    rows = np.full(times.size, np.nan)
    rows[::997] = 0.0  # isolated marks: a peak block holding a NaN would erase them
    lane.set_data("hw", times, rows)
    _, shown = lane._series["hw"].live.getData()
    assert np.isfinite(shown).sum() == np.isfinite(rows).sum()


def _series_data() -> tuple[np.ndarray, np.ndarray]:
    times = 1_790_000_000.0 + np.arange(3_000.0)
    values = 50 + 40 * np.sin(times / 37.0)
    values[700:760] = np.nan  # a lost GPU: a gap
    values[1500] = np.nan
    return times, values


def _image(column: PlotColumn) -> np.ndarray:
    image = column.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    rows = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
    return rows[:, :image.width() * 4].copy()


def test_live_curves_draw_what_a_plot_data_item_draws(qtbot):
    """The lean live curve paints the same pixels as pyqtgraph's PlotDataItem with the same pen: thin and
    dashed lines with gaps, "peak" downsampled, and wide square-capped lane segments."""
    times, values = _series_data()
    lane_t, lane_y = lane_segments(times, np.where(values > 80, 1.0, np.nan), 1)
    images = []
    for lean in (True, False):
        column = PlotColumn(LIGHT)
        qtbot.addWidget(column)
        column.resize(900, 400)
        plot = column.add_plot("p", "Load", "%", y_range=(0, 100))
        lane = column.add_plot("lane", "Throttle causes", "")
        lane.set_categories(["a", "b", "c"])
        column.set_x_range(float(times[0]), float(times[-1]))
        column.show()
        qtbot.waitExposed(column)
        plot.add_series("solid", "GPU")
        plot.add_series("dash", "Load", width=1.5, style="dash")
        lane.add_series("held", "HW thermal", width=6, downsample=False, style="solid")
        if not lean:  # the same series drawn by PlotDataItems instead
            for tp, key in ((plot, "solid"), (plot, "dash"), (lane, "held")):
                series = tp._series[key]
                tp.item.removeItem(series.live)
                series.live = plot_data_curve(series.colour, series.width, series.style)
                tp.item.addItem(series.live)
        plot.set_data("solid", times, values)
        plot.set_data("dash", times, values - 30)
        lane.set_data("held", times, values, drawn=(lane_t, lane_y))
        assert plot._series["solid"].live.opts["downsample"] > 1  # more points than pixels
        qtbot.wait(50)
        images.append(_image(column))
    lean_image, reference = images
    assert (lean_image != reference).any(axis=1).sum() == 0
    assert (reference != reference[0, 0]).any()  # something was drawn


def test_peak_downsampling_matches_pyqtgraph():
    times, values = _series_data()
    reference = pg.PlotDataItem(times, values, connect="finite")
    reference.setDownsampling(ds=7, auto=False, method="peak")
    x, y = peak_downsample(times, values, 7)
    ref_x, ref_y = reference.getData()
    assert np.array_equal(x, ref_x) and np.array_equal(y, ref_y, equal_nan=True)


def test_live_curve_bounds_follow_its_finite_data(qtbot):
    column = PlotColumn(LIGHT)
    qtbot.addWidget(column)
    plot = column.add_plot("p", "VRAM", "MiB")  # automatic y range
    plot.add_series("used", "Used")
    values = np.array([np.nan, 1000.0, 1500.0, np.nan, 1200.0])
    plot.set_data("used", np.arange(5.0), values)
    curve = plot._series["used"].live
    assert isinstance(curve, LiveCurve)
    assert curve.dataBounds(1) == (1000.0, 1500.0) and curve.dataBounds(0) == (0.0, 4.0)
    assert curve.dataBounds(1, orthoRange=(0.0, 2.0)) == (1000.0, 1500.0)
    assert curve.dataBounds(1, orthoRange=(3.5, 5.0)) == (1200.0, 1200.0)
    plot.item.vb.updateAutoRange()
    low, high = plot.y_range()
    assert low <= 1000.0 and high >= 1500.0 and high - low < 1000.0
    plot.set_data("used", np.arange(3.0), np.full(3, np.nan))  # a lost GPU: nothing to fit
    assert all(math.isnan(v) for v in curve.dataBounds(1)) and curve.boundingRect().isEmpty()
