"""The level of a noisy signal (advisor.signal_level): what every verdict decision reads instead of single samples."""

from __future__ import annotations

import math

import numpy as np

from advisor.signal_level import best_level, level


def test_a_capped_clock_dithering_between_two_modes_has_a_steady_level_where_its_median_jumps() -> None:
    """An H800 under its power cap dithers 1425-1965 MHz: one sample more in the low mode flips the median by
    540 MHz; the trimmed mean moves by about 1/80 of it (one sample of the middle 81)."""
    high, low = 1965.0, 1425.0
    more_high = np.array([high] * 51 + [low] * 50)
    more_low = np.array([high] * 50 + [low] * 51)
    assert abs(float(np.median(more_high)) - float(np.median(more_low))) == high - low
    assert abs(level(more_high) - level(more_low)) < 0.02 * (high - low)
    assert low < level(more_low) < level(more_high) < high


def test_a_level_ignores_nan_and_spikes_and_is_nan_without_values() -> None:
    values = np.array([100.0] * 18 + [np.nan, 10_000.0, 0.0])
    assert level(values) == 100.0
    assert math.isnan(level(np.array([np.nan, np.nan])))


def test_the_best_sustained_level_is_the_best_window_in_the_mask_not_a_spike_or_a_stretch_away_from_it() -> None:
    """Windows are centred on the mask's samples (in ``judge`` the signal is NaN outside the load)."""
    signal = np.concatenate([np.full(30, 100.0), np.full(30, 120.0), np.full(40, 90.0), np.full(30, 500.0)])
    signal[10] = 1_000.0  # one spike: a 10-sample window trims it away
    mask = np.zeros(signal.shape[0], dtype=bool)
    mask[:90] = True  # the 500 stretch starts 10 samples past it: more than half a window away
    assert best_level(signal, mask, 10) == 120.0
    assert math.isnan(best_level(signal, np.zeros(signal.shape[0], dtype=bool), 10))
