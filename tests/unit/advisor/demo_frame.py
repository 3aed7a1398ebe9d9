"""Test helper: the demo week as a HistoryFrame built straight from the simulator (no database; cached)."""

from __future__ import annotations

import functools

import numpy as np

from advisor.frame import GpuMeta, GpuSeries, HistoryFrame, HostSeries, ProcessSamples
from desktop.telemetry.scenarios import WeekScenario, week_start
from desktop.telemetry.simulated import SimulatedGpuModel, parse_profile_list

#: The laptop of the reference machine plus a desktop RTX 4090 (one simulation shared by the tests).
TWO_GPUS = "rtx4090-laptop,rtx4090"
#: Monday 2026-11-16 00:00 UTC (ISO week 2026-W47).
DEMO_WEEK_START_S = week_start(1_763_300_000.0 + 86400 * 365)


@functools.cache
def demo_week_frame(profiles: str = "rtx4090-laptop", seed: int = 0, *, interval_s: float = 1.0,
                    start_s: float | None = None, days: float = 7.0, platform: str = "linux") -> HistoryFrame:
    start = DEMO_WEEK_START_S if start_s is None else start_s
    end = start + days * 86400
    gpus_profiles = parse_profile_list(profiles)
    scenario = WeekScenario([p.vram_total_mib for p in gpus_profiles], seed=seed)
    model = SimulatedGpuModel(gpus_profiles, scenario, seed=seed)
    gpus = []
    for index, prof in enumerate(gpus_profiles):
        trace = model.trace(index, start, end, interval_s)
        c = trace.columns
        n = trace.time_s.size
        energy = np.diff(np.concatenate(([c["energy_mj"][0]], c["energy_mj"])))
        meta = GpuMeta(index=index, uuid=f"GPU-SIM{index:02d}-{prof.key}", name=prof.name,
                       vram_total_mib=prof.vram_total_mib, power_limit_w=prof.power_limit_w,
                       power_limit_settable=prof.power_limit_settable, sm_clock_max_mhz=prof.sm_clock_max_mhz,
                       temp_slowdown_c=prof.temp_slowdown_c, pcie_gen_max=prof.pcie_gen_max,
                       pcie_width_max=prof.pcie_width_max, driver_version="simulated", persistence_mode=None,
                       is_laptop=prof.is_laptop, simulated=True)
        # trace times are the end of each step; rows here start at time_s and last interval_s
        gpus.append(GpuSeries(
            meta=meta, time_s=trace.time_s - interval_s, duration_s=np.full(n, interval_s),
            utilization_gpu_pct=c["utilization_gpu_pct"], utilization_mem_pct=c["utilization_mem_pct"],
            vram_used_mib=c["vram_used_mib"], temperature_c=c["temperature_c"], power_w=c["power_w"],
            energy_mj=energy, sm_clock_mhz=c["sm_clock_mhz"], mem_clock_mhz=c["mem_clock_mhz"],
            fan_pct=c["fan_pct"], pcie_gen=c["pcie_gen"], pcie_width=c["pcie_width"],
            clock_event_reasons=c["clock_event_reasons"].astype(np.int64),
            effective_load_pct=c["effective_load_pct"]))
    host_step = 10.0
    host_t = np.arange(start, end, host_step)
    samples = [scenario.host(t) for t in host_t.tolist()]
    host = HostSeries(time_s=host_t, duration_s=np.full(host_t.size, host_step),
                      cpu_pct=np.array([s.cpu_pct for s in samples], dtype=np.float64),
                      ram_used_mib=np.array([s.ram_used_mib for s in samples], dtype=np.float64),
                      ram_total_mib=np.array([s.ram_total_mib for s in samples], dtype=np.float64),
                      on_ac_power=np.array([1.0 if s.on_ac_power else 0.0 for s in samples]),
                      battery_pct=np.array([s.battery_pct for s in samples], dtype=np.float64))
    proc_step = 10.0
    rows_t, rows_gpu, rows_pid, rows_vram, rows_name = [], [], [], [], []
    names: list[str] = []
    for t in np.arange(start, end, proc_step).tolist():
        for index in range(len(gpus_profiles)):
            for pid, name, vram in scenario.demand(index, t).processes:
                if name not in names:
                    names.append(name)
                rows_t.append(t)
                rows_gpu.append(index)
                rows_pid.append(pid)
                rows_vram.append(vram)
                rows_name.append(names.index(name))
    processes = ProcessSamples(time_s=np.array(rows_t, dtype=np.float64), duration_s=np.full(len(rows_t), proc_step),
                               gpu_index=np.array(rows_gpu, dtype=np.int64), pid=np.array(rows_pid, dtype=np.int64),
                               vram_mib=np.array(rows_vram, dtype=np.float64),
                               name_id=np.array(rows_name, dtype=np.int64), names=tuple(names))
    return HistoryFrame(start_s=start, end_s=end, gpus=tuple(gpus), host=host, processes=processes,
                        platform=platform, demo=True)
