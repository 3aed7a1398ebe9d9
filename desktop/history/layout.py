"""The history database's layout: each stored metric's integer scale and the column lists of every table.

Samples are stored as integers scaled per column (0.1 % utilization, 0.1 °C, 0.1 W, ...), which SQLite
writes in one to three bytes. This module says which columns each table holds and how a value is
scaled, for the schema's migrations (``schema``, which create them) and the table modules that write
and read them (``codec``, ``packing``, ``rollup_math``, ``limits``, ...). Some lists are named after
the schema version that created them: a file of any version has the columns in the same order.
"""

from __future__ import annotations

from typing import Final

from advisor.clock_events import SINGLE_REASONS
from desktop.telemetry.model import CLOCK_EVENT_COUNTERS, GPU_METRIC_NAMES

#: Multiply a GpuSample value by this before storing it as an integer.
GPU_SCALES: Final[dict[str, int]] = {
    "utilization_gpu_pct": 10,
    "utilization_mem_pct": 10,
    "vram_used_mib": 10,
    "vram_free_mib": 10,
    "temperature_c": 10,
    "power_w": 10,
    "energy_mj": 1,
    "sm_clock_mhz": 1,
    "mem_clock_mhz": 1,
    "fan_pct": 1,
    "clock_event_reasons": 1,
    "pcie_rx_kib_s": 1,
    "pcie_tx_kib_s": 1,
    "pcie_gen": 1,
    "pcie_width": 1,
    "pstate": 1,
    # Seconds under each clock-event cause (the counter rows of advisor/clock_events.py's table), in ms: NVML
    # counts ns, and a 0.3 s episode must stay 0.3 s.
    **dict.fromkeys((name for name, _reason in CLOCK_EVENT_COUNTERS), 1000),
    "effective_load_pct": 10,
}
assert tuple(GPU_SCALES) == GPU_METRIC_NAMES

#: The gpu_samples columns schema v1 created; later metrics are appended by their own migration
#: (``schema._v6``), so a file of any version has the registry's columns in the registry's order.
V1_GPU_METRICS: Final[tuple[str, ...]] = GPU_METRIC_NAMES[:16]
assert V1_GPU_METRICS[-1] == "pstate"
#: Seconds under each clock-event cause (NVML's counters): summed in rollups, never averaged.
COUNTER_METRICS: Final[tuple[str, ...]] = tuple(name for name, _ in CLOCK_EVENT_COUNTERS)

#: HostSample scalar fields and their scales (cpu_per_core_pct is a blob of int16 x10).
HOST_SCALES: Final[dict[str, int]] = {
    "cpu_pct": 10,
    "cpu_freq_mhz": 1,
    "ram_used_mib": 10,
    "ram_total_mib": 10,
    "swap_used_mib": 10,
    "swap_total_mib": 10,
    "load_1m": 100,
    "load_5m": 100,
    "load_15m": 100,
    "cpu_temp_c": 10,
    "battery_pct": 10,
    "on_ac_power": 1,
}

#: Metrics whose rollups also keep the per-bucket minimum and maximum.
MINMAX_METRICS: Final[tuple[str, ...]] = (
    "utilization_gpu_pct", "vram_used_mib", "temperature_c", "power_w", "sm_clock_mhz",
)
#: Metrics whose rollups keep a time-weighted mean (the energy counter becomes energy used).
MEAN_METRICS: Final[tuple[str, ...]] = tuple(
    m for m in GPU_METRIC_NAMES if m not in ("energy_mj", "clock_event_reasons", *COUNTER_METRICS)
)
REASON_BITS: Final[tuple[int, ...]] = tuple(int(r) for r in SINGLE_REASONS)
#: Rollup host metrics (time-weighted means).
HOST_ROLLUP_METRICS: Final[tuple[str, ...]] = ("cpu_pct", "ram_used_mib", "ram_total_mib", "on_ac_power", "battery_pct")
#: Scale of on_ac_power in host rollups (a share of time, so more than 0/1).
ON_AC_ROLLUP_SCALE: Final = 1000


def v4_rollup_columns() -> list[str]:
    """The value columns schema v4 created in gpu_minute / gpu_hour."""
    cols = [m for m in MEAN_METRICS if m in V1_GPU_METRICS]
    cols += [f"{m}_min" for m in MINMAX_METRICS] + [f"{m}_max" for m in MINMAX_METRICS]
    cols += ["energy_used_mj", "busy_ds", "dur_ds", "reasons_any"]
    cols += [f"r_{bit}_ds" for bit in REASON_BITS]
    return cols


#: GPU metrics schema v9 appended to the raw and rollup tables (time-weighted means in rollups).
V9_GPU_METRICS: Final[tuple[str, ...]] = ("effective_load_pct",)
assert GPU_METRIC_NAMES[-len(V9_GPU_METRICS):] == V9_GPU_METRICS


#: Rollup columns schema v11 appended: seconds under a power reason (SW power cap or HW power brake, from the
#: sampled masks; deciseconds) and the mean power over those seconds only (0.1 W), so that "mean power while
#: capped" on a minute or hour row is not diluted by its idle seconds.
CAPPED_ROLLUP_COLUMNS: Final[tuple[str, ...]] = ("capped_ds", "power_capped_w")


def rollup_columns() -> list[str]:
    """The value columns of gpu_minute / gpu_hour, in order (v6 appended the counted seconds in ms, v9 the
    effective load, v11 the power-capped seconds and their mean power)."""
    return [*v4_rollup_columns(), *COUNTER_METRICS, *V9_GPU_METRICS, *CAPPED_ROLLUP_COLUMNS]


#: Per-process utilization (0.1 %) and attribution (``strings`` ids) that schema v8 appended to process_samples.
PROCESS_V8_COLUMNS: Final[tuple[str, ...]] = ("sm_util_pct", "mem_util_pct", "enc_util_pct", "dec_util_pct",
                                             "command_id", "container_id")


#: Schema v10 (issue 27): the rarely-changing GPU columns of a sample live in ``gpu_packs``, one row per
#: distinct combination, and the sample row holds its id (``pack``). The seconds under each clock-event
#: cause (ms, mostly 0 or the whole interval) share one row column, ``counters``: counter i in bits
#: 16i..16i+14, 0 when none counted anything; a value that does not fit (over 32.767 s, negative) makes it
#: -1, and the four are in ``gpu_counters`` instead. The pack's ``counted`` has bit i set where counter i
#: was read at all (unset: missing, not 0). For the free VRAM the pack holds ``vram_rest`` = free + used
#: (0.1 MiB), which stays put while the used part moves. ``desktop/history/packing.py`` reads and writes it.
PACK_COLUMNS: Final[tuple[str, ...]] = ("vram_rest", "mem_clock_mhz", "clock_event_reasons", "pcie_gen",
                                        "pcie_width", "pstate", "counted")
#: The metrics the packs stand for (``vram_rest`` gives ``vram_free_mib``), in registry order.
PACKED_METRICS: Final[tuple[str, ...]] = ("vram_free_mib", "mem_clock_mhz", "clock_event_reasons", "pcie_gen",
                                          "pcie_width", "pstate")
#: The metrics a gpu_samples row holds in columns of their own since v10, in registry order.
ROW_METRICS: Final[tuple[str, ...]] = tuple(m for m in GPU_METRIC_NAMES
                                            if m not in PACKED_METRICS and m not in COUNTER_METRICS)
#: Bits per counter in the ``counters`` column, and the largest value (ms) one holds there.
COUNTER_BITS: Final = 16
COUNTER_MAX: Final = 0x7FFF
# A counted cause past the fourth (a new row of advisor/clock_events.py's table) needs its schema step to widen this.
assert len(COUNTER_METRICS) * COUNTER_BITS <= 64, "the packed counters column holds four causes"


#: Schema v11 (issue 32): the limits in force per GPU over time, one row per change (``desktop/history/limits.py``
#: writes and reads them): (column, GpuInfo field, scale). The SM clock reference is the GPU's reported max SM clock.
LIMIT_COLUMNS: Final[tuple[tuple[str, str, int], ...]] = (
    ("power_limit_w", "power_limit_enforced_w", 10),
    ("temp_slowdown_c", "temp_slowdown_c", 10),
    ("sm_clock_ref_mhz", "sm_clock_max_mhz", 1),
)
