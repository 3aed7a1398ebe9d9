"""The simulated GpuBackend: the thermal/power model behind the same contract as the NVML backend."""

from __future__ import annotations

import getpass
from collections.abc import Sequence

from desktop.telemetry.model import GPU_METRIC_NAMES, DeviceState, GpuInfo, GpuProcess, GpuReading, SourceInfo
from desktop.telemetry.simulated.load import ManualLoad, Scenario
from desktop.telemetry.simulated.physics import SimulatedGpuModel
from desktop.telemetry.simulated.profiles import GpuProfile, profile_info


class SimulatedBackend:
    """The GpuBackend over ``SimulatedGpuModel``: same contract as the NVML backend."""

    def __init__(self, profiles: Sequence[GpuProfile], scenario: Scenario | None = None, seed: int = 0,
                 reason: str | None = None, user: str | None = None) -> None:
        self.scenario: Scenario = scenario if scenario is not None else ManualLoad()
        self.model = SimulatedGpuModel(profiles, self.scenario, seed=seed)
        self._infos = [profile_info(p, i) for i, p in enumerate(profiles)]
        names = ", ".join(p.key for p in profiles)
        self._source = SourceInfo(kind="simulated", detail=f"simulated GPU ({names})", fallback_reason=reason)
        self._user = user if user is not None else _current_user()

    @property
    def source(self) -> SourceInfo:
        return self._source

    @property
    def manual(self) -> ManualLoad | None:
        """The hand-set load, when the scenario is one (the stress runner drives it)."""
        return self.scenario if isinstance(self.scenario, ManualLoad) else None

    def devices(self) -> list[GpuInfo]:
        return list(self._infos)

    def sample(self, now_s: float) -> list[GpuReading]:
        self.model.advance(now_s)
        readings = []
        for info in self._infos:
            if self.model.is_lost(info.index):
                readings.append(GpuReading(info, DeviceState.LOST, None, "GPU is lost (simulated)"))
            else:
                readings.append(GpuReading(info, DeviceState.OK, self.model.reading(info.index)))
        return readings

    def processes(self) -> list[GpuProcess]:
        out = []
        for info in self._infos:
            if self.model.is_lost(info.index):
                continue
            for pid, name, vram in self.model.processes(info.index):
                out.append(GpuProcess(pid=pid, gpu_index=info.index, name=name, user=self._user,
                                      vram_mib=vram, kind="compute", own=True))
        return out

    def supported_metrics(self, index: int) -> dict[str, bool]:
        # From the profile, not from a reading: a reading takes the counters' interval with it.
        has_fan = self.model.profiles[index].has_fan_reading
        return {name: has_fan or name != "fan_pct" for name in GPU_METRIC_NAMES}

    def reinit(self) -> None:
        for info in self._infos:
            self.model.set_lost(info.index, False)

    def close(self) -> None:
        pass


def _current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return "user"
