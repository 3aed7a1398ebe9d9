"""Effective load: how hard a GPU works, estimated from power and SM clock against its own full-load calibration.

NVML's utilization only says that some kernel ran during the sample period; a memory-bound
or data-starved job shows 100 % at a third of the power. Where the GPU exposes no SM-activity
counter (every GeForce before Blackwell), the honest answer is an estimate:

    P_full(f) = P_idle + (P_full - P_idle) * (f / f_full)^3     (dynamic power ~ f·V², V ~ f)
    effective = clip((P - P_idle) / (P_full(f) - P_idle), 0, 1) * 100 %, never above utilization

with ``P_full`` the power the GPU drew under a compute-bound load at the clock ``f_full``:
from its own stress run (mean power and clock at its sustained TFLOP/s) once one exists, from
the datasheet until then. Pure numpy: the sampler, the simulator and the advisor share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
CalibrationSource = Literal["datasheet", "stress run"]

#: Below this share of the calibration clock the cube law is not trusted: the voltage sits at
#: its floor there, so power falls only ~linearly with the clock, and the denominator would vanish.
MIN_CLOCK_RATIO = 0.3


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
        """``"stress run: 148 W at 1,905 MHz (61.2 TFLOP/s)"`` for tooltips and evidence."""
        rate = f" ({self.tflops:,.1f} TFLOP/s)" if self.tflops else ""
        return f"{self.source}: {self.full_w:,.0f} W at {self.full_clock_mhz:,.0f} MHz{rate}"


def estimate_array(cal: Calibration, power_w: npt.ArrayLike, sm_clock_mhz: npt.ArrayLike,
                   utilization_pct: npt.ArrayLike) -> FloatArray:
    """Effective load in % per sample (NaN where power is missing); clock/utilization may be NaN."""
    power = np.asarray(power_w, dtype=np.float64)
    clock = np.asarray(sm_clock_mhz, dtype=np.float64)
    util = np.asarray(utilization_pct, dtype=np.float64)
    ratio = np.where(np.isfinite(clock), np.maximum(clock / cal.full_clock_mhz, MIN_CLOCK_RATIO), 1.0)
    full_dynamic = (cal.full_w - cal.idle_w) * ratio ** 3
    pct = np.clip((power - cal.idle_w) / full_dynamic, 0.0, 1.0) * 100.0
    # A GPU cannot be busier than the share of time a kernel ran (this also zeroes idle noise).
    pct = np.where(np.isfinite(util), np.minimum(pct, util), pct)
    return np.asarray(np.where(np.isfinite(power), pct, np.nan), dtype=np.float64)


def estimate(cal: Calibration, power_w: float | None, sm_clock_mhz: float | None,
             utilization_pct: float | None) -> float | None:
    """One sample's effective load in %, or None without a power reading."""
    if power_w is None:
        return None
    nan = float("nan")
    value = float(estimate_array(cal, power_w, nan if sm_clock_mhz is None else sm_clock_mhz,
                                 nan if utilization_pct is None else utilization_pct))
    return round(value, 1)


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
