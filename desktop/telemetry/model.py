"""The telemetry data model: what every backend produces and every consumer reads.

Everything here is a frozen dataclass of plain numbers. A metric that a GPU does not
support is ``None`` (never 0); a GPU that fell off the bus is a ``DeviceState``, not an
exception. The metric registry at the bottom is the one place that names, units and
describes each metric, so labels, database columns and exports agree.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Final, Literal

# The clock-event vocabulary lives in one pure module that the advisor shares; re-exported here.
from advisor.clock_events import (
    CLOCK_EVENT_COUNTERS,
    COUNTER_ROWS,
    POWER_REASONS,
    THERMAL_REASONS,
    THROTTLE_REASONS,
    ClockEventReason,
)
from advisor.envelope import PowerEnvelope

__all__ = ["CLOCK_EVENT_COUNTERS", "GPU_METRIC_NAMES", "METRICS", "METRICS_BY_NAME", "POWER_REASONS",
           "THERMAL_REASONS", "THROTTLE_REASONS", "ClockEventReason", "DeviceState", "GpmActivity", "GpuInfo",
           "GpuProcess", "GpuReading", "GpuSample", "HostSample", "Metric", "MigInstance", "ProcessKind", "Snapshot",
           "SourceInfo", "SourceKind", "format_value"]


class DeviceState(enum.Enum):
    """Whether a GPU answered this tick."""

    OK = "ok"
    LOST = "lost"
    #: The driver has put the GPU to sleep (runtime power management, laptops): not asked, so
    #: that polling does not wake it. Not a fault: no alert, no reinit, no sample.
    ASLEEP = "asleep"


#: "unavailable": no usable NVML (no driver, a driver/library version mismatch) and no simulation asked for:
#: no GPU readings at all, the host only (desktop/telemetry/no_gpu.py).
SourceKind = Literal["nvml", "simulated", "unavailable"]


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """Where the GPU numbers come from, and why (shown in the status bar and `doctor`)."""

    kind: SourceKind
    detail: str
    #: Why the app is not on real NVML (None when it is).
    fallback_reason: str | None = None
    #: Why the GPU process list is empty whatever runs (WSL2: the driver lists none), for the Processes page.
    processes_note: str | None = None

    @property
    def simulated(self) -> bool:
        return self.kind == "simulated"

    @property
    def unavailable(self) -> bool:
        """No GPU can be read and none is simulated: ``fallback_reason`` says why."""
        return self.kind == "unavailable"

    @property
    def fallback_simulation(self) -> bool:
        """The simulated GPU stands in for a real one that NVML could not read (not asked for with --simulate):
        shown, labelled, but never written into a history."""
        return self.kind == "simulated" and self.fallback_reason is not None


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """Static facts about one GPU, read once (limits and names change rarely)."""

    index: int
    uuid: str
    name: str
    vram_total_mib: float | None = None
    power_limit_enforced_w: float | None = None
    power_limit_default_w: float | None = None
    power_limit_min_w: float | None = None
    power_limit_max_w: float | None = None
    #: False where the driver refuses `GetPowerManagementLimit` (GeForce laptops): never advise `-pl`.
    power_limit_settable: bool | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    temp_slowdown_c: float | None = None
    temp_shutdown_c: float | None = None
    #: Absolute °C; the platform may set it far below slowdown (an MX330 laptop: 57 °C).
    temp_max_operating_c: float | None = None
    #: True where the GPU gave its thresholds as offsets from its thermal limit (T.Limit: Ada,
    #: Hopper, Blackwell); the three ``temp_*_c`` above are absolute °C either way.
    temp_thresholds_relative: bool = False
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    pci_bus_id: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    vbios_version: str | None = None
    persistence_mode: bool | None = None
    #: MIG mode on (the parent's utilization is then not available); None: not a MIG GPU / unknown.
    mig_enabled: bool | None = None
    is_laptop: bool = False
    simulated: bool = False
    #: NVML's GPU performance monitoring (GPM: Hopper, Blackwell) measures this GPU's SM activity:
    #: its ``effective_load_pct`` is then measured SM activity, not the power/clock estimate.
    gpm_supported: bool = False
    #: Memory (HBM) max operating temperature, absolute °C (nvmlDeviceGetTemperatureThreshold MEM_MAX):
    #: nvsmi_q_A100SXMx4.txt "Memory Max Operating Temp: 95 C"; None where not answered.
    temp_memory_max_c: float | None = None


@dataclass(frozen=True, slots=True)
class MigInstance:
    """One MIG instance of a GPU, with its memory and processes when asked (for `doctor`)."""

    index: int
    uuid: str
    name: str
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    vram_total_mib: float | None = None
    vram_used_mib: float | None = None
    pids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One reading of one GPU's fast-changing metrics. ``None`` = not supported / not read."""

    utilization_gpu_pct: float | None = None
    utilization_mem_pct: float | None = None
    vram_used_mib: float | None = None
    vram_free_mib: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    energy_mj: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    fan_pct: float | None = None
    clock_event_reasons: int | None = None
    pcie_rx_kib_s: float | None = None
    pcie_tx_kib_s: float | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pstate: int | None = None
    # Seconds spent under each clock-event cause since this GPU's previous sample, from NVML's
    # cumulative per-reason counters: exact, where a 1 Hz look at the reason bits misses short
    # episodes. None on a GPU's first sample, where the driver keeps no counter, or after a reset.
    clock_event_sw_power_cap_s: float | None = None
    clock_event_sw_thermal_s: float | None = None
    clock_event_hw_thermal_s: float | None = None
    clock_event_hw_power_brake_s: float | None = None
    #: How hard the GPU works, 0-100 %: NVML's SM activity where the GPU measures it (GPM),
    #: otherwise estimated from power and SM clock against its full-load calibration (the
    #: sampler fills it in; advisor/effective_load.py). Utilization only says a kernel ran.
    effective_load_pct: float | None = None


@dataclass(frozen=True, slots=True)
class GpmActivity:
    """What NVML's GPM measured over the last sample interval, 0-100 % each; None: not answered.

    Live only (not stored in the history): SM activity is also the reading's ``effective_load_pct``.
    """

    #: Share of the SMs busy (at least one warp resident): DCGM's SM_ACTIVE (NVML_GPM_METRIC_SM_UTIL).
    sm_active_pct: float | None = None
    #: Share of time any tensor pipe was busy: DCGM's PIPE_TENSOR_ACTIVE (NVML_GPM_METRIC_ANY_TENSOR_UTIL).
    tensor_active_pct: float | None = None
    #: DRAM bandwidth used of the theoretical maximum: DCGM's DRAM_ACTIVE (NVML_GPM_METRIC_DRAM_BW_UTIL).
    dram_active_pct: float | None = None
    #: Share of time the graphics/compute engine was busy: DCGM's GR_ENGINE_ACTIVE (NVML_GPM_METRIC_GRAPHICS_UTIL),
    #: what NVIDIA's dcgm-exporter dashboard plots as "GPU Utilization".
    graphics_active_pct: float | None = None


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU in one snapshot: its static info, its state and (when ok) its sample."""

    info: GpuInfo
    state: DeviceState
    sample: GpuSample | None
    #: Why the device is lost (the NVML error), for the badge tooltip.
    state_detail: str | None = None
    #: GPM's measured activity this tick (GPUs with ``info.gpm_supported``), else None.
    activity: GpmActivity | None = None
    #: HBM/memory temperature (°C, NVML_FI_DEV_MEMORY_TEMP, nvidia-smi's "Memory Current Temp") where
    #: the GPU has a memory sensor (A100, H100, H200), else None. Live only: watched by the stress guard.
    memory_temperature_c: float | None = None


@dataclass(frozen=True, slots=True)
class HostSample:
    """CPU, memory and power-source readings of the machine itself."""

    cpu_pct: float | None = None
    cpu_per_core_pct: tuple[float, ...] = ()
    cpu_freq_mhz: float | None = None
    ram_used_mib: float | None = None
    ram_total_mib: float | None = None
    swap_used_mib: float | None = None
    swap_total_mib: float | None = None
    load_1m: float | None = None
    load_5m: float | None = None
    load_15m: float | None = None
    cpu_temp_c: float | None = None
    battery_pct: float | None = None
    on_ac_power: bool | None = None


ProcessKind = Literal["compute", "graphics", "mixed"]


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process holding memory on a GPU."""

    pid: int
    gpu_index: int
    name: str
    user: str | None = None
    vram_mib: float | None = None
    kind: ProcessKind = "compute"
    cpu_pct: float | None = None
    #: Process start, epoch seconds (for "running time").
    started_s: float | None = None
    #: True when the process belongs to the user running Rigscope (may be ended from the UI).
    own: bool = False
    # Per-process utilization over the last process period (nvmlDeviceGetProcessUtilization or
    # nvmlDeviceGetProcessesUtilizationInfo): None where the driver does not report it, never 0.
    sm_util_pct: float | None = None
    mem_util_pct: float | None = None
    enc_util_pct: float | None = None
    dec_util_pct: float | None = None
    #: The command, shortened for people: ``python train.py --cfg a.yaml`` (not the interpreter path).
    command: str | None = None
    #: The container it runs in, as a label: ``docker:trainer (3f2a9c1b4e5d)``, ``k8s-pod:<uid>``; None outside one.
    container: str | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything read in one tick. ``processes`` is the latest list (polled more slowly)."""

    time_s: float
    monotonic_s: float
    source: SourceInfo
    gpus: tuple[GpuReading, ...]
    host: HostSample | None = None
    processes: tuple[GpuProcess, ...] = ()
    #: True when ``processes`` was polled in this very tick.
    processes_fresh: bool = False
    #: The laptop's power envelope (AC/battery, firmware mode, nvidia-powerd), read on a slow period;
    #: None where the sampler does not read it.
    envelope: PowerEnvelope | None = None

    def reading(self, index: int) -> GpuReading | None:
        for gpu in self.gpus:
            if gpu.info.index == index:
                return gpu
        return None


# --- metric registry ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Metric:
    """One GPU metric: the ``GpuSample`` field it lives in, its unit and its meaning."""

    name: str
    label: str
    unit: str
    description: str
    integer: bool = False
    #: The GpuInfo field holding this metric's maximum, for plot ranges and "x / max" labels.
    max_field: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


METRICS: Final[tuple[Metric, ...]] = (
    Metric("utilization_gpu_pct", "GPU utilization", "%", "Share of the last sample period in which a kernel ran"),
    Metric("utilization_mem_pct", "Memory controller", "%", "Share of time the memory controller was busy"),
    Metric("vram_used_mib", "VRAM used", "MiB", "Device memory in use", max_field="vram_total_mib"),
    Metric("vram_free_mib", "VRAM free", "MiB", "Device memory free", max_field="vram_total_mib"),
    Metric("temperature_c", "Temperature", "°C", "GPU core temperature", max_field="temp_slowdown_c"),
    Metric("power_w", "Power", "W", "Board power draw (driver average)", max_field="power_limit_enforced_w"),
    Metric("energy_mj", "Energy", "mJ", "Energy counter since the driver loaded"),
    Metric("sm_clock_mhz", "SM clock", "MHz", "Streaming-multiprocessor clock", max_field="sm_clock_max_mhz"),
    Metric("mem_clock_mhz", "Memory clock", "MHz", "Memory clock", max_field="mem_clock_max_mhz"),
    Metric("fan_pct", "Fan", "%", "Fan speed as a share of its maximum"),
    Metric("clock_event_reasons", "Clock-event reasons", "mask", "Why clocks are held down (bitmask)", integer=True),
    Metric("pcie_rx_kib_s", "PCIe RX", "KiB/s", "PCIe receive throughput"),
    Metric("pcie_tx_kib_s", "PCIe TX", "KiB/s", "PCIe transmit throughput"),
    Metric("pcie_gen", "PCIe gen", "", "Current PCIe link generation", integer=True, max_field="pcie_gen_max"),
    Metric("pcie_width", "PCIe width", "lanes", "Current PCIe link width", integer=True, max_field="pcie_width_max"),
    Metric("pstate", "P-state", "", "Performance state (0 = fastest)", integer=True),
    # Appended, never inserted: this order is the history database's column order. The clock-event
    # counters are advisor/clock_events.py's table rows (a new one comes with a schema step).
    *(Metric(row.counter.field, row.counter.title, "s", row.counter.help) for row in COUNTER_ROWS
      if row.counter is not None),
    Metric("effective_load_pct", "Effective load", "%",
           "How hard the GPU works: SM activity where measured, else estimated from power and clock"),
)

METRICS_BY_NAME: Final[dict[str, Metric]] = {m.name: m for m in METRICS}

#: GpuSample field names in registry order (the database column order too).
GPU_METRIC_NAMES: Final[tuple[str, ...]] = tuple(m.name for m in METRICS)

assert all(name in METRICS_BY_NAME for name, _ in CLOCK_EVENT_COUNTERS), "a clock-event counter is not a metric"

assert tuple(f.name for f in fields(GpuSample)) == GPU_METRIC_NAMES, "registry and GpuSample disagree"


def format_value(metric: Metric, value: float | int | None, digits: int = 0) -> str:
    """``"72 °C"``, ``"n/a"`` for missing: the one formatter for every number shown."""
    if value is None:
        return "n/a"
    if metric.integer:
        text = f"0x{int(value):x}" if metric.unit == "mask" else f"{int(value)}"
    else:
        text = f"{value:,.{digits}f}"
    unit = metric.unit if metric.unit != "mask" else ""
    return f"{text} {unit}".strip()
