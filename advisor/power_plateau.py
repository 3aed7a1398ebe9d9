"""A power limit seen in the shape of a log that names none: power flat for most of the load, the clock held down.

Pure numpy, for ``power_cap`` when no limit is known (no limit column, no ``--power-limit``, a GPU
name no datasheet knows). A load whose power sits on a plateau while its SM clock is below where it
started (a GEMM that boosts for a few seconds, then meets the cap), or dithers under a flat power
(the cap trading clock for power each second), is held at a power limit near that plateau. A load
that draws flat power at a flat clock (a fixed-clock, memory-bound or light load) is not: nothing
holds it back.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: A sample is on the plateau within this share of its level ...
PLATEAU_BAND = 0.03
#: ... and the plateau holds "most of the load": at least this share of the loaded samples.
PLATEAU_MIN_SHARE = 0.7
#: At least this many loaded samples with both power and clock.
PLATEAU_MIN_SAMPLES = 20
#: The clock on the plateau at or below this share of its early level = held down ...
CLOCK_BELOW_EARLY = 0.95
#: ... the early level: the 90th percentile of the clock over this first share of the load.
EARLY_SHARE = 0.15
#: Or the clock moving at least this much (10th-90th percentile over its median) on the plateau.
PLATEAU_CLOCK_SPREAD = 0.05


def _spread(values: FloatArray) -> float:
    """10th-90th percentile range over the median (0 for a constant)."""
    low, mid, high = np.percentile(values, [10.0, 50.0, 90.0])
    return float((high - low) / mid) if mid > 0 else 0.0


def plateau_level_w(power_w: FloatArray, sm_clock_mhz: FloatArray | None, loaded: BoolArray) -> float | None:
    """The plateau's power (W, the median of the samples on it) when the load was held at a limit there, else None."""
    if sm_clock_mhz is None:
        return None
    n = loaded.shape[0]
    power = np.asarray(power_w, dtype=np.float64)[:n]
    clocks = np.asarray(sm_clock_mhz, dtype=np.float64)[:n]
    both = np.flatnonzero(loaded & np.isfinite(power) & np.isfinite(clocks) & (clocks > 0) & (power > 0))
    if both.size < PLATEAU_MIN_SAMPLES:
        return None
    level = float(np.median(power[both]))
    on = both[np.abs(power[both] - level) <= PLATEAU_BAND * level]
    if on.size < PLATEAU_MIN_SHARE * both.size:
        return None
    early = clocks[both[:max(3, round(EARLY_SHARE * both.size))]]
    held_down = float(np.median(clocks[on])) <= CLOCK_BELOW_EARLY * float(np.percentile(early, 90.0))
    if not held_down and _spread(clocks[on]) < PLATEAU_CLOCK_SPREAD:
        return None
    return float(np.median(power[on]))
