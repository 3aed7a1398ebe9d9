"""The thermal/power model of the simulated GPUs, independent of where time and load come from.

Per GPU, advanced in steps of at most one second:
  power  P = P_idle + L * I * (P_demand - P_idle) * (f / f_boost)^3 (dynamic power ~ f·V², V ~ f)
         with I the demand's intensity: 1 for a compute-bound GEMM, ~0.35 for a memory-bound
         or data-starved job, which keeps kernels running (utilization ~L) at a third of the power
  clock  f = f_boost * thermal_cap, cut further so that P <= limit  (SwPowerCap bit)
  temp   dT/dt = (T_ambient + R·P - T) / tau                     (first-order response)
  thermal_cap falls while T >= T_slowdown and recovers below it  (SW/HW thermal bits)
It is deterministic for a seed and the times passed in, so tests can run a simulated week in
a second; ``trace`` simulates a stretch in bulk as numpy columns.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from advisor.effective_load import Calibration, estimate_array
from desktop.telemetry.model import CLOCK_EVENT_COUNTERS, ClockEventReason, GpmActivity, GpuSample
from desktop.telemetry.simulated import gpm
from desktop.telemetry.simulated.load import Demand, Scenario
from desktop.telemetry.simulated.profiles import AMBIENT_C, GpuProfile

_MAX_STEP_S = 1.0
#: Beyond this gap the simulator does not integrate second by second: it settles instead.
_MAX_CATCHUP_S = 6 * 3600.0
# Plain ints for the hot loop (IntFlag arithmetic costs microseconds per operation).
_IDLE = int(ClockEventReason.GPU_IDLE)
_POWER_CAP = int(ClockEventReason.SW_POWER_CAP)
_SW_THERMAL = int(ClockEventReason.SW_THERMAL_SLOWDOWN)
_HW_THERMAL = int(ClockEventReason.HW_THERMAL_SLOWDOWN)
#: The reason bit of each counted cause, in CLOCK_EVENT_COUNTERS' order (advisor/clock_events.py's table).
_COUNTER_BITS = tuple(int(reason) for _name, reason in CLOCK_EVENT_COUNTERS)
_COUNTED_BITS = sum(_COUNTER_BITS)


def profile_calibration(profile: GpuProfile) -> Calibration:
    """A card's full-load calibration from its datasheet figures, in the form this model obeys.

    A compute-bound load at the power limit runs at the clock where the model's demand meets
    the limit; with a demand under the limit it runs at max clock.
    """
    full_w = min(profile.power_limit_w, profile.power_demand_w)
    ratio = ((full_w - profile.power_idle_w) / (profile.power_demand_w - profile.power_idle_w)) ** (1.0 / 3.0)
    return Calibration(profile.power_idle_w, full_w, profile.sm_clock_boost_mhz * ratio, "datasheet",
                       profile.peak_bf16_tflops)


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
    intensity: float = 1.0
    lost: bool = False
    # Seconds under each counted throttle cause since the start (CLOCK_EVENT_COUNTERS' order), integrated
    # step by step as NVML's per-reason counters are (a cause this model never applies stays 0).
    counted_s: list[float] = dataclasses.field(default_factory=lambda: [0.0] * len(CLOCK_EVENT_COUNTERS))
    #: Those counters at the last ``reading`` (None before the first: no interval yet).
    reported_s: tuple[float, ...] | None = None


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
        gpu.intensity = demand.intensity
        reasons = 0
        if load <= 0.02:
            clock = p.sm_clock_idle_mhz
            power = p.power_idle_w
            reasons = _IDLE
        else:
            clock = p.sm_clock_boost_mhz * gpu.thermal_cap
            if gpu.thermal_cap < 0.999:
                reasons = _SW_THERMAL
                if gpu.temp_c >= p.temp_slowdown_c:
                    reasons |= _HW_THERMAL
            # Utilization follows the load; power follows load x intensity (a memory-bound kernel
            # keeps the SMs waiting on DRAM: busy in NVML's sense, cool and far below the limit).
            dynamic = load * demand.intensity * (p.power_demand_w - p.power_idle_w)
            ratio = clock / p.sm_clock_boost_mhz
            power = p.power_idle_w + dynamic * ratio * ratio * ratio
            if power > p.power_limit_w:
                ratio_at_limit = ((p.power_limit_w - p.power_idle_w) / dynamic) ** (1.0 / 3.0)
                clock = p.sm_clock_boost_mhz * ratio_at_limit
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
        if reasons & _COUNTED_BITS:
            counted = gpu.counted_s
            for i, bit in enumerate(_COUNTER_BITS):
                if reasons & bit:
                    counted[i] += dt
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
        """The bf16 GEMM rate the GPU delivers now: peak x clock ratio x load x intensity."""
        gpu = self._gpus[index]
        p = gpu.profile
        if gpu.load <= 0.02:
            return 0.0
        return p.peak_bf16_tflops * (gpu.clock_mhz / p.sm_clock_boost_mhz) * gpu.load * gpu.intensity

    def set_power_limit(self, index: int, watts: float, thermal_r_c_per_w: float | None = None) -> None:
        """The enforced power limit (and the cooling's thermal resistance) from now on: the simulated
        laptop's firmware mode, AC or battery."""
        gpu = self._gpus[index]
        r = gpu.profile.thermal_r_c_per_w if thermal_r_c_per_w is None else thermal_r_c_per_w
        if gpu.profile.power_limit_w != watts or gpu.profile.thermal_r_c_per_w != r:
            gpu.profile = dataclasses.replace(gpu.profile, power_limit_w=watts, thermal_r_c_per_w=r)

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
        counted = tuple(gpu.counted_s)
        before, gpu.reported_s = gpu.reported_s, counted
        held: tuple[float | None, ...] = ((None,) * len(counted) if before is None
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

    def activity(self, index: int) -> GpmActivity:
        """What GPM measures on GPU ``index`` as of the last ``advance`` (profiles with ``gpm``)."""
        gpu = self._gpus[index]
        return gpm.activity(gpu.load, gpu.intensity, self._last_demand[index].mem_util)

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
        load_l, temp_l, power_l, clock_l, reasons_l, energy_l, intensity_l = [], [], [], [], [], [], []
        vram_l, memu_l, pcie_l = [], [], []
        counted_l = [tuple(gpu.counted_s)]
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
            intensity_l.append(gpu.intensity)
            temp_l.append(gpu.temp_c)
            power_l.append(gpu.power_w)
            clock_l.append(gpu.clock_mhz)
            reasons_l.append(gpu.reasons)
            energy_l.append(gpu.energy_mj)
            vram_l.append(demand.vram_mib)
            memu_l.append(demand.mem_util)
            pcie_l.append(demand.pcie_kib_s)
            counted_l.append(tuple(gpu.counted_s))
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
        for i, (name, _reason) in enumerate(CLOCK_EVENT_COUNTERS):
            columns[name] = held[:, i]
        # As a live reading has it: measured SM activity where GPM answers, else estimated as the sampler
        # estimates (the datasheet calibration), not read off the model.
        columns["effective_load_pct"] = (gpm.sm_active_pct(load) if p.gpm else np.round(estimate_array(
            profile_calibration(p), columns["power_w"], columns["sm_clock_mhz"], util), 1))
        throughput = np.where(busy, p.peak_bf16_tflops * np.asarray(clock_l) / p.sm_clock_boost_mhz * load
                              * np.asarray(intensity_l), 0.0)
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
