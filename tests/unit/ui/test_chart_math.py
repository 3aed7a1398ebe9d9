"""The live plots' pure helpers (``chart_math``): the readout's words, the nearest sample, "peak" downsampling and
finite bounds, on plain arrays."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from desktop.ui.widgets.chart_math import (
    NEAREST_REACH_S,
    finite_bounds,
    limit_text,
    nearest_index,
    peak_downsample,
    share_text,
)


def test_limit_labels_name_the_value_with_its_unit() -> None:
    assert limit_text("slowdown", 87.0, "°C") == "slowdown 87 °C"
    assert limit_text("total", 16376.0, "MiB") == "total 16,376 MiB"
    assert limit_text("max", 3105.4, "") == "max 3,105"  # no unit: no trailing space


def test_lane_shares_keep_small_ones_visible() -> None:
    assert share_text("HW thermal", 0.0004) == "HW thermal <0.1 %"
    assert share_text("HW thermal", 0.015) == "HW thermal 1.5 %"
    assert share_text("SW thermal", 0.5) == "SW thermal 50 %"
    assert share_text("Power cap", 1.0) == "Power cap 100 %"


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=40, unique=True), st.integers(-20, 10_030))
@example([0, 4, 8], 6)  # half way between two samples
@example([100], 80)  # exactly the reach before the only sample
def test_the_nearest_sample_is_the_closest_one_within_reach(stamps: list[int], at: int) -> None:
    times = np.array(sorted(stamps), dtype=np.float64) / 4.0  # quarter seconds: exact in float64
    time_s = at / 4.0
    found = nearest_index(times, time_s)
    distances = np.abs(times - time_s)
    if time_s < times[0] - NEAREST_REACH_S or time_s > times[-1] + NEAREST_REACH_S:
        assert found is None
    else:
        assert found is not None
        assert distances[found] == distances.min()
        assert found == int(np.flatnonzero(distances == distances.min())[-1])  # a tie reads the later sample


def test_no_samples_no_nearest() -> None:
    assert nearest_index(np.empty(0), 10.0) is None


def test_peak_downsampling_keeps_each_blocks_max_then_min_at_its_middle() -> None:
    times = np.arange(7.0)
    values = np.array([1.0, 9.0, 2.0, 5.0, math.nan, 3.0, 8.0])
    x, y = peak_downsample(times, values, 3)
    assert x.tolist() == [1.0, 1.0, 4.0, 4.0]  # the seventh point, a part block, is dropped
    assert y[:2].tolist() == [9.0, 1.0]
    assert np.isnan(y[2:]).all()  # a block holding a NaN is a gap, not its finite part


def test_finite_bounds_skip_nan_and_infinity() -> None:
    assert finite_bounds(np.array([3.0, math.nan, -2.0])) == (-2.0, 3.0)
    assert finite_bounds(np.array([math.inf, 1.0, math.nan, 4.0, -math.inf])) == (1.0, 4.0)
    for nothing in (np.empty(0), np.array([math.nan, math.nan]), np.array([math.inf, -math.inf])):
        low, high = finite_bounds(nothing)
        assert math.isnan(low) and math.isnan(high)
