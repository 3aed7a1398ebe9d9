"""Effective load: how hard a GPU works, estimated from power and SM clock against its own full-load calibration.

NVML's utilization only says that some kernel ran during the sample period; a memory-bound
or data-starved job shows 100 % at a third of the power. Where the GPU exposes no SM-activity
counter (every GeForce before Blackwell), the honest answer is an estimate, and only against
the GPU's own stress run (``desktop.telemetry.effective_load``: no datasheet guesses for a real
GPU; an unknown Ada card read 100 % above ~45 % of its limit before its first run):

    P_full(f) = P_idle + (P_full - P_idle) * (f / f_full)^3     (dynamic power ~ f·V², V ~ f)
    effective = clip((P - P_idle) / (P_full(f) - P_idle), 0, 1) * 100 %, never above utilization

with ``P_full`` the power the GPU drew under a compute-bound load at the clock ``f_full``. Two
places where that law says nothing, kept out by construction:

- **at the power cap** (the SW power cap bit set, or the averaged power at 95 % of the enforced
  limit, within the last few samples) the limit holds the power and the clock is what gives:
  the load is power-bound, which no memory-bound or starved job is, so it reads its utilization.
  Judged by the law alone, compute-bound H800 GEMMs read 42-64 % on real data, and a sample after
  a cap dip (640 W at 1965 MHz) under 70 % of its own run's calibration;
- **below half the calibration clock** the voltage sits at its floor and power falls about
  linearly, not as the cube: any load there read 100 % (the old floor of 0.3 made the full-load
  power vanish). No estimate is given there (NaN), except 0 where no kernel ran.

The estimate is uncertain by about ``UNCERTAINTY_PCT``: the power of the same compute-bound work
depends on its data (an H100 PCIe GEMM: 281 W on all-zero data, 348 W on worst-case data).
Pure numpy: the sampler, the simulator and the advisor share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
CalibrationSource = Literal["datasheet", "stress run"]

#: Below this share of the calibration clock the cube law is not trusted: the voltage sits at
#: its floor there, so power falls only ~linearly with the clock. No estimate there.
MIN_CLOCK_RATIO = 0.5
#: The power cap binds at this share of the enforced limit (averaged power), as in the stress verdict.
AT_LIMIT_SHARE = 0.95
#: How far the estimate can be off (percentage points), shown beside it: the same compute-bound
#: GEMM draws 19 % less on all-zero data than on worst-case data (H100 PCIe: 281 vs 348 W).
UNCERTAINTY_PCT = 20.0
#: The cap binds over seconds, not at an instant: a sample within this many samples after one where it
#: bound counts as capped (between cap events a GEMM's 1 s power average dips, an H800 to 640 of 700 W).
CAP_HOLD_SAMPLES = 5
#: The SW power cap clock-event bit (advisor.clock_events.ClockEventReason.SW_POWER_CAP).
_SW_POWER_CAP = 0x4
#: An unknown card idles at about this share of its power limit (RTX 4090 Laptop 12 of 150 W,
#: RTX 4090 22 of 450 W, H100 70 of 700 W) ...
UNKNOWN_IDLE_SHARE = 0.08
#: ... and a compute-bound load at its limit runs about this far below the top of its V/F curve.
UNKNOWN_CLOCK_SHARE = 0.9


@dataclass(frozen=True, slots=True)
class Calibration:
    """What one GPU draws at full compute load: ``full_w`` at ``full_clock_mhz``, ``idle_w`` at rest."""

    idle_w: float
    full_w: float
    full_clock_mhz: float
    source: CalibrationSource = "datasheet"
    #: The throughput the calibrating load sustained (a stress run's TFLOP/s; the datasheet peak).
    tflops: float | None = None

    def __post_init__(self) -> None:
        if not (self.full_w > self.idle_w >= 0.0 and self.full_clock_mhz > 0.0):
            raise ValueError(f"unusable calibration: idle {self.idle_w} W, full {self.full_w} W "
                             f"at {self.full_clock_mhz} MHz")

    def describe(self) -> str:
        """``"estimated ±20 % against its stress run: 148 W at 1,905 MHz (61.2 TFLOP/s)"`` for tooltips and evidence."""
        rate = f" ({self.tflops:,.1f} TFLOP/s)" if self.tflops else ""
        return (f"estimated ±{UNCERTAINTY_PCT:.0f} % against its {self.source}: {self.full_w:,.0f} W at "
                f"{self.full_clock_mhz:,.0f} MHz{rate}")


def rough_calibration(power_limit_w: float | None, sm_clock_max_mhz: float | None) -> Calibration | None:
    """A datasheet-like calibration of a card no profile knows, from its power limit and max clock (None
    without both): idle at ``UNKNOWN_IDLE_SHARE`` of the limit, full load at the limit and
    ``UNKNOWN_CLOCK_SHARE`` of the max clock. A rough guess (it read an unknown Ada card, 3105 MHz max, at
    100 % above ~45 % of its limit): a real GPU's live estimate waits for its own stress run."""
    if not power_limit_w or not sm_clock_max_mhz:
        return None
    return Calibration(power_limit_w * UNKNOWN_IDLE_SHARE, power_limit_w, sm_clock_max_mhz * UNKNOWN_CLOCK_SHARE,
                       "datasheet")


def at_power_cap(clock_event_reasons: int | None, power_w: float | None, power_limit_w: float | None) -> bool:
    """Whether the power cap binds in one sample: the SW power cap bit is set, or the averaged power is at
    ``AT_LIMIT_SHARE`` of the enforced limit (as ``estimate_array`` judges each sample)."""
    if (clock_event_reasons or 0) & _SW_POWER_CAP:
        return True
    return (power_w is not None and power_limit_w is not None and power_limit_w > 0
            and power_w >= AT_LIMIT_SHARE * power_limit_w)


def estimate_array(cal: Calibration, power_w: npt.ArrayLike, sm_clock_mhz: npt.ArrayLike,
                   utilization_pct: npt.ArrayLike, *, power_limit_w: float | npt.ArrayLike | None = None,
                   clock_event_reasons: npt.ArrayLike | None = None,
                   hold_samples: int = CAP_HOLD_SAMPLES) -> FloatArray:
    """Effective load in % per sample (NaN where power is missing or the clock under half the calibration's).

    ``power_limit_w`` (the enforced limit: one value, or the limit in force at each sample, NaN where
    unknown, as it moves on laptops) and ``clock_event_reasons`` (the raw masks) tell where the power
    cap binds: there, and ``hold_samples`` samples after, the reading is its utilization (see the
    module docstring).
    """
    power = np.asarray(power_w, dtype=np.float64)
    clock = np.asarray(sm_clock_mhz, dtype=np.float64)
    util = np.asarray(utilization_pct, dtype=np.float64)
    ratio = np.where(np.isfinite(clock), clock / cal.full_clock_mhz, 1.0)
    full_dynamic = (cal.full_w - cal.idle_w) * np.maximum(ratio, MIN_CLOCK_RATIO) ** 3
    pct = np.clip((power - cal.idle_w) / full_dynamic, 0.0, 1.0) * 100.0
    pct = np.where(ratio < MIN_CLOCK_RATIO, np.nan, pct)
    capped = np.zeros(np.broadcast(power, clock).shape, dtype=bool)
    if power_limit_w is not None:
        limit = np.asarray(power_limit_w, dtype=np.float64)
        known = np.isfinite(limit) & (limit > 0)
        capped |= known & (power >= AT_LIMIT_SHARE * np.where(known, limit, np.inf))
    if clock_event_reasons is not None:
        reasons = np.asarray(clock_event_reasons, dtype=np.float64)
        capped |= (np.where(np.isfinite(reasons), reasons, 0.0).astype(np.int64) & _SW_POWER_CAP) != 0
    if capped.ndim == 1 and capped.size > 1 and hold_samples > 1:
        counts = np.cumsum(np.concatenate([[0], capped.astype(np.int64)]))
        start = np.maximum(np.arange(capped.size) + 1 - hold_samples, 0)
        capped = counts[np.arange(capped.size) + 1] - counts[start] > 0
    pct = np.where(capped, 100.0, pct)
    # A GPU cannot be busier than the share of time a kernel ran (this also zeroes idle noise).
    pct = np.where(np.isfinite(util), np.where(np.isfinite(pct), np.minimum(pct, util), np.where(util <= 0, 0.0, pct)),
                   pct)
    return np.asarray(np.where(np.isfinite(power), pct, np.nan), dtype=np.float64)


def estimate(cal: Calibration, power_w: float | None, sm_clock_mhz: float | None,
             utilization_pct: float | None, *, power_limit_w: float | None = None,
             clock_event_reasons: int | None = None) -> float | None:
    """One sample's effective load in %, or None without a power reading or below half the calibration clock."""
    if power_w is None:
        return None
    nan = float("nan")
    value = float(estimate_array(cal, power_w, nan if sm_clock_mhz is None else sm_clock_mhz,
                                 nan if utilization_pct is None else utilization_pct, power_limit_w=power_limit_w,
                                 clock_event_reasons=None if clock_event_reasons is None else clock_event_reasons))
    return round(value, 1) if np.isfinite(value) else None


def from_stress_run(idle_w: float, power_w: npt.ArrayLike, sm_clock_mhz: npt.ArrayLike,
                    sustained_tflops: float | None, *, settle_share: float = 0.5) -> Calibration | None:
    """A calibration from a stress run's series: mean power and clock over its settled part.

    The first ``settle_share`` of the run is skipped (clocks start at boost, power has not
    met its limit yet). None when the run has no usable power or clock reading.
    """
    power = np.asarray(power_w, dtype=np.float64)
    clock = np.asarray(sm_clock_mhz, dtype=np.float64)
    n = min(power.size, clock.size)
    tail = slice(int(n * settle_share), n)
    p, f = power[tail], clock[tail]
    ok = np.isfinite(p) & np.isfinite(f) & (f > 0)
    if not ok.any():
        return None
    full_w, full_clock = float(np.mean(p[ok])), float(np.mean(f[ok]))
    if full_w <= idle_w * 1.2:  # barely above idle: the workload never loaded the GPU
        return None
    return Calibration(idle_w, full_w, full_clock, "stress run", sustained_tflops)
