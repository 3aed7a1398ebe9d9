"""HistoryFrame: the only input of the advisor — numpy arrays per metric and GPU, plus metadata.

The history store builds frames (``desktop.history``); the advisor only reads them. Times
are UTC epoch seconds (float64); ``duration_s`` says how long each row stands for (the
sampling interval for raw rows, 60 or 3600 for rollups), so every mean is time-weighted.
Missing values are NaN.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: GPU metric arrays carried in a GpuSeries (names as in the telemetry metric registry).
GPU_SERIES_METRICS: tuple[str, ...] = (
    "utilization_gpu_pct",
    "utilization_mem_pct",
    "vram_used_mib",
    "temperature_c",
    "power_w",
    "energy_mj",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "fan_pct",
    "pcie_gen",
    "pcie_width",
)


@dataclass(frozen=True)
class GpuMeta:
    """Static facts about one GPU as the advisor needs them."""

    index: int
    uuid: str
    name: str
    vram_total_mib: float | None = None
    power_limit_w: float | None = None
    power_limit_settable: bool | None = None
    sm_clock_max_mhz: float | None = None
    temp_slowdown_c: float | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    driver_version: str | None = None
    persistence_mode: bool | None = None
    is_laptop: bool = False
    simulated: bool = False

    @property
    def key(self) -> str:
        """The GPU's identity: its uuid (the history's key: NVML's uuid, else an import's machine + bus id, else
        its file), never its index: two machines' logs both say GPU 0. A GPU known by no uuid is its index."""
        return self.uuid or f"index:{self.index}"


@dataclass(frozen=True)
class GpuSeries:
    """One GPU's history over the frame's range, one row per sample or rollup bucket."""

    meta: GpuMeta
    time_s: FloatArray
    duration_s: FloatArray
    utilization_gpu_pct: FloatArray
    utilization_mem_pct: FloatArray
    vram_used_mib: FloatArray
    temperature_c: FloatArray
    power_w: FloatArray
    #: Energy used within each row's duration (mJ); NaN where unknown (then power x time).
    energy_mj: FloatArray
    sm_clock_mhz: FloatArray
    mem_clock_mhz: FloatArray
    fan_pct: FloatArray
    pcie_gen: FloatArray
    pcie_width: FloatArray
    #: Raw clock-event mask per row (raw data), 0 where unknown.
    clock_event_reasons: IntArray
    #: Seconds within each row spent under each single reason bit, keyed by bit value
    #: (e.g. 0x40); for raw rows it is ``duration_s`` where the bit is set. The keys are
    #: ints (bit values), not names: decode with advisor.clock_events.ClockEventReason.
    reason_seconds: dict[int, FloatArray] = field(default_factory=dict)
    #: Seconds within each row under a reason as the driver counted them (NVML's per-reason
    #: counters: exact, where sampled bits miss episodes between samples), keyed by bit value
    #: (0x4 SW power cap, 0x20 SW thermal, 0x40 HW thermal, 0x80 HW power brake); NaN where the
    #: GPU keeps no counter. A raw row holds the time since the sample before it.
    counted_seconds: dict[int, FloatArray] = field(default_factory=dict)
    #: Busy seconds within each row by utilization alone (above the busy threshold, counted per raw
    #: sample); ``advisor.stats.busy_seconds`` applies the process lists (``advisor.busy``).
    busy_s: FloatArray | None = None
    #: Per-row max of utilization / VRAM / temperature where rows are rollups (else = value).
    utilization_gpu_max_pct: FloatArray | None = None
    vram_used_max_mib: FloatArray | None = None
    temperature_max_c: FloatArray | None = None
    #: How hard the GPU worked, % of its calibrated full load (measured SM activity where the GPU
    #: has it); None where the history predates it, NaN rows where it was not known.
    effective_load_pct: FloatArray | None = None
    #: The rows are raw samples (one reading each), not rollup buckets: their busy seconds can be
    #: counted again from utilization at any threshold (a bucket keeps the one it was rolled with).
    samples: bool = False
    #: The enforced power limit in force at each row (W; the history's stored changes, a step function): a
    #: laptop's moves with Dynamic Boost, firmware modes and the battery. None: not known per row (then
    #: ``meta.power_limit_w``, the last one read, stands for every row); NaN rows: not known then.
    power_limit_w: FloatArray | None = None
    #: Seconds within each row under a power reason (SW power cap or HW power brake, sampled bits) and the
    #: mean power over those seconds only (W, NaN where none): a rollup row's own ``power_w`` mixes in its
    #: idle seconds. None where the history predates them (schema v11).
    capped_s: FloatArray | None = None
    power_capped_w: FloatArray | None = None
    #: The slowdown temperature in force at each row (°C; the history's stored changes). None: not known per row.
    temp_slowdown_c: FloatArray | None = None

    def limit_per_row(self) -> FloatArray:
        """The power limit in force at each row (W, NaN: unknown): the stored changes, else the GPU's one limit."""
        if self.power_limit_w is not None:
            return self.power_limit_w
        return np.full(len(self), np.nan if self.meta.power_limit_w is None else float(self.meta.power_limit_w))

    def limit_in_force(self, rows: npt.NDArray[np.bool_] | None = None) -> float | None:
        """The power limit (W) in force over most of ``rows`` (by time; default: all rows): what a figure over
        them is weighed against when it takes one limit. None where no limit is known."""
        take = np.ones(len(self), dtype=bool) if rows is None else np.asarray(rows, dtype=bool)
        held = held_most(self.limit_per_row()[take], self.duration_s[take])
        if held is None and (rows is None or not len(self)):
            return self.meta.power_limit_w
        return held

    def slowdown_in_force(self, rows: npt.NDArray[np.bool_] | None = None) -> float | None:
        """The slowdown temperature (°C) in force over most of ``rows`` (default: all), else the GPU's last read."""
        if self.temp_slowdown_c is not None:
            take = np.ones(len(self), dtype=bool) if rows is None else np.asarray(rows, dtype=bool)
            held = held_most(self.temp_slowdown_c[take], self.duration_s[take])
            if held is not None:
                return held
        return self.meta.temp_slowdown_c

    def __len__(self) -> int:
        return int(self.time_s.shape[0])


@dataclass(frozen=True)
class HostSeries:
    time_s: FloatArray
    duration_s: FloatArray
    cpu_pct: FloatArray
    ram_used_mib: FloatArray
    ram_total_mib: FloatArray
    #: 1.0 on mains, 0.0 on battery, NaN unknown.
    on_ac_power: FloatArray
    battery_pct: FloatArray


@dataclass(frozen=True)
class ProcessSamples:
    """GPU processes seen over time: one row per (sample time, pid, GPU)."""

    time_s: FloatArray
    #: How long each row stands for (the process polling period).
    duration_s: FloatArray
    gpu_index: IntArray
    pid: IntArray
    vram_mib: FloatArray
    #: Index into ``names`` per row.
    name_id: IntArray
    names: tuple[str, ...]
    users: tuple[str | None, ...] = ()
    #: Per row: True for a compute (or mixed) process, False for a graphics-only one (Xorg, a
    #: compositor, a game); None where the kinds are not known (every row then counts as work).
    compute: npt.NDArray[np.bool_] | None = None
    #: Per row, the GPU by identity: an index into ``gpu_keys`` (``GpuMeta.key``); None where the rows
    #: know only the index (then two GPUs that share an index share their rows).
    gpu_key_ix: IntArray | None = None
    gpu_keys: tuple[str, ...] = ()

    def rows_of(self, meta: GpuMeta) -> npt.NDArray[np.bool_]:
        """The rows of one GPU, by its identity where the rows carry it, else by its index."""
        if self.gpu_key_ix is None:
            return np.asarray(self.gpu_index == meta.index)
        if meta.key not in self.gpu_keys:
            return np.zeros(self.time_s.shape, dtype=bool)
        return np.asarray(self.gpu_key_ix == self.gpu_keys.index(meta.key))


@dataclass(frozen=True)
class Event:
    time_s: float
    kind: str  # throttle_start | throttle_end | alert | driver_change | vbios_change | gpu_lost | gpu_back | ...
    gpu_uuid: str | None
    detail: str = ""


@dataclass(frozen=True)
class StressResult:
    run_id: int
    started_s: float
    ended_s: float
    gpu_uuid: str
    gpu_name: str
    workload: str
    dtype: str
    unit: str  # "TFLOP/s", "GB/s", "steps/s"
    peak_throughput: float
    sustained_throughput: float
    throttled: bool
    errors: int
    driver_version: str | None
    summary: str
    device: str = ""  # cuda:0 | cpu | sim
    #: Stopped before its time (cancelled, the temperature guard, a crash): never a baseline.
    aborted: bool = False


@dataclass(frozen=True)
class HistoryFrame:
    """Everything the advisor may look at for one time range."""

    start_s: float
    end_s: float
    gpus: tuple[GpuSeries, ...]
    host: HostSeries | None = None
    processes: ProcessSamples | None = None
    events: tuple[Event, ...] = ()
    stress_results: tuple[StressResult, ...] = ()
    #: "linux" | "windows" | "darwin" — actions are tailored to it.
    platform: str = "linux"
    #: True when the frame comes from the demo database.
    demo: bool = False
    #: How its window is named where it is one ("2026-W48", "the last 7 days"): ``advisor.span`` says it.
    label: str = ""

    def gpu(self, index: int) -> GpuSeries | None:
        """The first GPU at ``index``: two machines' GPUs may share one; ``gpu_by_key`` finds each."""
        for series in self.gpus:
            if series.meta.index == index:
                return series
        return None

    def gpu_by_key(self, key: str) -> GpuSeries | None:
        """The GPU whose identity (``GpuMeta.key``) is ``key``."""
        for series in self.gpus:
            if series.meta.key == key:
                return series
        return None


def held_most(values: FloatArray, weights: FloatArray | None = None) -> float | None:
    """The value held over most of the rows (each weighted by ``weights``, e.g. its seconds; NaN rows drop out):
    the one limit a run is weighed against when its limit moved. None where no row has one."""
    values = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(values)
    if not ok.any():
        return None
    distinct, inverse = np.unique(values[ok], return_inverse=True)
    weight = np.ones(int(ok.sum())) if weights is None else np.nan_to_num(np.asarray(weights)[ok]) + 1e-9
    return float(distinct[int(np.argmax(np.bincount(inverse.reshape(-1), weights=weight)))])
