"""Builders shared by the history tests: snapshots with every field set, or with every optional one None."""

from __future__ import annotations

import os

from desktop.telemetry.model import (
    DeviceState,
    GpuInfo,
    GpuProcess,
    GpuReading,
    GpuSample,
    HostSample,
    Snapshot,
    SourceInfo,
)

SOURCE = SourceInfo(kind="simulated", detail="test")

FULL_INFO = GpuInfo(
    index=0, uuid="GPU-full", name="Test GPU", vram_total_mib=16384.0, power_limit_enforced_w=150.0,
    power_limit_default_w=150.0, power_limit_min_w=80.0, power_limit_max_w=175.0, power_limit_settable=False,
    sm_clock_max_mhz=2505.0, mem_clock_max_mhz=9001.0, temp_slowdown_c=87.0, temp_shutdown_c=95.0,
    pcie_gen_max=4, pcie_width_max=16, pci_bus_id="00000000:01:00.0", driver_version="550.54.14",
    cuda_version="12.4", vbios_version="95.03.1A.00.01", persistence_mode=True, is_laptop=True, simulated=False,
)
BARE_INFO = GpuInfo(index=1, uuid="GPU-bare", name="Bare GPU")

# Values chosen on the store's integer grid (0.1 %, 0.1 MiB, 0.1 °C, 0.1 W, 1 MHz, ...).
FULL_SAMPLE = GpuSample(
    utilization_gpu_pct=87.5, utilization_mem_pct=41.0, vram_used_mib=15000.5, vram_free_mib=1383.5,
    temperature_c=78.3, power_w=142.7, energy_mj=123456789.0, sm_clock_mhz=2310.0, mem_clock_mhz=9001.0,
    fan_pct=64.0, clock_event_reasons=0x44, pcie_rx_kib_s=150000.0, pcie_tx_kib_s=30000.0, pcie_gen=4,
    pcie_width=16, pstate=0, clock_event_sw_power_cap_s=0.75, clock_event_sw_thermal_s=0.3,
    clock_event_hw_thermal_s=0.125, clock_event_hw_power_brake_s=0.0, effective_load_pct=36.4,
)
EMPTY_SAMPLE = GpuSample()

FULL_HOST = HostSample(
    cpu_pct=55.5, cpu_per_core_pct=(10.0, 20.5, 99.9, 0.0), cpu_freq_mhz=4200.0, ram_used_mib=12000.5,
    ram_total_mib=32768.0, swap_used_mib=10.0, swap_total_mib=8192.0, load_1m=3.25, load_5m=2.5, load_15m=1.0,
    cpu_temp_c=61.5, battery_pct=80.0, on_ac_power=False,
)
EMPTY_HOST = HostSample()

FULL_PROCESS = GpuProcess(pid=4242, gpu_index=0, name="train.py", user="alice", vram_mib=9000.5, kind="mixed",
                          cpu_pct=97.5, started_s=1_700_000_000.25, own=True)
BARE_PROCESS = GpuProcess(pid=7, gpu_index=1, name="python")


def snapshot(time_s: float, *, sample: GpuSample = FULL_SAMPLE, info: GpuInfo = FULL_INFO,
             state: DeviceState = DeviceState.OK, host: HostSample | None = FULL_HOST,
             processes: tuple[GpuProcess, ...] = (), detail: str | None = None) -> Snapshot:
    reading = GpuReading(info, state, sample if state is DeviceState.OK else None, detail)
    return Snapshot(time_s=time_s, monotonic_s=time_s, source=SOURCE, gpus=(reading,), host=host,
                    processes=processes, processes_fresh=bool(processes))


def deleted_open_files(pid: int | str = "self", name: str = "sqlite") -> list[str]:
    """The files process ``pid`` holds open whose path contains ``name`` and that have no name any more
    (``/proc/PID/fd`` says "(deleted)"): a WAL a writer goes on writing after it was unlinked."""
    out: list[str] = []
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if name in target and target.endswith("(deleted)"):
            out.append(target)
    return out
