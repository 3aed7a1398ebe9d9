"""How much of each sample interval a GPU spent under each throttle cause, from NVML's counters or the reason bits.

Pure numpy, for the verdict. NVML counts the time under each clock-event reason (the
``clock_event_*_s`` GpuSample fields hold the seconds since the previous sample); a 1 Hz
reason mask only says whether a reason was set at the instant of the sample, so it misses
short episodes and overstates brief ones. Each cause uses its counter where the counter
has a value and falls back to its bit sample by sample, so a driver that reports some
counters and not others, or none (today's stored data), still works.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from advisor.clock_events import CAUSE_ROWS, Cause, ClockEventReason, ReasonFamily, ReasonRow

__all__ = ["CAUSE_BITS", "CAUSE_COUNTER_FIELDS", "CAUSE_FAMILY", "CAUSE_LABELS", "CAUSE_REASONS", "SLOWDOWN_CAUSES",
           "Cause", "CauseFamily", "CauseTimes", "CauseTiming", "VerdictCause", "cause_times", "reason_bits",
           "sample_intervals"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: A verdict's cause: one of the driver's (``Cause``, a row of advisor/clock_events.py's table), or
#: "unexplained" (slow under load with no reason set).
VerdictCause = Cause | Literal["unexplained"]
#: The coarse family a cause belongs to (``ClockEventReason.family``, and "unexplained").
CauseFamily = Literal[ReasonFamily, "unexplained"]
#: Where the time under each cause came from: NVML's counters, the 1 Hz reason bits, or neither.
CauseTiming = Literal["counters", "samples", "none"]


def _cause(row: ReasonRow) -> Cause:
    assert row.cause is not None  # CAUSE_ROWS holds only rows with a cause
    return row.cause


#: The verdict's causes, in the order they are reported, each with the reason that stands for it.
CAUSE_REASONS: dict[Cause, ClockEventReason] = {_cause(row): row.reason for row in CAUSE_ROWS}
CAUSE_BITS: dict[Cause, int] = {cause: int(reason) for cause, reason in CAUSE_REASONS.items()}
#: GpuSample fields with NVML's exact seconds under a cause since the previous sample (None / NaN: unsupported).
CAUSE_COUNTER_FIELDS: dict[Cause, str] = {
    _cause(row): row.counter.field for row in CAUSE_ROWS if row.counter is not None}
#: Causes that are throttling whenever they appear under load; the SW power cap alone is not
#: (a GEMM at its power limit is the normal state of a datacenter GPU).
SLOWDOWN_CAUSES: tuple[Cause, ...] = tuple(_cause(row) for row in CAUSE_ROWS if row.slowdown)
#: A thermal / HW slowdown under load for at least this share of the load time makes the run throttled
#: (and is named in its sentence).
SLOWDOWN_MIN_SHARE = 0.02
#: "Unexplained": slow under load with no reason set; not a reason bit, so it is named here.
CAUSE_LABELS: dict[VerdictCause, str] = {
    **{cause: reason.phrase for cause, reason in CAUSE_REASONS.items()},
    "unexplained": "unexplained slowdown",
}
#: The coarse cause family each detailed cause belongs to ("thermal", "power", ...).
CAUSE_FAMILY: dict[VerdictCause, CauseFamily] = {
    **{_cause(row): row.family or "hw_slowdown" for row in CAUSE_ROWS},
    "unexplained": "unexplained",
}


@dataclass(frozen=True)
class CauseTimes:
    """Per sample, the share (0-1) of the interval before it spent under each cause."""

    fraction: dict[Cause, FloatArray]
    #: "counters" when any cause came from NVML's counters, "samples" from reason bits only.
    timing: Literal["counters", "samples"]

    def on(self, cause: Cause) -> BoolArray:
        """Samples during which the cause was active at all."""
        return self.fraction[cause] > 0.0

    def seconds(self, cause: Cause, mask: BoolArray, interval_s: FloatArray) -> float:
        return float(np.sum(self.fraction[cause][mask] * interval_s[mask]))

    def share(self, cause: Cause, mask: BoolArray, interval_s: FloatArray) -> float:
        """Share of the time in ``mask`` spent under ``cause``."""
        total = float(np.sum(interval_s[mask]))
        return self.seconds(cause, mask, interval_s) / total if total > 0 else 0.0


def sample_intervals(time_s: FloatArray) -> FloatArray:
    """Seconds each sample stands for: the gap since the previous one, capped at twice the usual step.

    The cap keeps a hole in a log (the logger stopped) from counting as time under load.
    """
    n = time_s.shape[0]
    if n < 2:
        return np.ones(n)
    gaps = np.diff(time_s)
    step = float(np.median(gaps))
    step = step if step > 0 else 1.0
    intervals: FloatArray = np.minimum(np.concatenate([[step], np.where(gaps > 0, gaps, step)]), 2.0 * step)
    return intervals


def reason_bits(reasons: FloatArray | None, n: int) -> npt.NDArray[np.int64] | None:
    """The reason masks as integers (unknown = 0), or None when the trace has none."""
    if reasons is None or not np.isfinite(reasons).any():
        return None
    return np.where(np.isfinite(reasons), reasons, 0.0).astype(np.int64)[:n]


def cause_times(reasons: FloatArray | None, counters: Mapping[Cause, FloatArray] | None,
                interval_s: FloatArray) -> CauseTimes | None:
    """The share of each interval under each cause; None when the trace has neither bits nor counters."""
    n = interval_s.shape[0]
    bits = reason_bits(reasons, n)
    counters = counters or {}
    used_counters = False
    fraction: dict[Cause, FloatArray] = {}
    for cause, bit in CAUSE_BITS.items():
        from_bits = ((bits & bit) != 0).astype(np.float64) if bits is not None else np.zeros(n)
        counted = counters.get(cause)
        if counted is not None and np.isfinite(counted).any():
            used_counters = True
            exact = np.clip(np.asarray(counted, dtype=np.float64)[:n] / interval_s, 0.0, 1.0)
            fraction[cause] = np.where(np.isfinite(exact), exact, from_bits)
        else:
            fraction[cause] = from_bits
    if bits is None and not used_counters:
        return None
    return CauseTimes(fraction=fraction, timing="counters" if used_counters else "samples")
