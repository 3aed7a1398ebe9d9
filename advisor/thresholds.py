"""The advisor's thresholds: the ``[advisor]`` section of the settings is this very class."""

from __future__ import annotations

from dataclasses import dataclass

#: The default of ``[advisor] busy_util_pct``: above this utilization (%) a second can be busy
#: (advisor/busy.py, which re-exports it).
DEFAULT_BUSY_UTIL_PCT = 10.0

# The temperature guards' defaults (advisor/guard.py re-exports them) live here, so that the settings
# read them without importing the guards' logic.

#: The stress test's default guard is this far above the GPU's slowdown temperature (``[stress] guard_offset_c``).
DEFAULT_GUARD_OFFSET_C = 5.0
#: The job's guard lets it run again this far below the limit (``[jobs] guard_resume_offset_c``).
DEFAULT_RESUME_OFFSET_C = 5.0
#: A job's pause lasts at least this long, and it runs at least this long after a resume (``[jobs]``).
DEFAULT_MIN_PAUSE_S = 20.0
DEFAULT_MIN_RUN_S = 20.0


@dataclass(frozen=True)
class Thresholds:
    """When each rule fires. Defaults are the shipped ``[advisor]`` settings."""

    vram_headroom_pct: float = 10.0
    vram_tight_share_pct: float = 20.0
    low_utilization_pct: float = 70.0
    cpu_saturated_pct: float = 90.0
    thermal_share_pct: float = 5.0
    power_cap_share_pct: float = 20.0
    idle_memory_hours: float = 2.0
    idle_memory_mib: float = 1024.0
    stress_regression_pct: float = 5.0
    battery_heavy_minutes: float = 10.0
    min_busy_hours: float = 0.5
    #: A second is busy above this GPU utilization (%), with a compute process where processes are
    #: known (advisor/busy.py); a desktop's 1-5 % is not work.
    busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT
    #: The PCIe rule fires when the link runs below its maximum for this share of heavy-load time.
    pcie_low_share_pct: float = 50.0
    #: The effective-load rule: busy time at this utilization or more ...
    hollow_util_pct: float = 80.0
    #: ... while the GPU works at this share of its calibrated full load or less ...
    low_effective_load_pct: float = 50.0
    #: ... for this share of the busy time (the window, or its worst run).
    low_effective_share_pct: float = 20.0
