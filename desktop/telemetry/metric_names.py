"""The Prometheus metric and label names Rigscope writes (the exporter) and reads back (the fleet reader).

One place below both: ``desktop.exporter`` builds its series from these tables and ``desktop.fleet``
queries the same names, so a rename cannot leave the reader looking for a series nobody writes.
The ``DCGM_FI_*`` names, HELP texts and labels are dcgm-exporter's (etc/default-counters.csv), so the
reader reads plain dcgm-exporter targets with the same code; ``rigscope_*`` are Rigscope's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from advisor.clock_events import COUNTER_ROWS, SINGLE_REASONS, ClockEventReason, ReasonFamily

# --- per-GPU rigscope_* series (labels GPU_LABELS) ---------------------------------------------
CLOCK_EVENT_SECONDS: Final = "rigscope_clock_event_seconds"  # a counter: Prometheus sees it with ``_total``
CLOCK_EVENT_ACTIVE: Final = "rigscope_clock_event_active"
POWER_LIMIT_W: Final = "rigscope_power_limit_watts"
SM_CLOCK_MAX_MHZ: Final = "rigscope_sm_clock_max_mhz"
SLOWDOWN_TEMPERATURE_C: Final = "rigscope_slowdown_temperature_celsius"
FB_TOTAL_MIB: Final = "rigscope_fb_total_mib"

# --- per-host rigscope_* series (label Hostname) -------------------------------------------------
INFO: Final = "rigscope_info"
LAST_SAMPLE_TIMESTAMP_S: Final = "rigscope_last_sample_timestamp_seconds"
RECORDER_UP: Final = "rigscope_recorder_up"
RECORDER_LAST_WRITE_TIMESTAMP_S: Final = "rigscope_recorder_last_write_timestamp_seconds"
RECORDER_ROWS_WRITTEN: Final = "rigscope_recorder_rows_written"
RECORDER_WRITE_ERRORS: Final = "rigscope_recorder_write_errors"

# --- the last stress test (labels UUID, modelName, Hostname, workload, dtype, unit) ----------------
STRESS_THROUGHPUT: Final = "rigscope_stress_last_throughput"
STRESS_PEAK_THROUGHPUT: Final = "rigscope_stress_last_peak_throughput"
STRESS_THROTTLED: Final = "rigscope_stress_last_throttled"
STRESS_ERRORS: Final = "rigscope_stress_last_errors"
STRESS_END_TIMESTAMP_S: Final = "rigscope_stress_last_end_timestamp_seconds"
STRESS_SUSTAINED_RATIO: Final = "rigscope_stress_last_sustained_ratio"


#: dcgm-exporter's per-GPU labels, in its order (pci_bus_id since 3.3: NVML's "00000000:01:00.0").
GPU_LABELS: Final[tuple[str, ...]] = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname")


@dataclass(frozen=True, slots=True)
class DcgmField:
    """One dcgm-exporter series fed from a GpuSample field."""

    name: str
    kind: str  # "gauge" | "untyped"
    help: str
    sample_field: str


#: Names and HELP texts as in dcgm-exporter's etc/default-counters.csv.
DCGM_FIELDS: tuple[DcgmField, ...] = (
    DcgmField("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "sm_clock_mhz"),
    DcgmField("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", "mem_clock_mhz"),
    DcgmField("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "temperature_c"),
    DcgmField("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power_w"),
    DcgmField("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "untyped",
              "Total energy consumption since boot (in mJ).", "energy_mj"),
    DcgmField("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "untyped",
              "Total number of bytes transmitted through PCIe TX (in KB) via NVML.", "pcie_tx_kib_s"),
    DcgmField("DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "untyped",
              "Total number of bytes received through PCIe RX (in KB) via NVML.", "pcie_rx_kib_s"),
    DcgmField("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "utilization_gpu_pct"),
    DcgmField("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", "utilization_mem_pct"),
    DcgmField("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", "vram_free_mib"),
    DcgmField("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "vram_used_mib"),
)

#: dcgm-exporter's throttle-time counters, in ns as dcgm-exporter documents them since late 2025 (older
#: releases said "in us": the README's fleet note): running totals of the per-sample seconds NVML counted
#: under the causes named (summed).
_VIOLATIONS: Final[tuple[tuple[str, str, ReasonFamily], ...]] = (
    ("DCGM_FI_DEV_POWER_VIOLATION", "Throttling duration due to power constraints (in ns).", "power"),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "Throttling duration due to thermal constraints (in ns).", "thermal"),
)
#: Each violation counter with the GpuSample counter fields it sums: those of the causes of its family
#: (advisor/clock_events.py's table).
VIOLATION_COUNTERS: tuple[tuple[str, str, tuple[str, ...]], ...] = tuple(
    (name, help_text, tuple(row.counter.field for row in COUNTER_ROWS if row.counter is not None
                            and row.family == family))
    for name, help_text, family in _VIOLATIONS)
NS_PER_S = 1e9

#: (metric name, HELP, GpuSample field) for the rigscope_* per-GPU gauges read from the sample.
SAMPLE_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("rigscope_fan_speed_percent", "Fan speed as a share of its maximum (in %).", "fan_pct"),
    ("rigscope_pcie_link_gen", "Current PCIe link generation.", "pcie_gen"),
    ("rigscope_pcie_link_width", "Current PCIe link width (lanes).", "pcie_width"),
)

#: (metric name, HELP, GpuInfo field) for the rigscope_* per-GPU limits.
INFO_GAUGES: tuple[tuple[str, str, str], ...] = (
    (POWER_LIMIT_W, "Enforced board power limit (in W).", "power_limit_enforced_w"),
    (SM_CLOCK_MAX_MHZ, "Maximum SM clock frequency (in MHz).", "sm_clock_max_mhz"),
    ("rigscope_mem_clock_max_mhz", "Maximum memory clock frequency (in MHz).", "mem_clock_max_mhz"),
    (SLOWDOWN_TEMPERATURE_C, "Temperature at which the GPU starts to slow down (in C).",
     "temp_slowdown_c"),
    (FB_TOTAL_MIB, "Framebuffer memory total (in MiB).", "vram_total_mib"),
)

#: (metric name, HELP, GpuProcess field) for the per-process utilization gauges; a process whose GPU does
#: not report it has no series (missing is omitted, never 0).
PROCESS_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("rigscope_process_sm_util_percent", "Share of the GPU's SMs the process used over the last process poll "
     "(in %).", "sm_util_pct"),
    ("rigscope_process_mem_util_percent", "Share of the GPU's memory bandwidth the process used over the last "
     "process poll (in %).", "mem_util_pct"),
    ("rigscope_process_enc_util_percent", "Share of the video encoder the process used (in %).", "enc_util_pct"),
    ("rigscope_process_dec_util_percent", "Share of the video decoder the process used (in %).", "dec_util_pct"),
)
PROCESS_LABELS: tuple[str, ...] = ("gpu", "UUID", "Hostname", "pid", "process_name")

#: dcgm-exporter's profiling gauges (ratios 0..1, as DCGM has them), served only where the GPU measures them
#: (NVML GPM: Hopper, Blackwell): (name, HELP, GpmActivity field). Never the estimate under these names.
PROF_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned.", "sm_active_pct"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.", "tensor_active_pct"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving data.",
     "dram_active_pct"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", "graphics_active_pct"),
)
EFFECTIVE_LOAD_GAUGE: Final = "rigscope_gpu_effective_load_percent"

#: The clock-event reasons exported, as (reason, label value).
REASONS: tuple[tuple[ClockEventReason, str], ...] = tuple((r, (r.name or hex(r.value)).lower()) for r in SINGLE_REASONS)


#: dcgm-exporter's clock-event mask (NVML's bits, ``advisor.clock_events``), served where its counters file lists it:
#: the name since DCGM 3.3, and the one before. Read by the fleet reader, not written by Rigscope's exporter (its
#: ``rigscope_clock_event_active{reason}`` says the same per reason).
DCGM_CLOCK_EVENT_REASONS: Final = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
DCGM_CLOCK_THROTTLE_REASONS: Final = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"

#: The machine's name on a series: dcgm-exporter's ``Hostname``, or ``hostname`` (newer dcgm-exporter
#: releases), in that order; Prometheus' ``instance`` (the scrape target) where neither is there.
HOST_LABELS: Final[tuple[str, ...]] = ("Hostname", "hostname")
INSTANCE_LABEL: Final = "instance"
UUID_LABEL: Final = "UUID"
GPU_INDEX_LABEL: Final = "gpu"
MODEL_LABEL: Final = "modelName"
REASON_LABEL: Final = "reason"



def dcgm_name(sample_field: str) -> str:
    """The dcgm-exporter name of a GpuSample field (``"temperature_c"`` -> ``DCGM_FI_DEV_GPU_TEMP``)."""
    return next(f.name for f in DCGM_FIELDS if f.sample_field == sample_field)
