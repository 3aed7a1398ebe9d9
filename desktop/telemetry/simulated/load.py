"""What a simulated GPU is asked to do: the demand of a workload over time, and a host reading to go with it.

A ``Scenario`` says what load each GPU carries at each instant: ``ManualLoad`` is set by hand
(the stress runner), ``scenarios.WeekScenario`` replays a realistic week (demo history).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from desktop.telemetry.model import HostSample


@dataclass(frozen=True, slots=True)
class Demand:
    """What the workload asks of one GPU at one instant."""

    load: float = 0.0  # 0..1, share of time kernels run at full intensity
    vram_mib: float = 0.0  # memory held by processes
    mem_util: float = 0.3  # memory-controller busy share relative to load
    pcie_kib_s: float = 0.0
    processes: tuple[tuple[int, str, float], ...] = ()  # (pid, name, vram_mib)
    #: Power drawn per unit of load, relative to a compute-bound GEMM (1.0). A memory-bound or
    #: data-starved job keeps kernels running (high utilization) at a fraction of the power (~0.35).
    intensity: float = 1.0


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
