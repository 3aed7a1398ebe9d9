"""The ring buffer returns the newest rows in order without copies; plots keep one curve per series."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from desktop.ui.pages.dashboard_panel import LANE_REASONS, lane_rows, lane_segments
from desktop.ui.theme import DARK, LIGHT
from desktop.ui.widgets.plot_column import PlotColumn
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
