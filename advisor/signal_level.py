"""The level of a noisy performance signal: a rolling median, a stretch's typical level, its best sustained level.

Pure numpy, for the throttle verdict (``advisor.verdict``), which reads every decision from these so
that single noisy samples cannot trigger one. Each works on a 7 ms log's hundreds of thousands of
samples in bounded memory and time as on a 1 Hz stress run's few hundred.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: At most this many values are copied out of the log at once (8 MiB): a 7 ms log's 5 s window is 714
#: samples, and one rows x window copy of a 199k-row log was 1.17 GB.
_CHUNK_VALUES = 1 << 20
#: A window this long is evaluated every window/16 samples and held in between (a 5 s median moves
#: little in 0.3 s); shorter windows (a 1 Hz log's 5 samples) are exact at every sample.
_STRIDE_PARTS = 16


def _nanmedian_rows(rows: FloatArray) -> FloatArray:
    """``np.nanmedian(rows, axis=1)`` without its per-row overhead: sort (NaN last), pick the middle of the finite."""
    ordered = np.sort(rows, axis=1)
    count = np.count_nonzero(np.isfinite(rows), axis=1)
    pick = np.arange(rows.shape[0])
    low = np.maximum(count - 1, 0) // 2
    high = np.where(count > 0, count // 2, 0)
    out: FloatArray = (ordered[pick, low] + ordered[pick, high]) / 2.0
    out[count == 0] = np.nan
    return out


def rolling_median(values: FloatArray, window: int) -> FloatArray:
    """Centred rolling median that ignores NaN (edges use the samples available), in bounded memory."""
    n = values.shape[0]
    if n == 0 or window <= 1:
        return values.copy()
    half = window // 2
    width = 2 * half + 1
    padded = np.concatenate([np.full(half, np.nan), np.asarray(values, dtype=np.float64), np.full(half, np.nan)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, width)  # a view: nothing copied yet
    stride = max(1, width // _STRIDE_PARTS)
    centres = np.arange(0, n, stride)
    medians = np.empty(centres.shape[0])
    chunk = max(1, _CHUNK_VALUES // width)
    for lo in range(0, centres.shape[0], chunk):
        medians[lo:lo + chunk] = _nanmedian_rows(windows[centres[lo:lo + chunk]])
    if stride == 1:
        return medians
    nearest = np.minimum(np.rint(np.arange(n) / stride).astype(np.int64), centres.shape[0] - 1)
    out: FloatArray = medians[nearest]
    return out


def level(values: FloatArray) -> float:
    """The typical level of a stretch: a 10 % trimmed mean of its finite values.

    Not the median: under a power cap the clock is bimodal (capped / not capped, 15 MHz steps),
    and a median jumps between the modes when their shares are near even; a mean of the middle
    80 % is steady and still ignores spikes.
    """
    finite = np.sort(values[np.isfinite(values)])
    if not finite.size:
        return math.nan
    cut = int(finite.size * 0.1)
    return float(np.mean(finite[cut:finite.size - cut]))


def best_level(signal: FloatArray, mask: BoolArray, window: int) -> float:
    """The best sustained level inside ``mask``: the highest ``level`` of any ``window`` consecutive samples there."""
    positions = np.flatnonzero(mask)
    if not positions.size:
        return math.nan
    # A fast log's 45 s window is thousands of samples: its start every 1/64 of a window is enough.
    positions = positions[::max(1, window // 64)]
    half = window // 2
    levels = [level(signal[max(0, i - half):i + window - half]) for i in positions]
    return float(np.nanmax(levels)) if np.isfinite(levels).any() else math.nan
