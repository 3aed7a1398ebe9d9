"""Why a judged run fell: each cause's share of the load, the slowdown that appeared, when the fall began, its cause.

Pure numpy, the cause finding of the throttle verdict (``advisor.verdict.judge`` measures the fall,
this module names what held the clocks). The driver's own record wins where the trace has one
(NVML's per-cause counters or the reason bits, ``advisor.causes``): the cause that became more common
when the signal fell, and the onset moved back to when it appeared. Older logs without reason bits
are read from the temperature and the power against their limits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from advisor.causes import CAUSE_BITS, SLOWDOWN_CAUSES, SLOWDOWN_MIN_SHARE, Cause, CauseTimes, VerdictCause
from advisor.verdict_model import RunTrace

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class JudgedRun:
    """The pieces of one judged run, shared by ``judge`` and the cause finding below."""

    rel: FloatArray  # seconds since the first loaded sample
    interval_s: FloatArray
    loaded: BoolArray
    signal: FloatArray  # NaN outside the load
    smooth: FloatArray
    reference: BoolArray  # the early window the peak is read from
    end: BoolArray  # the last third
    warmup_s: float
    causes: CauseTimes | None


def cause_shares(run: JudgedRun) -> tuple[dict[VerdictCause, float], dict[Cause, float]]:
    """(share of the load time, seconds under load) per cause; reasons outside the load do not count."""
    if run.causes is None:
        return {}, {}
    shares: dict[VerdictCause, float] = {c: run.causes.share(c, run.loaded, run.interval_s) for c in CAUSE_BITS}
    seconds = {c: run.causes.seconds(c, run.loaded, run.interval_s) for c in CAUSE_BITS}
    return shares, seconds


def unexplained_share(run: JudgedRun, slow: BoolArray) -> float:
    """Share of the load time that was slow with no throttle reason at all."""
    total = float(np.sum(run.interval_s[run.loaded]))
    if total <= 0:
        return 0.0
    unexplained = slow & run.loaded
    if run.causes is not None:
        for cause in CAUSE_BITS:
            unexplained &= ~run.causes.on(cause)
    return float(np.sum(run.interval_s[unexplained])) / total


def slowdown_cause(shares: Mapping[VerdictCause, float]) -> Cause | None:
    """The thermal / HW slowdown that appeared under load long enough to count, if any."""
    present = {c: shares.get(c, 0.0) for c in SLOWDOWN_CAUSES if shares.get(c, 0.0) >= SLOWDOWN_MIN_SHARE}
    if not present:
        return None
    largest: Cause = max(present, key=lambda c: present[c])
    return largest


def first_on(run: JudgedRun, cause: Cause) -> float | None:
    """When a cause first showed under load: the first sample whose counter grew (or whose bit was set)."""
    assert run.causes is not None
    hits = np.flatnonzero(run.causes.on(cause) & run.loaded)
    return float(run.rel[hits[0]]) if hits.size else None


def fall_onset(run: JudgedRun, peak: float) -> float | None:
    """When the fall began: the first persistent drop below the early level, moved back to the reason behind it."""
    smooth, reference = run.smooth, run.reference
    # The plateau is the typical early level; the peak sits above the noise and would pull onset early.
    plateau = float(np.nanmedian(smooth[reference])) if np.isfinite(smooth[reference]).any() else peak
    early = smooth[reference & np.isfinite(smooth)]
    noise_band = 1.4826 * float(np.median(np.abs(early - plateau))) if early.size else 0.0
    below = np.isfinite(smooth) & (smooth < 0.97 * plateau) & (run.rel >= run.warmup_s)
    # Persistent: the first slow sample after which the median stays slow for most of the next 30 samples.
    candidates = np.flatnonzero(below)
    if not candidates.size:
        return None
    first = next((int(i) for i in candidates if below[i:i + 30].mean() >= 0.5), int(candidates[0]))
    onset_index = first
    # The median lags the true change and the fall may be gradual: walk back to the last sample
    # at plateau level (within the noise seen on the plateau).
    while (onset_index > 0 and first - onset_index < 30 and smooth[onset_index - 1] < plateau - noise_band
           and not reference[onset_index - 1]):
        onset_index -= 1
    if run.causes is not None:
        new = np.zeros(smooth.shape[0], dtype=bool)
        for cause in CAUSE_BITS:
            on = run.causes.on(cause)
            if not (on & reference).any():  # a cause already there early did not start the fall
                new |= on
        lookback = np.flatnonzero((new & run.loaded)[max(0, first - 15):first + 1])
        if lookback.size:
            # The driver's own record of when it started holding clocks beats any estimate from the signal.
            onset_index = max(0, first - 15) + int(lookback[0])
    return float(run.rel[onset_index])


def fall_cause(trace: RunTrace, run: JudgedRun, shares: Mapping[VerdictCause, float], peak: float, *,
               onset: float | None, dropped: bool, slowdown: Cause | None) -> VerdictCause | None:
    """The reason behind a fall (the one that became more common when the signal fell), else what held the clocks."""
    slow = run.loaded & np.isfinite(run.smooth) & (run.smooth < 0.97 * peak)
    if onset is not None:
        slow &= run.rel >= onset
    if run.causes is not None:
        if dropped and slow.any():
            scores = {c: run.causes.share(c, slow, run.interval_s) - run.causes.share(c, run.reference, run.interval_s)
                      for c in CAUSE_BITS}
            best = max(scores, key=lambda k: scores[k])
            if scores[best] > 0.05:
                return best
            if slowdown is not None:
                return slowdown
            # The cap held the clock all along and the clock sank under it (a hotter chip leaks more per MHz).
            return "power_cap" if run.causes.share("power_cap", slow, run.interval_s) >= 0.5 else "unexplained"
        # Held its speed: ``judge`` names the cap when ``power_cap`` finds the run power-limited.
        return slowdown
    if not dropped or not slow.any():
        return None
    # No reason bits (older logs): infer from temperature and power against their limits.
    if trace.temperature_c is not None and trace.temp_slowdown_c:
        hot = trace.temperature_c[slow]
        if np.isfinite(hot).any() and np.nanmedian(hot) >= trace.temp_slowdown_c - 2.0:
            return "sw_thermal"
    if trace.power_w is not None and trace.power_limit_w:
        draw = trace.power_w[slow]
        if np.isfinite(draw).any() and np.nanmedian(draw) >= 0.97 * trace.power_limit_w:
            return "power_cap"
    return "unexplained"

