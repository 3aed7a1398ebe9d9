"""A simulated GPU with a thermal/power model, for machines without an NVIDIA driver.

Physics, per GPU, advanced in steps of at most one second:
  power  P = P_idle + L * (P_demand - P_idle) * (f / f_max)^3    (dynamic power ~ f·V², V ~ f)
  clock  f = f_max * thermal_cap, cut further so that P <= limit  (SwPowerCap bit)
  temp   dT/dt = (T_ambient + R·P - T) / tau                     (first-order response)
  thermal_cap falls while T >= T_slowdown and recovers below it  (SW/HW thermal bits)
It is deterministic for a seed and the times passed to ``sample``, so tests can run a
simulated week in a second. The load comes from a scenario (``ManualLoad`` for the stress
test, ``WeekScenario`` for demo history).
"""

from __future__ import annotations

import getpass
import math
import random
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from desktop.paths import resource_path
from desktop.telemetry.model import (
    GPU_METRIC_NAMES,
    ClockEventReason,
    DeviceState,
    GpuInfo,
    GpuProcess,
    GpuReading,
    GpuSample,
    HostSample,
    SourceInfo,
)

DEFAULT_PROFILE = "rtx4090-laptop"
AMBIENT_C = 25.0
_MAX_STEP_S = 1.0
#: Beyond this gap the simulator does not integrate second by second: it settles instead.
_MAX_CATCHUP_S = 6 * 3600.0
# Plain ints for the hot loop (IntFlag arithmetic costs microseconds per operation).
_IDLE = int(ClockEventReason.GPU_IDLE)
_POWER_CAP = int(ClockEventReason.SW_POWER_CAP)
_SW_THERMAL = int(ClockEventReason.SW_THERMAL_SLOWDOWN)
_HW_THERMAL = int(ClockEventReason.HW_THERMAL_SLOWDOWN)


@dataclass(frozen=True, slots=True)
class GpuProfile:
    """A simulated GPU model, read from ``resources/gpu_profiles.toml``."""

    key: str
    name: str
    vram_total_mib: float
    power_limit_w: float
    power_limit_min_w: float
    power_limit_max_w: float
    power_limit_settable: bool
    power_idle_w: float
    power_demand_w: float
    sm_clock_max_mhz: float
    sm_clock_idle_mhz: float
    mem_clock_max_mhz: float
    mem_clock_idle_mhz: float
    temp_slowdown_c: float
    temp_shutdown_c: float
    temp_max_operating_c: float
    thermal_r_c_per_w: float
    thermal_tau_s: float
    pcie_gen_max: int
    pcie_width_max: int
    peak_bf16_tflops: float
    has_fan_reading: bool
    is_laptop: bool

    def steady_state_temp_c(self, power_w: float, ambient_c: float = AMBIENT_C) -> float:
        return ambient_c + self.thermal_r_c_per_w * power_w


def load_profiles() -> dict[str, GpuProfile]:
    """Every profile in the shipped table, by key (e.g. ``rtx4090-laptop``)."""
    with resource_path("gpu_profiles.toml").open("rb") as handle:
        table = tomllib.load(handle)["profiles"]
    return {key: GpuProfile(key=key, **values) for key, values in table.items()}


def parse_profile_list(spec: str | None) -> list[GpuProfile]:
    """``"rtx4090-laptop,rtx4090"`` -> profiles; raises ValueError naming the known keys."""
    profiles = load_profiles()
    keys = [k.strip() for k in (spec or DEFAULT_PROFILE).split(",") if k.strip()] or [DEFAULT_PROFILE]
    unknown = [k for k in keys if k not in profiles]
    if unknown:
        raise ValueError(f"unknown simulated GPU profile {', '.join(unknown)!r}; known: {', '.join(sorted(profiles))}")
    return [profiles[k] for k in keys]


# --- scenarios ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Demand:
    """What the workload asks of one GPU at one instant."""

    load: float = 0.0  # 0..1, share of time kernels run at full intensity
    vram_mib: float = 0.0  # memory held by processes
    mem_util: float = 0.3  # memory-controller busy share relative to load
    pcie_kib_s: float = 0.0
    processes: tuple[tuple[int, str, float], ...] = ()  # (pid, name, vram_mib)


class Scenario(Protocol):
    def demand(self, gpu_index: int, time_s: float) -> Demand: ...


@dataclass
class ManualLoad:
    """A load set by hand (the stress runner drives the simulator through this)."""

    loads: dict[int, Demand] = field(default_factory=dict)

    def set(self, gpu_index: int, load: float, vram_mib: float = 0.0, name: str = "rigscope-stress",
            pid: int = 0) -> None:
        procs = ((pid, name, vram_mib),) if load > 0 or vram_mib > 0 else ()
        self.loads[gpu_index] = Demand(load=max(0.0, min(1.0, load)), vram_mib=vram_mib, mem_util=0.5, processes=procs)

    def demand(self, gpu_index: int, time_s: float) -> Demand:
        return self.loads.get(gpu_index, Demand())


# --- the GPU model ------------------------------------------------------------------------


@dataclass
class _GpuState:
    profile: GpuProfile
    index: int
    rng: random.Random
    time_s: float | None = None
    temp_c: float = AMBIENT_C + 10.0
    thermal_cap: float = 1.0
    energy_mj: float = 0.0
    power_w: float = 0.0
    clock_mhz: float = 0.0
    reasons: int = int(ClockEventReason.GPU_IDLE)
    load: float = 0.0
    lost: bool = False
    # Seconds under each throttle cause since the start, integrated step by step as NVML's
    # per-reason counters are (power brake: never applied by this model, so always 0).
    power_cap_s: float = 0.0
    sw_thermal_s: float = 0.0
    hw_thermal_s: float = 0.0
    power_brake_s: float = 0.0
    #: Those counters at the last ``reading`` (None before the first: no interval yet).
    reported_s: tuple[float, float, float, float] | None = None


class SimulatedGpuModel:
    """The physics of the simulated GPUs, independent of where time and load come from."""

    def __init__(self, profiles: Sequence[GpuProfile], scenario: Scenario, seed: int = 0,
                 ambient_c: float = AMBIENT_C) -> None:
        self.profiles = list(profiles)
        self.scenario = scenario
        self.ambient_c = ambient_c
        self._seed = seed
        self._gpus = [
            _GpuState(profile=p, index=i, rng=random.Random(f"{seed}:{i}"), temp_c=ambient_c + 10.0)
            for i, p in enumerate(self.profiles)
        ]
        self._last_demand: list[Demand] = [Demand() for _ in self._gpus]

    # The step is the hot loop of a simulated week: plain floats and math, no allocation.
    def _step(self, gpu: _GpuState, demand: Demand, dt: float) -> None:
        p = gpu.profile
        load = demand.load
        gpu.load = load
        reasons = 0
        if load <= 0.02:
            clock = p.sm_clock_idle_mhz
            power = p.power_idle_w
            reasons = _IDLE
        else:
            clock = p.sm_clock_max_mhz * gpu.thermal_cap
            if gpu.thermal_cap < 0.999:
                reasons = _SW_THERMAL
                if gpu.temp_c >= p.temp_slowdown_c:
                    reasons |= _HW_THERMAL
            dynamic = load * (p.power_demand_w - p.power_idle_w)
            ratio = clock / p.sm_clock_max_mhz
            power = p.power_idle_w + dynamic * ratio * ratio * ratio
            if power > p.power_limit_w:
                ratio_at_limit = ((p.power_limit_w - p.power_idle_w) / dynamic) ** (1.0 / 3.0)
                clock = p.sm_clock_max_mhz * ratio_at_limit
                power = p.power_limit_w
                reasons |= _POWER_CAP
        target = self.ambient_c + p.thermal_r_c_per_w * power
        gpu.temp_c = target + (gpu.temp_c - target) * math.exp(-dt / p.thermal_tau_s)
        # The driver's thermal loop: cut clocks at the slowdown temperature, release below it.
        if gpu.temp_c >= p.temp_slowdown_c:
            gpu.thermal_cap = max(0.35, gpu.thermal_cap - 0.02 * dt * (1.0 + gpu.temp_c - p.temp_slowdown_c))
        elif gpu.temp_c < p.temp_slowdown_c - 1.5 and gpu.thermal_cap < 1.0:
            gpu.thermal_cap = min(1.0, gpu.thermal_cap + 0.01 * dt)
        gpu.energy_mj += power * dt * 1000.0
        if reasons & _POWER_CAP:
            gpu.power_cap_s += dt
        if reasons & _SW_THERMAL:
            gpu.sw_thermal_s += dt
        if reasons & _HW_THERMAL:
            gpu.hw_thermal_s += dt
        gpu.power_w = power
        gpu.clock_mhz = clock
        gpu.reasons = reasons

    def advance(self, now_s: float) -> None:
        """Integrate every GPU up to ``now_s`` (steps of at most one second)."""
        for gpu in self._gpus:
            if gpu.time_s is None:
                self._init_at(gpu, now_s)
                continue
            gap = now_s - gpu.time_s
            if gap <= 0:
                continue
            if gap > _MAX_CATCHUP_S:  # e.g. after the machine slept: settle, do not replay hours
                gpu.time_s = now_s - _MAX_CATCHUP_S
                gap = _MAX_CATCHUP_S
            t = gpu.time_s
            demand = self._last_demand[gpu.index]
            while t < now_s:
                dt = min(_MAX_STEP_S, now_s - t)
                t += dt
                demand = self.scenario.demand(gpu.index, t)
                self._step(gpu, demand, dt)
            gpu.time_s = now_s
            self._last_demand[gpu.index] = demand

    def throughput_tflops(self, index: int) -> float:
        """The bf16 GEMM rate the GPU would deliver now: peak x clock ratio x load."""
        gpu = self._gpus[index]
        p = gpu.profile
        if gpu.load <= 0.02:
            return 0.0
        return p.peak_bf16_tflops * (gpu.clock_mhz / p.sm_clock_max_mhz) * gpu.load

    def set_lost(self, index: int, lost: bool) -> None:
        self._gpus[index].lost = lost

    def is_lost(self, index: int) -> bool:
        return self._gpus[index].lost

    def reading(self, index: int) -> GpuSample:
        """The GpuSample for GPU ``index`` as of the last ``advance`` (with sensor noise)."""
        gpu = self._gpus[index]
        p = gpu.profile
        demand = self._last_demand[index]
        noise = gpu.rng.random
        busy = gpu.load > 0.02
        util = float(min(100, max(0, round(gpu.load * 100.0 + 3.0 * noise() - 1.5)))) if busy else 0.0
        vram_used = float(round(min(p.vram_total_mib, 320.0 + demand.vram_mib)))
        fan = None
        if p.has_fan_reading:
            fan = float(round(min(100.0, max(30.0, 30.0 + (gpu.temp_c - 45.0) * 1.6))))
        pcie = demand.pcie_kib_s * (0.9 + 0.2 * noise())
        counted = (gpu.power_cap_s, gpu.sw_thermal_s, gpu.hw_thermal_s, gpu.power_brake_s)
        before, gpu.reported_s = gpu.reported_s, counted
        held: tuple[float | None, ...] = ((None,) * 4 if before is None
                                          else tuple(now - then for now, then in zip(counted, before, strict=True)))
        return GpuSample(
            util,
            float(round(min(100.0, util * demand.mem_util))),
            vram_used,
            p.vram_total_mib - vram_used,
            float(round(gpu.temp_c + 0.6 * noise() - 0.3)),
            gpu.power_w * (0.99 + 0.02 * noise()),
            float(int(gpu.energy_mj)),
            float(int(gpu.clock_mhz / 15.0 + 0.5) * 15),
            p.mem_clock_max_mhz if busy else p.mem_clock_idle_mhz,
            fan,
            gpu.reasons,
            pcie * 0.8,
            pcie * 0.2,
            p.pcie_gen_max if busy else 1,
            p.pcie_width_max,
            0 if busy else 8,
            *held,
        )

    def processes(self, index: int) -> list[tuple[int, str, float]]:
        return list(self._last_demand[index].processes)

    def trace(self, index: int, start_s: float, end_s: float, interval_s: float = 1.0) -> Trace:
        """Simulate GPU ``index`` from ``start_s`` to ``end_s`` in bulk, as numpy columns.

        The same physics as ``advance``; the per-sample sensor noise is drawn with numpy
        afterwards, which makes a simulated week about ten times faster than sampling it.
        """
        gpu = self._gpus[index]
        if gpu.time_s is None:
            self._init_at(gpu, start_s)
        elif gpu.time_s < start_s:
            self.advance(start_s)
        n = max(0, int((end_s - start_s) // interval_s))
        times = start_s + interval_s * np.arange(1, n + 1, dtype=np.float64)
        load_l, temp_l, power_l, clock_l, reasons_l, energy_l = [], [], [], [], [], []
        vram_l, memu_l, pcie_l = [], [], []
        counted_l = [(gpu.power_cap_s, gpu.sw_thermal_s, gpu.hw_thermal_s, gpu.power_brake_s)]
        demand_of = self.scenario.demand
        step = self._step
        t = gpu.time_s if gpu.time_s is not None else start_s
        demand = self._last_demand[index]
        for target in times.tolist():
            if target - t == 1.0:  # the common 1 Hz case, without the sub-step loop
                t = target
                demand = demand_of(index, t)
                step(gpu, demand, 1.0)
            while t < target:
                dt = min(_MAX_STEP_S, target - t)
                t += dt
                demand = demand_of(index, t)
                step(gpu, demand, dt)
            load_l.append(gpu.load)
            temp_l.append(gpu.temp_c)
            power_l.append(gpu.power_w)
            clock_l.append(gpu.clock_mhz)
            reasons_l.append(gpu.reasons)
            energy_l.append(gpu.energy_mj)
            vram_l.append(demand.vram_mib)
            memu_l.append(demand.mem_util)
            pcie_l.append(demand.pcie_kib_s)
            counted_l.append((gpu.power_cap_s, gpu.sw_thermal_s, gpu.hw_thermal_s, gpu.power_brake_s))
        gpu.time_s = t
        self._last_demand[index] = demand
        p = gpu.profile
        rng = np.random.default_rng([self._seed, index, int(start_s)])
        load = np.asarray(load_l)
        busy = load > 0.02
        util = np.where(busy, np.clip(np.round(load * 100.0 + rng.uniform(-1.5, 1.5, n)), 0, 100), 0.0)
        vram_used = np.round(np.minimum(p.vram_total_mib, 320.0 + np.asarray(vram_l)))
        temp = np.asarray(temp_l)
        pcie = np.asarray(pcie_l) * rng.uniform(0.9, 1.1, n)
        fan = (np.round(np.clip(30.0 + (temp - 45.0) * 1.6, 30.0, 100.0)) if p.has_fan_reading
               else np.full(n, np.nan))
        columns = {
            "utilization_gpu_pct": util,
            "utilization_mem_pct": np.round(np.minimum(100.0, util * np.asarray(memu_l))),
            "vram_used_mib": vram_used,
            "vram_free_mib": p.vram_total_mib - vram_used,
            "temperature_c": np.round(temp + rng.uniform(-0.3, 0.3, n)),
            "power_w": np.asarray(power_l) * rng.uniform(0.99, 1.01, n),
            "energy_mj": np.floor(np.asarray(energy_l)),
            "sm_clock_mhz": np.round(np.asarray(clock_l) / 15.0) * 15.0,
            "mem_clock_mhz": np.where(busy, p.mem_clock_max_mhz, p.mem_clock_idle_mhz),
            "fan_pct": fan,
            "clock_event_reasons": np.asarray(reasons_l, dtype=np.float64),
            "pcie_rx_kib_s": pcie * 0.8,
            "pcie_tx_kib_s": pcie * 0.2,
            "pcie_gen": np.where(busy, float(p.pcie_gen_max), 1.0),
            "pcie_width": np.full(n, float(p.pcie_width_max)),
            "pstate": np.where(busy, 0.0, 8.0),
        }
        held = np.diff(np.asarray(counted_l, dtype=np.float64), axis=0)
        for i, name in enumerate(("clock_event_sw_power_cap_s", "clock_event_sw_thermal_s",
                                  "clock_event_hw_thermal_s", "clock_event_hw_power_brake_s")):
            columns[name] = held[:, i]
        throughput = np.where(busy, p.peak_bf16_tflops * np.asarray(clock_l) / p.sm_clock_max_mhz * load, 0.0)
        return Trace(time_s=times, columns=columns, throughput_tflops=throughput)

    def _init_at(self, gpu: _GpuState, time_s: float) -> None:
        gpu.time_s = time_s
        demand = self.scenario.demand(gpu.index, time_s)
        self._step(gpu, demand, 0.0)
        self._last_demand[gpu.index] = demand


@dataclass(frozen=True)
class Trace:
    """A bulk simulation: one float64 column per GpuSample field (NaN = not supported)."""

    time_s: npt.NDArray[np.float64]
    columns: dict[str, npt.NDArray[np.float64]]
    throughput_tflops: npt.NDArray[np.float64]


def profile_info(profile: GpuProfile, index: int) -> GpuInfo:
    return GpuInfo(
        index=index,
        uuid=f"GPU-SIM{index:02d}-{profile.key}",
        name=f"{profile.name} (simulated)",
        vram_total_mib=profile.vram_total_mib,
        power_limit_enforced_w=profile.power_limit_w,
        power_limit_default_w=profile.power_limit_w,
        power_limit_min_w=profile.power_limit_min_w,
        power_limit_max_w=profile.power_limit_max_w,
        power_limit_settable=profile.power_limit_settable,
        sm_clock_max_mhz=profile.sm_clock_max_mhz,
        mem_clock_max_mhz=profile.mem_clock_max_mhz,
        temp_slowdown_c=profile.temp_slowdown_c,
        temp_shutdown_c=profile.temp_shutdown_c,
        temp_max_operating_c=profile.temp_max_operating_c,
        # The real cards modelled give T.Limit offsets; the values above are their absolute form.
        temp_thresholds_relative=True,
        pcie_gen_max=profile.pcie_gen_max,
        pcie_width_max=profile.pcie_width_max,
        pci_bus_id=f"00000000:{index + 1:02X}:00.0",
        driver_version="simulated",
        cuda_version=None,
        vbios_version=None,
        persistence_mode=None,
        is_laptop=profile.is_laptop,
        simulated=True,
    )


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


def simulated_host_sample(cpu_pct: float, on_ac_power: bool = True, cores: int = 16,
                          ram_total_mib: float = 32768.0, ram_used_mib: float = 12000.0) -> HostSample:
    """A host reading for demo history, where the real host cannot stand in for the past."""
    return HostSample(
        cpu_pct=cpu_pct,
        cpu_per_core_pct=tuple(cpu_pct for _ in range(cores)),
        cpu_freq_mhz=4200.0 if cpu_pct > 20 else 2400.0,
        ram_used_mib=ram_used_mib,
        ram_total_mib=ram_total_mib,
        swap_used_mib=0.0,
        swap_total_mib=8192.0,
        load_1m=cpu_pct / 100.0 * cores,
        load_5m=cpu_pct / 100.0 * cores,
        load_15m=cpu_pct / 100.0 * cores,
        cpu_temp_c=45.0 + cpu_pct * 0.4,
        battery_pct=80.0,
        on_ac_power=on_ac_power,
    )
