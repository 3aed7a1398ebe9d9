"""Build the advisor's HistoryFrame for a time range from the history store.

Spans over two days read minute rollups (a week is ~10,000 rows per GPU instead of
~600,000); shorter spans read raw samples. Either way every GpuSeries field is filled:
per-row durations, energy used within each row, busy seconds, per-reason seconds, the
power-capped seconds and their mean power, per-row maxima and the power limit in force at
each row (``limits``), so the advisor computes time-weighted figures the same way for both.
"""

from __future__ import annotations

import sys

import numpy as np

from advisor.frame import GPU_SERIES_METRICS, GpuMeta, GpuSeries, HistoryFrame, HostSeries, ProcessSamples
from desktop.history import blocks, codec, limits, stress_runs
from desktop.history.host_query import host_rows
from desktop.history.layout import REASON_BITS
from desktop.history.query import Resolution, gpu_rows
from desktop.history.store_api import StoreApi
from desktop.telemetry.model import CLOCK_EVENT_COUNTERS, GpuInfo

#: What a GpuSeries is made of, as query names (reading only these saves a third of the columns).
_FRAME_METRICS: tuple[str, ...] = (
    *GPU_SERIES_METRICS, "energy_used_mj", "clock_event_reasons", "busy_s", "duration_s",
    "utilization_gpu_pct_max", "vram_used_mib_max", "temperature_c_max", *(f"reason_s_{bit}" for bit in REASON_BITS),
    *(name for name, _ in CLOCK_EVENT_COUNTERS), "effective_load_pct", "capped_s", "power_capped_w",
)
#: Above this span the frame is built from minute rollups.
RAW_SPAN_LIMIT_S = 2 * 86400.0
_DEFAULT_PROCESS_PERIOD_S = 5.0


def platform_name(platform: str) -> str:
    if platform.startswith("win"):
        return "windows"
    if platform == "darwin":
        return "darwin"
    return "linux"


def gpu_meta(info: GpuInfo) -> GpuMeta:
    return GpuMeta(
        index=info.index, uuid=info.uuid, name=info.name, vram_total_mib=info.vram_total_mib,
        power_limit_w=info.power_limit_enforced_w, power_limit_settable=info.power_limit_settable,
        sm_clock_max_mhz=info.sm_clock_max_mhz, temp_slowdown_c=info.temp_slowdown_c,
        pcie_gen_max=info.pcie_gen_max, pcie_width_max=info.pcie_width_max, driver_version=info.driver_version,
        persistence_mode=info.persistence_mode, is_laptop=info.is_laptop, simulated=info.simulated,
    )


def _gpu_series(store: StoreApi, info: GpuInfo, start_s: float, end_s: float,
                resolution: Resolution) -> GpuSeries | None:
    gpu_id = store.gpu_id(info.uuid)
    if gpu_id is None:
        return None
    time_s, cols = gpu_rows(store, gpu_id, start_s, end_s, resolution, metrics=_FRAME_METRICS)
    if len(time_s) == 0:
        return None
    in_force = limits.limits_at(store.conn, gpu_id, time_s)
    return GpuSeries(
        meta=gpu_meta(info),
        time_s=time_s,
        duration_s=cols["dur_s"],
        utilization_gpu_pct=cols["utilization_gpu_pct"],
        utilization_mem_pct=cols["utilization_mem_pct"],
        vram_used_mib=cols["vram_used_mib"],
        temperature_c=cols["temperature_c"],
        power_w=cols["power_w"],
        energy_mj=cols["energy_used_mj"],
        sm_clock_mhz=cols["sm_clock_mhz"],
        mem_clock_mhz=cols["mem_clock_mhz"],
        fan_pct=cols["fan_pct"],
        pcie_gen=cols["pcie_gen"],
        pcie_width=cols["pcie_width"],
        clock_event_reasons=cols["reasons_any"].astype(np.int64),
        reason_seconds={bit: cols[f"r_{bit}_s"] for bit in REASON_BITS},
        counted_seconds={int(reason): cols[name] for name, reason in CLOCK_EVENT_COUNTERS},
        busy_s=cols["busy_s"],
        utilization_gpu_max_pct=cols["utilization_gpu_pct_max"],
        vram_used_max_mib=cols["vram_used_mib_max"],
        temperature_max_c=cols["temperature_c_max"],
        effective_load_pct=cols["effective_load_pct"],
        samples=resolution == "raw",
        # The limits in force at each row (schema v11's stored changes); the GPU's last read where none are stored.
        power_limit_w=_per_row(in_force["power_limit_w"], info.power_limit_enforced_w),
        temp_slowdown_c=_per_row(in_force["temp_slowdown_c"], info.temp_slowdown_c),
        capped_s=cols["capped_s"],
        power_capped_w=cols["power_capped_w"],
    )


def _per_row(stored: np.ndarray, last_read: float | None) -> np.ndarray:
    return stored if last_read is None else np.where(np.isfinite(stored), stored, float(last_read))


def _host_series(store: StoreApi, start_s: float, end_s: float, resolution: Resolution) -> HostSeries | None:
    time_s, cols = host_rows(store, start_s, end_s, resolution)
    if len(time_s) == 0:
        return None
    return HostSeries(time_s=time_s, duration_s=cols["dur_s"], cpu_pct=cols["cpu_pct"],
                      ram_used_mib=cols["ram_used_mib"], ram_total_mib=cols["ram_total_mib"],
                      on_ac_power=cols["on_ac_power"], battery_pct=cols["battery_pct"])


def _processes(store: StoreApi, start_s: float, end_s: float,
               index_of_gpu: dict[int, int], key_of_gpu: dict[int, str]) -> ProcessSamples | None:
    # Rows in primary-key order (ts, gpu, pid), whole days from their blocks: a week is ~100,000 rows.
    arr = blocks.fetch(store, "process_samples", ["ts", "gpu", "pid", "name_id", "user_id", "vram_mib", "kind"],
                       codec.to_ms(start_s), codec.to_ms(end_s), not_null=("ts", "gpu", "pid", "name_id"))
    if len(arr) == 0:
        return None
    time_s = arr[:, 0] / 1000.0
    gaps = np.diff(np.unique(time_s))
    period = float(np.median(gaps)) if len(gaps) else _DEFAULT_PROCESS_PERIOD_S
    # Names numbered in order of first appearance; each name's user is the one of its first row.
    raw_names = arr[:, 3].astype(np.int64)
    distinct, first = np.unique(raw_names, return_index=True)
    order = np.argsort(first, kind="stable")
    number = np.empty(len(distinct), dtype=np.int64)
    number[order] = np.arange(len(distinct))
    user_ids = arr[first[order], 4]
    # Only the strings these rows name (the table also holds every name and user ever seen).
    wanted = sorted({int(i) for i in distinct} | {int(u) for u in user_ids if np.isfinite(u)})
    strings = store.strings_by_id(wanted)
    gpu_ids, gpu_of_row = np.unique(arr[:, 1].astype(np.int64), return_inverse=True)
    gpu_index = np.array([index_of_gpu.get(int(g), -1) for g in gpu_ids], dtype=np.int64)
    # By identity too: an imported machine's GPU 0 and the local GPU 0 are two GPUs with their own processes.
    gpu_keys = tuple(key_of_gpu.get(int(g), f"id:{int(g)}") for g in gpu_ids)
    return ProcessSamples(
        time_s=time_s,
        duration_s=np.full(len(arr), period),
        gpu_index=gpu_index[gpu_of_row.reshape(-1)],
        pid=arr[:, 2].astype(np.int64),
        vram_mib=arr[:, 5] / 10.0,
        name_id=number[np.searchsorted(distinct, raw_names)],
        names=tuple(strings.get(int(sid), "?") for sid in distinct[order]),
        users=tuple(strings.get(int(u)) if np.isfinite(u) else None for u in user_ids),
        # A graphics-only process (Xorg, a compositor) is no work for the busy definition (advisor.busy).
        compute=arr[:, 6] != codec.PROCESS_KINDS.index("graphics"),
        gpu_key_ix=np.asarray(gpu_of_row.reshape(-1), dtype=np.int64),
        gpu_keys=gpu_keys,
    )


#: The stress runs a frame carries: the newest before its end. The advisor wants the latest run of each GPU and
#: each kind's baseline among its last ten (``advisor.baseline``); a year of daily runs stays a bounded read.
STRESS_RUNS_READ = 200


def load_frame(store: StoreApi, start_s: float, end_s: float, *, platform: str = sys.platform,
               demo: bool = False) -> HistoryFrame:
    """Everything the advisor may look at in [start_s, end_s)."""
    resolution: Resolution = "minute" if end_s - start_s > RAW_SPAN_LIMIT_S else "raw"
    infos = store.gpus()
    series = [s for s in (_gpu_series(store, info, start_s, end_s, resolution) for info in infos) if s is not None]
    ids = {info.uuid: gid for info in infos if (gid := store.gpu_id(info.uuid)) is not None}
    index_of_gpu = {ids[info.uuid]: info.index for info in infos if info.uuid in ids}
    key_of_gpu = {ids[s.meta.uuid]: s.meta.key for s in series if s.meta.uuid in ids}
    stress = stress_runs.runs(store, before_s=end_s, limit=STRESS_RUNS_READ)
    return HistoryFrame(
        start_s=start_s,
        end_s=end_s,
        gpus=tuple(series),
        host=_host_series(store, start_s, end_s, resolution),
        processes=_processes(store, start_s, end_s, index_of_gpu, key_of_gpu),
        events=tuple(store.events(start_s, end_s)),
        stress_results=tuple(sorted(stress, key=lambda r: r.started_s)),
        platform=platform_name(platform),
        demo=demo or store.is_demo,
    )
