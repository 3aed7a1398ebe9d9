"""The GPU samples `rigscope run` took itself, as a HistoryFrame: the card's source when the history has none.

The history is where a job's card is read from (the same rows every later `rigscope jobs show` and the
Jobs page read). Where it holds no sample of the job's GPU over its span (the recorder writes the history
and watches another GPU: a real one beside a simulated job; a history that could not be written), the
samples the run took for its verdict and record are the job's telemetry; without this the card said
"No GPU samples" while the run record beside it held the energy and power of the same job.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from advisor.busy import utilization_busy
from advisor.frame import FloatArray, GpuSeries, HistoryFrame
from desktop.history.frames import gpu_meta
from desktop.telemetry.model import CLOCK_EVENT_COUNTERS, GpuInfo

#: The reason bits a GpuSeries keeps per-row seconds for (the history's REASON_BITS).
_REASON_BITS = (0x4, 0x8, 0x20, 0x40, 0x80)


def _durations(time_s: FloatArray) -> FloatArray:
    """Each sample stands for the time to the next one; the last for the median interval."""
    if len(time_s) == 0:
        return np.zeros(0)
    gaps = np.diff(time_s)
    last = float(np.median(gaps)) if len(gaps) else 1.0
    return np.asarray(np.append(gaps, last), dtype=np.float64)


def trace_series(info: GpuInfo, time_s: FloatArray, columns: Mapping[str, FloatArray]) -> GpuSeries | None:
    """One GPU's raw samples (columns named as in ``GpuSample``) as the history's raw rows would read."""
    time_s = np.asarray(time_s, dtype=np.float64)
    n = len(time_s)
    if n == 0:
        return None
    nan = np.full(n, np.nan)

    def col(name: str) -> FloatArray:
        values = columns.get(name)
        return nan.copy() if values is None else np.asarray(values, dtype=np.float64)[:n]

    dur = _durations(time_s)
    counter = col("energy_mj")  # the driver's cumulative counter: row i used what it counts up to row i + 1
    used = np.append(np.diff(counter), np.nan)
    used = np.where(np.isfinite(used) & (used >= 0), used, np.nan)  # a counter that went back was reset
    reasons = np.nan_to_num(col("clock_event_reasons"), nan=0.0).astype(np.int64)
    util = col("utilization_gpu_pct")
    effective = col("effective_load_pct") if "effective_load_pct" in columns else None
    return GpuSeries(
        meta=gpu_meta(info), time_s=time_s, duration_s=dur, utilization_gpu_pct=util,
        utilization_mem_pct=col("utilization_mem_pct"), vram_used_mib=col("vram_used_mib"),
        temperature_c=col("temperature_c"), power_w=col("power_w"), energy_mj=used, sm_clock_mhz=col("sm_clock_mhz"),
        mem_clock_mhz=col("mem_clock_mhz"), fan_pct=col("fan_pct"), pcie_gen=col("pcie_gen"),
        pcie_width=col("pcie_width"), clock_event_reasons=reasons,
        reason_seconds={bit: np.where((reasons & bit) != 0, dur, 0.0) for bit in _REASON_BITS},
        counted_seconds={int(reason): col(name) for name, reason in CLOCK_EVENT_COUNTERS},
        busy_s=utilization_busy(util) * dur, effective_load_pct=effective, samples=True,
        power_limit_w=col("power_limit_w") if "power_limit_w" in columns else None)


def trace_frame(infos: Mapping[int, GpuInfo], time_s: FloatArray, columns: Mapping[int, Mapping[str, FloatArray]],
                *, start_s: float, end_s: float) -> HistoryFrame:
    """The run's own samples of each GPU in ``infos`` (by index) as a frame over [start_s, end_s)."""
    series = [s for index, info in sorted(infos.items()) if index in columns
              if (s := trace_series(info, time_s, columns[index])) is not None]
    return HistoryFrame(start_s=start_s, end_s=end_s, gpus=tuple(series))


def has_samples(gpus: list[GpuSeries], start_s: float, end_s: float) -> bool:
    """Whether any of ``gpus`` has a row inside [start_s, end_s)."""
    return any(bool(((g.time_s >= start_s) & (g.time_s < end_s)).any()) for g in gpus)
