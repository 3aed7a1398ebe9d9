"""Test helper: small hand-made HistoryFrames — a healthy one and variations that break one rule each."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor.frame import GpuMeta, GpuSeries, HistoryFrame, HostSeries, ProcessSamples

START_S = 1_763_942_400.0  # Monday 2025-11-24 00:00 UTC
STEP_S = 60.0
HOURS = 8
N = HOURS * 60  # one row a minute


def desktop_meta(**changes: Any) -> GpuMeta:
    meta = GpuMeta(index=0, uuid="GPU-desk-0", name="NVIDIA GeForce RTX 4090", vram_total_mib=24564.0,
                   power_limit_w=450.0, power_limit_settable=True, sm_clock_max_mhz=2520.0, temp_slowdown_c=89.0,
                   pcie_gen_max=4, pcie_width_max=16, driver_version="560.35", persistence_mode=True)
    return dataclasses.replace(meta, **changes)


def laptop_meta(**changes: Any) -> GpuMeta:
    meta = GpuMeta(index=0, uuid="GPU-lap-0", name="NVIDIA GeForce RTX 4090 Laptop GPU", vram_total_mib=16376.0,
                   power_limit_w=150.0, power_limit_settable=False, sm_clock_max_mhz=2040.0, temp_slowdown_c=87.0,
                   pcie_gen_max=4, pcie_width_max=16, driver_version="560.35", persistence_mode=True, is_laptop=True)
    return dataclasses.replace(meta, **changes)


def busy_mask() -> np.ndarray:
    """Busy from hour 1 to hour 7 (6 hours), idle otherwise."""
    minute = np.arange(N)
    return (minute >= 60) & (minute < 420)


def gpu(meta: GpuMeta | None = None, **columns: Any) -> GpuSeries:
    """A healthy GPU: 6 h of a training run at 95 %, 60 % VRAM, 70 °C, no throttling, full PCIe link."""
    meta = meta or desktop_meta()
    busy = busy_mask()
    t = START_S + STEP_S * np.arange(N, dtype=np.float64)
    total = meta.vram_total_mib or 24564.0
    base: dict[str, Any] = {
        "utilization_gpu_pct": np.where(busy, 95.0, 0.0),
        "utilization_mem_pct": np.where(busy, 40.0, 0.0),
        "vram_used_mib": np.where(busy, 0.6 * total, 400.0),
        "temperature_c": np.where(busy, 70.0, 40.0),
        "power_w": np.where(busy, 300.0, 20.0),
        "energy_mj": np.full(N, np.nan),
        "sm_clock_mhz": np.where(busy, 2400.0, 210.0),
        "mem_clock_mhz": np.full(N, 10501.0),
        "fan_pct": np.full(N, 50.0),
        "pcie_gen": np.where(busy, float(meta.pcie_gen_max or 4), 1.0),
        "pcie_width": np.full(N, float(meta.pcie_width_max or 16)),
        "clock_event_reasons": np.where(busy, 0, 1).astype(np.int64),
    }
    base.update(columns)
    return GpuSeries(meta=meta, time_s=t, duration_s=np.full(N, STEP_S), **base)


def host(cpu_pct: Any = None, on_ac: Any = None) -> HostSeries:
    t = START_S + STEP_S * np.arange(N, dtype=np.float64)
    cpu = np.where(busy_mask(), 35.0, 5.0) if cpu_pct is None else np.broadcast_to(cpu_pct, (N,)).astype(float)
    ac = np.ones(N) if on_ac is None else np.broadcast_to(on_ac, (N,)).astype(float)
    return HostSeries(time_s=t, duration_s=np.full(N, STEP_S), cpu_pct=cpu, ram_used_mib=np.full(N, 12000.0),
                      ram_total_mib=np.full(N, 32768.0), on_ac_power=ac, battery_pct=np.full(N, 90.0))


def processes(rows: list[tuple[int, int, str, float, np.ndarray]] | None = None) -> ProcessSamples:
    """(gpu index, pid, name, vram MiB, minute mask) per process; default: train.py while busy."""
    rows = rows if rows is not None else [(0, 1234, "train.py", 14000.0, busy_mask())]
    t_all, g_all, p_all, v_all, n_all = [], [], [], [], []
    names: list[str] = []
    for gpu_index, pid, name, vram, mask in rows:
        if name not in names:
            names.append(name)
        minutes = np.flatnonzero(mask)
        t_all.append(START_S + STEP_S * minutes)
        g_all.append(np.full(minutes.size, gpu_index))
        p_all.append(np.full(minutes.size, pid))
        v_all.append(np.full(minutes.size, vram))
        n_all.append(np.full(minutes.size, names.index(name)))
    t = np.concatenate(t_all)
    order = np.argsort(t, kind="stable")
    return ProcessSamples(time_s=t[order], duration_s=np.full(t.size, STEP_S),
                          gpu_index=np.concatenate(g_all).astype(np.int64)[order],
                          pid=np.concatenate(p_all).astype(np.int64)[order],
                          vram_mib=np.concatenate(v_all).astype(float)[order],
                          name_id=np.concatenate(n_all).astype(np.int64)[order], names=tuple(names))


def frame(gpus: tuple[GpuSeries, ...] | None = None, **changes: Any) -> HistoryFrame:
    base = HistoryFrame(start_s=START_S, end_s=START_S + N * STEP_S, gpus=gpus or (gpu(),), host=host(),
                        processes=processes(), platform="linux")
    return dataclasses.replace(base, **changes)
