"""Each GPU's full-load calibration, and the effective load the sampler adds to every reading.

The estimate itself is pure (``advisor.effective_load``: the law, the power-cap test, the rough
calibration of an unknown card). Here: which calibration a GPU gets and
filling ``GpuSample.effective_load_pct`` where the backend did not measure it (GPM). A real GPU
is estimated only against its own stress run, once the caller hands one in: before that its
effective load is unknown (n/a), never a guess fed to the advice. The datasheet figures of a
matching card (``resources/gpu_profiles.toml``), or a rough calibration from the power limit and
max clock, read an unknown Ada card (3105 MHz max) at 100 % above ~45 % of its limit. The
simulated GPU keeps its datasheet calibration: its power model is that very law.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from advisor.clock_events import ClockEventReason
from advisor.effective_load import CAP_HOLD_SAMPLES, Calibration, at_power_cap, estimate, rough_calibration
from desktop.telemetry.model import DeviceState, GpuInfo, GpuReading
from desktop.telemetry.simulated.physics import profile_calibration
from desktop.telemetry.simulated.profiles import GpuProfile, load_profiles

_SIMULATED_SUFFIX = " (simulated)"


def datasheet_calibration(info: GpuInfo, profiles: Mapping[str, GpuProfile] | None = None) -> Calibration | None:
    """The datasheet calibration of the GPU ``info`` describes; None without a power limit to go on."""
    known = load_profiles() if profiles is None else profiles
    name = info.name.removesuffix(_SIMULATED_SUFFIX).strip().casefold()
    for profile in known.values():
        if profile.name.casefold() == name:
            return profile_calibration(profile)
    return rough_calibration(info.power_limit_default_w or info.power_limit_enforced_w, info.sm_clock_max_mhz)


class EffectiveLoad:
    """Adds the effective-load estimate to readings, per GPU against its calibration."""

    def __init__(self, profiles: Mapping[str, GpuProfile] | None = None) -> None:
        self._profiles = profiles
        self._datasheet: dict[str, Calibration | None] = {}
        self._own: dict[str, Calibration] = {}
        #: Per GPU, how many of its latest readings ago the power cap last bound (see ``CAP_HOLD_SAMPLES``).
        self._since_cap: dict[str, int] = {}

    def calibrate(self, uuid: str, calibration: Calibration) -> None:
        """Use ``calibration`` (the GPU's own stress run) for GPU ``uuid`` from now on."""
        self._own[uuid] = calibration

    def calibrate_all(self, calibrations: Mapping[str, Calibration]) -> None:
        for uuid, cal in calibrations.items():
            self.calibrate(uuid, cal)

    def calibration(self, info: GpuInfo) -> Calibration | None:
        """The GPU's own stress-run calibration; None before its first usable run (the simulated GPU: its datasheet)."""
        own = self._own.get(info.uuid)
        if own is not None:
            return own
        return self.datasheet(info) if info.simulated else None

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
        at_cap = at_power_cap(sample.clock_event_reasons, sample.power_w, reading.info.power_limit_enforced_w)
        since = 0 if at_cap else self._since_cap.get(reading.info.uuid, CAP_HOLD_SAMPLES) + 1
        self._since_cap[reading.info.uuid] = since
        value = estimate(cal, sample.power_w, sample.sm_clock_mhz, sample.utilization_gpu_pct,
                         # the cap bound within the last few readings: it holds the power now too
                         clock_event_reasons=int(ClockEventReason.SW_POWER_CAP) if since < CAP_HOLD_SAMPLES else 0)
        if value is None:
            return reading
        return dataclasses.replace(reading, sample=dataclasses.replace(sample, effective_load_pct=value))
