"""Time-weighted, NaN-aware statistics over a HistoryFrame: busy time, intervals, shares, percentiles.

Every row of a GpuSeries stands for ``duration_s`` seconds starting at ``time_s`` (raw samples
and rollup buckets alike), so means are weighted by duration and a missing value (NaN) simply
drops out of both the numerator and the weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from advisor.busy import DEFAULT_BUSY_UTIL_PCT, utilization_busy, with_processes
from advisor.clock_events import POWER_REASONS, THERMAL_REASONS, bits, family_reasons
from advisor.frame import FloatArray, GpuSeries, HistoryFrame, ProcessSamples

#: The causes shown in summaries (their families), in the order a user reads them, each with its reason bits.
THROTTLE_CAUSES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("thermal", bits(THERMAL_REASONS)),
    ("power cap", bits(POWER_REASONS)),
    ("HW slowdown", bits(family_reasons("hw_slowdown"))),
)

#: Busy stretches closer than this are one interval (a checkpoint pause is not the end of a job).
MERGE_GAP_S = 120.0

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Interval:
    """A stretch of time, UTC epoch seconds, [start_s, end_s)."""

    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def weighted_mean(values: FloatArray, weights: FloatArray) -> float:
    """Mean of ``values`` weighted by ``weights``; NaN values and their weights drop out; NaN if none left."""
    ok = np.isfinite(values) & np.isfinite(weights) & (weights > 0)
    total = float(weights[ok].sum())
    if total <= 0:
        return float("nan")
    return float((values[ok] * weights[ok]).sum() / total)


def weighted_percentile(values: FloatArray, weights: FloatArray, pct: float) -> float:
    """The ``pct`` percentile of ``values`` where each counts ``weights`` times (NaN ignored)."""
    ok = np.isfinite(values) & np.isfinite(weights) & (weights > 0)
    if not ok.any():
        return float("nan")
    v = values[ok]
    w = weights[ok]
    order = np.argsort(v, kind="stable")
    cumulative = np.cumsum(w[order])
    cut = pct / 100.0 * cumulative[-1]
    pos = int(np.searchsorted(cumulative, cut, side="left"))
    return float(v[order][min(pos, len(v) - 1)])


def nanmax(values: FloatArray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size else float("nan")


def _rows_covered(gpu: GpuSeries, processes: ProcessSamples, rows: BoolArray) -> BoolArray:
    """Per row of ``gpu``: whether a process row in ``rows`` covers it (a difference array, no Python loop)."""
    starts = processes.time_s[rows]
    lo = np.searchsorted(gpu.time_s, starts, side="left")
    hi = np.maximum(np.searchsorted(gpu.time_s, starts + np.maximum(processes.duration_s[rows], 1e-9), side="left"),
                    lo + 1)
    diff = np.zeros(len(gpu) + 2)
    np.add.at(diff, np.minimum(lo, len(gpu)), 1.0)
    np.add.at(diff, np.minimum(hi, len(gpu)), -1.0)
    covered: BoolArray = np.cumsum(diff)[: len(gpu)] > 0
    return covered


def compute_presence(gpu: GpuSeries, processes: ProcessSamples | None) -> FloatArray:
    """Per row of ``gpu``: 1.0 a compute process was listed on it, 0.0 only other processes were, NaN no list.

    Without process kinds (``processes.compute`` None) a process holding memory counts as compute
    and rows without one stay unknown.
    """
    out = np.full(len(gpu), np.nan)
    if processes is None or processes.time_s.size == 0 or len(gpu) == 0:
        return out
    mine = processes.rows_of(gpu.meta)
    if processes.compute is None:
        out[_rows_covered(gpu, processes, mine & (np.nan_to_num(processes.vram_mib) > 0))] = 1.0
        return out
    out[_rows_covered(gpu, processes, mine)] = 0.0
    out[_rows_covered(gpu, processes, mine & processes.compute)] = 1.0
    return out


def busy_seconds(gpu: GpuSeries, processes: ProcessSamples | None = None, *,
                 threshold_pct: float = DEFAULT_BUSY_UTIL_PCT) -> FloatArray:
    """Busy seconds per row, by the one definition (``advisor.busy``): utilization above ``threshold_pct``
    (for rollup buckets their stored ``busy_s``: the rollups counted it per raw sample, at the
    threshold of that time), and a compute process where the GPU's processes were listed; unknown
    counts as idle."""
    if gpu.busy_s is not None and not gpu.samples:
        dur = np.where(gpu.duration_s > 0, gpu.duration_s, 1.0)
        share = np.minimum(gpu.busy_s, gpu.duration_s) / dur
    else:
        share = utilization_busy(gpu.utilization_gpu_pct, threshold_pct=threshold_pct)
    busy = with_processes(share, compute_presence(gpu, processes)) * gpu.duration_s
    return np.asarray(np.nan_to_num(busy, nan=0.0), dtype=np.float64)


def busy_fraction(gpu: GpuSeries, processes: ProcessSamples | None = None, *,
                  threshold_pct: float = DEFAULT_BUSY_UTIL_PCT) -> FloatArray:
    dur = np.where(gpu.duration_s > 0, gpu.duration_s, 1.0)
    return np.asarray(busy_seconds(gpu, processes, threshold_pct=threshold_pct) / dur, dtype=np.float64)


def mean_util_while_busy(gpu: GpuSeries, busy_s: FloatArray, rows: slice | None = None) -> float:
    """Time-weighted mean utilization over busy time (idle seconds count as 0 % in rollups)."""
    part = rows if rows is not None else slice(None)
    util = gpu.utilization_gpu_pct[part]
    # Rows with busy time only: a desktop's 3 % rows are idle and must not raise the mean of the busy ones.
    ok = np.isfinite(util) & (busy_s[part] > 0)
    busy_total = float(busy_s[part][ok].sum())
    if busy_total <= 0:
        return float("nan")
    return min(100.0, float((util[ok] * gpu.duration_s[part][ok]).sum() / busy_total))


def reason_seconds(gpu: GpuSeries, bits: tuple[int, ...]) -> FloatArray:
    """Seconds per row under any of ``bits``: the driver's counted time where the history has it,
    else the sampled reasons (the rollup's per-bit seconds, or the raw mask).

    A 1 Hz sample sees a reason only if it holds at that instant; NVML's counters see every
    episode, so a row with a counter for a bit uses it. Several bits of one cause often hold
    together (HW thermal implies SW thermal), so the per-row maximum is used, a lower bound of
    their union.
    """
    per_bit = []
    for bit in bits:
        sampled = gpu.reason_seconds.get(bit)
        if sampled is None:
            sampled = np.where((gpu.clock_event_reasons & bit) != 0, gpu.duration_s, 0.0)
        counted = gpu.counted_seconds.get(bit)
        per_bit.append(sampled if counted is None else np.where(np.isfinite(counted), counted, sampled))
    if not per_bit:
        return np.zeros(len(gpu), dtype=np.float64)
    # fmax, not nanmax: a row NaN for every bit stays NaN without a warning.
    return np.asarray(np.minimum(np.fmax.reduce(per_bit), gpu.duration_s), dtype=np.float64)


def energy_kwh(gpu: GpuSeries) -> FloatArray:
    """Energy per row in kWh: the energy counter's delta, else power x time."""
    from_power = np.nan_to_num(gpu.power_w) * gpu.duration_s * 1000.0
    mj = np.where(np.isfinite(gpu.energy_mj), gpu.energy_mj, from_power)
    return np.asarray(mj / 3.6e9, dtype=np.float64)


def intervals_from_mask(time_s: FloatArray, duration_s: FloatArray, mask: BoolArray,
                        merge_gap_s: float = MERGE_GAP_S) -> list[Interval]:
    """Contiguous stretches of rows where ``mask`` holds; gaps up to ``merge_gap_s`` are bridged."""
    if not mask.any():
        return []
    m = mask.astype(np.int8)
    edges = np.diff(np.concatenate(([0], m, [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1) - 1
    out: list[Interval] = []
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        start = float(time_s[s])
        end = float(time_s[e] + duration_s[e])
        if out and start - out[-1].end_s <= merge_gap_s:
            out[-1] = Interval(out[-1].start_s, end)
        else:
            out.append(Interval(start, end))
    return out


def busy_intervals(gpu: GpuSeries, processes: ProcessSamples | None = None,
                   merge_gap_s: float = MERGE_GAP_S, *, threshold_pct: float = DEFAULT_BUSY_UTIL_PCT) -> list[Interval]:
    """Stretches when the GPU was busy (a row counts when at least half of it was busy)."""
    busy = busy_fraction(gpu, processes, threshold_pct=threshold_pct) >= 0.5
    return intervals_from_mask(gpu.time_s, gpu.duration_s, busy, merge_gap_s)


def rows_in(time_s: FloatArray, interval: Interval) -> slice:
    """The rows of a time-sorted series that start within ``interval``."""
    lo = int(np.searchsorted(time_s, interval.start_s, side="left"))
    hi = int(np.searchsorted(time_s, interval.end_s, side="left"))
    return slice(lo, hi)


def host_values_at(frame: HistoryFrame, time_s: FloatArray, column: str) -> FloatArray:
    """A host column (e.g. ``cpu_pct``) looked up at GPU row times (the latest host row at or before)."""
    host = frame.host
    if host is None or host.time_s.size == 0:
        return np.full(time_s.shape, np.nan)
    values: FloatArray = getattr(host, column)
    pos = np.searchsorted(host.time_s, time_s, side="right") - 1
    ok = pos >= 0
    out = np.full(time_s.shape, np.nan)
    out[ok] = values[pos[ok]]
    # A host row far from the GPU row (host not recorded then) says nothing about it.
    stale = np.zeros(time_s.shape, dtype=bool)
    stale[ok] = time_s[ok] - host.time_s[pos[ok]] > np.maximum(host.duration_s[pos[ok]], 1.0) * 3 + 60
    out[stale] = np.nan
    return out


def values_at(gpu: GpuSeries, time_s: FloatArray, column: FloatArray) -> FloatArray:
    """``column`` of ``gpu`` at arbitrary times (the row holding each time; NaN outside any row)."""
    pos = np.searchsorted(gpu.time_s, time_s, side="right") - 1
    out = np.full(time_s.shape, np.nan)
    ok = pos >= 0
    out[ok] = column[pos[ok]]
    late = np.zeros(time_s.shape, dtype=bool)
    late[ok] = time_s[ok] >= gpu.time_s[pos[ok]] + gpu.duration_s[pos[ok]] + 60.0
    out[late] = np.nan
    return out


def fmt_hours(seconds: float) -> str:
    hours = seconds / 3600.0
    return f"{hours:.1f} h" if hours >= 1 else f"{seconds / 60.0:.0f} min"

