"""What NVML's GPM would measure on a simulated Hopper (profiles with ``gpm = true``), from the model's state.

The simulated H100 answers GPM as a real one does, so the measured-activity path (the effective load
"measured", the exporter's ``DCGM_FI_PROF_*`` gauges) runs without a Hopper. From the model: SM activity
and the graphics engine's are the load (the share of time kernels keep the SMs busy), the tensor pipes
are busy for its compute-bound share (the demand's intensity: 1 for a dense GEMM, ~0.35 for a
memory-bound job) and DRAM for its memory-controller share. Works on floats and on numpy columns
alike (``trace``).
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

from desktop.telemetry.model import GpmActivity

Value = TypeVar("Value", float, npt.NDArray[np.float64])


def _pct(share: Value) -> Value:
    return np.clip(np.round(100.0 * share, 1), 0.0, 100.0)  # type: ignore[no-any-return]


def sm_active_pct(load: Value) -> Value:
    """SM activity (NVML_GPM_METRIC_SM_UTIL), 0-100 %, from the model's load (0-1)."""
    return _pct(load)


def activity(load: float, intensity: float, mem_util: float) -> GpmActivity:
    """One GPM sample of a simulated GPU: SM, tensor-pipe, DRAM and graphics-engine activity in %."""
    busy = float(sm_active_pct(load))
    return GpmActivity(sm_active_pct=busy, tensor_active_pct=float(_pct(load * intensity)),
                       dram_active_pct=float(_pct(load * mem_util)), graphics_active_pct=busy)
