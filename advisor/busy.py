"""When is a GPU busy: the one definition, used by rollups, costs, jobs, usage and reports.

A second is busy when the GPU's utilization is above a threshold (``[advisor] busy_util_pct``,
10 % by default) and, where the driver listed the GPU's processes at that time, a compute
process was among them. Utilization > 0 is not work: a GPU that drives a desktop shows 1-5 %
all day and counted as busy 24 hours a day (own-vs-rent busy hours, energy per busy hour and a
job's busy share inflated); a display-only GPU, whose process list holds only graphics
processes (Xorg, a compositor, a game), is idle for compute accounting whatever its utilization.
Where utilization is unknown (MIG, an older driver) a compute process holding memory is the
only sign of work, and counts.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

# Defined beside the settings it is the default of, which must load without numpy (`rigscope --help`).
from advisor.thresholds import DEFAULT_BUSY_UTIL_PCT as DEFAULT_BUSY_UTIL_PCT  # noqa: PLC0414 (re-exported)

FloatArray = npt.NDArray[np.float64]


def utilization_busy(utilization_pct: npt.ArrayLike, *, threshold_pct: float = DEFAULT_BUSY_UTIL_PCT) -> FloatArray:
    """Per sample, what utilization alone says: 1.0 above the threshold, 0.0 at or below it, NaN unknown.

    The rollups store this part (as busy seconds); the processes are applied when the rows are read."""
    util = np.asarray(utilization_pct, dtype=np.float64)
    return np.where(np.isfinite(util), (util > threshold_pct).astype(np.float64), np.nan)


def with_processes(share: npt.ArrayLike, compute_present: npt.ArrayLike | None) -> FloatArray:
    """``share`` (the busy share of each row from utilization, 0-1, NaN unknown) with the process lists applied.

    ``compute_present`` per row: 1.0 a compute process was listed on the GPU, 0.0 the GPU's
    processes were listed and none was a compute process, NaN not known (no list then).
    """
    busy = np.asarray(share, dtype=np.float64)
    if compute_present is None:
        return busy
    compute = np.asarray(compute_present, dtype=np.float64)
    known = np.isfinite(compute)
    # Listed and no compute process: idle whatever the utilization says (a display-only GPU).
    busy = np.where(known & (compute <= 0.0), 0.0, busy)
    # Utilization unknown: a compute process is the only sign of work.
    out: FloatArray = np.where(~np.isfinite(busy) & known & (compute > 0.0), 1.0, busy)
    return out


def busy_share(utilization_pct: npt.ArrayLike, compute_present: npt.ArrayLike | None = None, *,
               threshold_pct: float = DEFAULT_BUSY_UTIL_PCT) -> FloatArray:
    """Per sample: 1.0 busy, 0.0 idle, NaN unknown (``with_processes`` over ``utilization_busy``)."""
    return with_processes(utilization_busy(utilization_pct, threshold_pct=threshold_pct), compute_present)
