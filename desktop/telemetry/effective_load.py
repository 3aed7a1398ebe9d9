"""Each GPU's full-load calibration, and the effective load the sampler adds to every reading.

The estimate itself is pure (``advisor.effective_load``). Here: which calibration a GPU gets
(its own stress run once the caller hands one in, else the datasheet figures of the matching
card in ``resources/gpu_profiles.toml``, else a rough one from the GPU's own power limit and
max clock) and filling ``GpuSample.effective_load_pct`` where the backend did not measure it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from advisor.effective_load import Calibration, estimate
from desktop.telemetry.model import DeviceState, GpuInfo, GpuReading
from desktop.telemetry.simulated.physics import profile_calibration
from desktop.telemetry.simulated.profiles import GpuProfile, load_profiles

#: An unknown card idles at about this share of its power limit (RTX 4090 Laptop 12 of 150 W,
#: RTX 4090 22 of 450 W, H100 70 of 700 W) ...
_UNKNOWN_IDLE_SHARE = 0.08
#: ... and a compute-bound load at its limit runs about this far below the top of its V/F curve.
_UNKNOWN_CLOCK_SHARE = 0.9
_SIMULATED_SUFFIX = " (simulated)"


def datasheet_calibration(info: GpuInfo, profiles: Mapping[str, GpuProfile] | None = None) -> Calibration | None:
    """The datasheet calibration of the GPU ``info`` describes; None without a power limit to go on."""
    known = load_profiles() if profiles is None else profiles
    name = info.name.removesuffix(_SIMULATED_SUFFIX).strip().casefold()
    for profile in known.values():
        if profile.name.casefold() == name:
            return profile_calibration(profile)
    limit = info.power_limit_default_w or info.power_limit_enforced_w
    if not limit or not info.sm_clock_max_mhz:
        return None
    return Calibration(limit * _UNKNOWN_IDLE_SHARE, limit, info.sm_clock_max_mhz * _UNKNOWN_CLOCK_SHARE, "datasheet")


class EffectiveLoad:
    """Adds the effective-load estimate to readings, per GPU against its calibration."""

    def __init__(self, profiles: Mapping[str, GpuProfile] | None = None) -> None:
        self._profiles = profiles
        self._datasheet: dict[str, Calibration | None] = {}
        self._own: dict[str, Calibration] = {}

    def calibrate(self, uuid: str, calibration: Calibration) -> None:
        """Use ``calibration`` (the GPU's own stress run) for GPU ``uuid`` from now on."""
        self._own[uuid] = calibration

    def calibrate_all(self, calibrations: Mapping[str, Calibration]) -> None:
        for uuid, cal in calibrations.items():
            self.calibrate(uuid, cal)

    def calibration(self, info: GpuInfo) -> Calibration | None:
        """The GPU's own stress-run calibration when it has one, else its datasheet one."""
        return self._own.get(info.uuid) or self.datasheet(info)

    def datasheet(self, info: GpuInfo) -> Calibration | None:
        if info.uuid not in self._datasheet:
            if self._profiles is None:
                self._profiles = load_profiles()
            self._datasheet[info.uuid] = datasheet_calibration(info, self._profiles)
        return self._datasheet[info.uuid]

    def apply(self, readings: Iterable[GpuReading]) -> list[GpuReading]:
        """The readings with ``effective_load_pct`` estimated where the backend left it empty."""
        return [self._with_estimate(reading) for reading in readings]

    def _with_estimate(self, reading: GpuReading) -> GpuReading:
        sample = reading.sample
        if reading.state is not DeviceState.OK or sample is None or sample.effective_load_pct is not None:
            return reading
        if reading.info.gpm_supported:
            return reading  # measured there (GPM): a tick without a measurement is n/a, never an estimate
        cal = self.calibration(reading.info)
        if cal is None:
            return reading
        value = estimate(cal, sample.power_w, sample.sm_clock_mhz, sample.utilization_gpu_pct)
        if value is None:
            return reading
        return dataclasses.replace(reading, sample=dataclasses.replace(sample, effective_load_pct=value))
