"""The live plots' pure parts, no Qt: what the hover readout and the limit labels say, and the arithmetic on the
curves' arrays (a minimum y span, the nearest sample, "peak" downsampling, finite bounds, a window that slid).

``TimePlot`` (``charts.py``) and ``LiveCurve`` (``live_curve.py``) call these; each is tested on plain values.
"""

from __future__ import annotations

import math
import time

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: A window longer than this (or one that crosses midnight) shows the date in the hover readout.
DATED_WINDOW_S = 6 * 3600.0
#: How far (seconds) from the nearest sample the hover still reads it; further off reads as no value.
NEAREST_REACH_S = 5.0


def readout_time(time_s: float, window_start_s: float, window_end_s: float) -> str:
    """The hover readout's time: "14:03:07", or with the date ("Tue 10 Nov 14:03") in a long window."""
    start, end = time.localtime(window_start_s), time.localtime(window_end_s)
    dated = window_end_s - window_start_s > DATED_WINDOW_S or (start.tm_year, start.tm_yday) != (end.tm_year,
                                                                                                  end.tm_yday)
    return time.strftime("%a %d %b %H:%M" if dated else "%H:%M:%S", time.localtime(time_s))


def share_text(label: str, share: float) -> str:
    """A lane cause in the hover readout with its share of the time under the cursor: "HW thermal 1.5 %"."""
    pct = 100.0 * share
    shown = "<0.1" if pct < 0.05 else f"{pct:.1f}" if pct < 9.95 else f"{pct:.0f}"
    return f"{label} {shown} %"


def limit_text(label: str, value: float, unit: str) -> str:
    """A limit line's label: "slowdown 87 °C", "power limit 150 W"."""
    return f"{label} {value:,.0f} {unit}".strip()


def min_span_range(low: float, high: float, span: float) -> tuple[float, float]:
    """``(low, high)`` widened about its middle to at least ``span`` (unchanged when already as tall)."""
    if high - low >= span:
        return low, high
    middle = (low + high) / 2.0
    return middle - span / 2.0, middle + span / 2.0


def nearest_index(times: FloatArray, time_s: float) -> int | None:
    """The index of the sample nearest ``time_s`` in the ascending ``times``; None when there is none within
    ``NEAREST_REACH_S`` of its ends."""
    if times.size == 0 or time_s < times[0] - NEAREST_REACH_S or time_s > times[-1] + NEAREST_REACH_S:
        return None
    i = int(np.searchsorted(times, time_s))
    if i >= times.size:
        return times.size - 1
    if i > 0 and time_s - times[i - 1] < times[i] - time_s:
        return i - 1
    return i


def peak_downsample(time_s: FloatArray, values: FloatArray, factor: int) -> tuple[FloatArray, FloatArray]:
    """pyqtgraph's "peak" downsampling: per block of ``factor`` points its max then its min, at the block's
    middle time (a block holding a NaN is NaN, a gap); a trailing part block is dropped."""
    n = time_s.size // factor
    x = np.repeat(time_s[factor // 2:factor // 2 + n * factor:factor], 2)
    blocks = values[:n * factor].reshape(n, factor)
    y = np.empty((n, 2))
    y[:, 0] = blocks.max(axis=1)
    y[:, 1] = blocks.min(axis=1)
    return x, y.reshape(n * 2)


def finite_bounds(values: FloatArray) -> tuple[float, float]:
    """The least and greatest finite value; NaN, NaN when there is none (the view box then ignores the axis)."""
    if values.size == 0:
        return math.nan, math.nan
    low, high = float(np.fmin.reduce(values)), float(np.fmax.reduce(values))
    if math.isinf(low) or math.isinf(high):
        finite = values[np.isfinite(values)]
        if finite.size == 0:
            return math.nan, math.nan
        low, high = float(finite.min()), float(finite.max())
    return low, high


def slid_ends(x: FloatArray, y: FloatArray, new_x: FloatArray,
              new_y: FloatArray) -> list[tuple[float, float]] | None:
    """Where the picture changed when the data only slid along (points gone at its start, come at its end, the
    rest the same): the x spans of the segments that went and came. None for any other change."""
    if x.size < 2 or new_x.size < 2:
        return None
    k = int(np.searchsorted(x, new_x[0]))
    if k >= x.size or x[k] != new_x[0]:
        return None
    kept = x.size - k
    if kept < 2 or kept > new_x.size or not (np.array_equal(x[k:], new_x[:kept])
                                             and np.array_equal(y[k:], new_y[:kept], equal_nan=True)):
        return None
    spans = []
    if k > 0:
        spans.append((float(x[0]), float(new_x[0])))
    if new_x.size > kept:
        spans.append((float(x[-1]), float(new_x[-1])))
    return spans
