"""One GPU's figures over a job's span, from the history's rows: busy share, VRAM, heat, power, throttling, energy.

Pure (numpy only), for the job card (``advisor.job_card``). Every figure is time-weighted over the
part of each row inside the job's span; a missing value drops out instead of counting as zero.

- Busy share and mean utilization are over the time the job ran, the guard's pauses left out.
- Time under each throttle cause is NVML's per-cause counter (exact) where the GPU keeps one,
  else the sampled reason bits; ``throttle_timing`` says which.
- Energy is the energy counter's delta where present, else power x time.
- The power cap's share is of the busy seconds, with its limit(s) in force and the mean power over the
  capped seconds: ``advisor.cap_share``, the computation of the Advisor's power-cap card.
- Throttle causes and mean power leave the guard's pauses out (a stopped job is neither throttled
  nor working); energy counts them (the GPU drew idle power meanwhile).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from advisor.cap_share import cap_share, capped_seconds
from advisor.clock_events import CLOCK_EVENT_COUNTERS
from advisor.costs import finite_or_none
from advisor.frame import FloatArray, GpuSeries, ProcessSamples
from advisor.stats import busy_seconds, nanmax

#: Throttle causes in the order the card lists them: (key, counter column, reason bit, label).
THROTTLE_CAUSES: tuple[tuple[str, str, int, str], ...] = tuple(
    (name.removeprefix("clock_event_").removesuffix("_s"), name, int(reason), reason.label)
    for name, reason in CLOCK_EVENT_COUNTERS
)


@dataclass(frozen=True)
class GpuFigures:
    """One GPU over the job's span. None: not known (no samples, or the GPU does not report it)."""

    index: int
    uuid: str
    name: str
    #: Seconds of the span that GPU samples cover (a gap in the recording is not counted).
    sampled_s: float
    #: Busy seconds while the job ran (pauses left out), and their share of the sampled running time.
    busy_s: float
    busy_share: float | None
    #: Time-weighted mean GPU utilization over the sampled running time (%).
    mean_util_pct: float | None
    peak_vram_mib: float | None
    vram_total_mib: float | None
    #: VRAM left at the peak (MiB): total - peak.
    headroom_mib: float | None
    peak_temperature_c: float | None
    mean_power_w: float | None
    #: Seconds under each throttle cause, keyed as THROTTLE_CAUSES; None where neither a counter nor a bit is known.
    throttle_s: dict[str, float | None]
    #: "counters" (NVML's exact per-cause time), "samples" (sampled reason bits), "mixed" or "none".
    throttle_timing: str
    energy_wh: float | None
    #: "counter" (the energy counter), "power" (power x time), "counter+power" or "none".
    energy_source: str
    #: The enforced power limit (W) the verdict weighs the power against (advisor's 95 % rule).
    power_limit_w: float | None = None
    #: Time-weighted mean effective load while busy (% of the GPU's calibrated full load); None unknown.
    mean_effective_load_pct: float | None = None
    #: Busy seconds under a power cap while the job ran (of ``busy_s``: ``advisor.cap_share``, the Advisor's
    #: computation), the mean power over those seconds (W) and the limits in force meanwhile ("150 W", "150 W
    #: for 40 min, then 175 W for 3 min"). None: not known (a card from before they were kept).
    capped_s: float | None = None
    capped_power_w: float | None = None
    capped_limits: str | None = None

    @property
    def throttled_s(self) -> float:
        """The longest time under any one cause (causes overlap: HW thermal comes with SW thermal)."""
        return max((s for s in self.throttle_s.values() if s is not None), default=0.0)


def overlap_s(time_s: FloatArray, duration_s: FloatArray, start_s: float, end_s: float) -> FloatArray:
    """Seconds of each row [t, t + duration) inside [start_s, end_s)."""
    lo = np.maximum(time_s, start_s)
    hi = np.minimum(time_s + np.nan_to_num(duration_s), end_s)
    return np.asarray(np.maximum(hi - lo, 0.0), dtype=np.float64)


def running_s_per_row(time_s: FloatArray, duration_s: FloatArray, start_s: float, end_s: float,
                      pauses: Sequence[tuple[float, float]] = ()) -> FloatArray:
    """Seconds of each row [t, t + duration) inside [start_s, end_s) while the job ran (outside every pause)."""
    running = overlap_s(time_s, duration_s, start_s, end_s)
    for paused_from, paused_to in pauses:
        running -= overlap_s(time_s, duration_s, max(paused_from, start_s), min(paused_to, end_s))
    return np.asarray(np.maximum(running, 0.0), dtype=np.float64)


def _counter_per_row(gpu: GpuSeries, bit: int, counters_since_previous: bool) -> FloatArray:
    """NVML's seconds under ``bit`` per row, lined up with the row's [t, t + duration) (NaN: no counter)."""
    counted = gpu.counted_seconds.get(bit)
    if counted is None:
        return np.full(len(gpu), np.nan)
    counted = np.asarray(counted, dtype=np.float64)
    if counters_since_previous and len(counted):
        # A raw sample holds the time since the sample before it: row i's own interval is counted at row i + 1.
        counted = np.append(counted[1:], np.nan)
    return counted


def _throttle(gpu: GpuSeries, dur: FloatArray, run_part: FloatArray, in_span: npt.NDArray[np.bool_],
              counters_since_previous: bool) -> tuple[dict[str, float | None], str]:
    """Seconds under each throttle cause over the span (the guard's pauses left out), and how they were timed."""
    throttle: dict[str, float | None] = {}
    timings: set[str] = set()
    for key, _name, bit, _label in THROTTLE_CAUSES:
        counted = _counter_per_row(gpu, bit, counters_since_previous)
        sampled = gpu.reason_seconds.get(bit)
        if sampled is None:
            sampled = np.where((gpu.clock_event_reasons & bit) != 0, dur, 0.0)
        per_row = np.where(np.isfinite(counted), counted, sampled)
        per_row = np.minimum(per_row, dur) * run_part  # the guard's pauses are no throttle of the job
        counted_rows = np.isfinite(counted[in_span])
        known = np.isfinite(per_row) & in_span
        if not known.any():
            throttle[key] = None
            continue
        throttle[key] = float(per_row[known].sum())
        timings.add("counters" if counted_rows.all() else "samples" if not counted_rows.any() else "mixed")
    timing = "none" if not timings else timings.pop() if len(timings) == 1 else "mixed"
    return throttle, timing


def gpu_figures(gpu: GpuSeries, start_s: float, end_s: float, *, pauses: Sequence[tuple[float, float]] = (),
                processes: ProcessSamples | None = None, counters_since_previous: bool = True) -> GpuFigures:
    """One GPU's figures over [start_s, end_s) of ``gpu``'s rows (raw samples or rollup buckets).

    ``counters_since_previous``: the rows are raw samples, whose counters hold the time since the
    sample before (rollup buckets hold their own interval's).
    """
    inside = overlap_s(gpu.time_s, gpu.duration_s, start_s, end_s)
    dur = np.asarray(gpu.duration_s, dtype=np.float64)
    part = np.where(dur > 0, inside / np.where(dur > 0, dur, 1.0), 0.0)  # the share of each row inside the span
    running = running_s_per_row(gpu.time_s, dur, start_s, end_s, pauses)
    sampled_s = float(inside.sum())

    # A row partly outside the span or paused is busy for its running part only (a stopped job idles the GPU).
    busy_row = busy_seconds(gpu, processes) * np.where(dur > 0, running / np.where(dur > 0, dur, 1.0), 0.0)
    busy_s = float(np.nansum(busy_row))
    run_known = np.where(np.isfinite(busy_row), running, 0.0)
    busy_share = busy_s / float(run_known.sum()) if run_known.sum() > 0 else None
    util = gpu.utilization_gpu_pct
    util_ok = np.isfinite(util) & (running > 0)
    mean_util = float((util[util_ok] * running[util_ok]).sum() / running[util_ok].sum()) if util_ok.any() else None

    in_span = inside > 0
    vram = gpu.vram_used_max_mib if gpu.vram_used_max_mib is not None else gpu.vram_used_mib
    peak_vram = finite_or_none(nanmax(vram[in_span]))
    total = gpu.meta.vram_total_mib
    headroom = total - peak_vram if total is not None and peak_vram is not None else None
    temps = gpu.temperature_max_c if gpu.temperature_max_c is not None else gpu.temperature_c
    peak_temp = finite_or_none(nanmax(temps[in_span]))
    # Mean power while the job ran: a paused job's GPU idles, which is not the job's draw.
    power_ok = np.isfinite(gpu.power_w) & (running > 0)
    mean_power = (float((gpu.power_w[power_ok] * running[power_ok]).sum() / running[power_ok].sum())
                  if power_ok.any() else None)
    mean_effective = None
    if gpu.effective_load_pct is not None:
        load_ok = np.isfinite(gpu.effective_load_pct) & np.isfinite(busy_row) & (busy_row > 0)
        if load_ok.any():
            mean_effective = float((gpu.effective_load_pct[load_ok] * busy_row[load_ok]).sum()
                                   / busy_row[load_ok].sum())
    run_part = np.where(dur > 0, running / np.where(dur > 0, dur, 1.0), 0.0)

    throttle, timing = _throttle(gpu, dur, run_part, in_span, counters_since_previous)

    by_counter = np.isfinite(gpu.energy_mj) & in_span
    by_power = ~np.isfinite(gpu.energy_mj) & np.isfinite(gpu.power_w) & in_span
    mj = np.where(by_counter, gpu.energy_mj, np.where(by_power, gpu.power_w * dur * 1000.0, 0.0)) * part
    energy_source = ("counter+power" if by_counter.any() and by_power.any() else "counter" if by_counter.any()
                     else "power" if by_power.any() else "none")
    energy_wh = float(mj.sum()) / 3.6e6 if energy_source != "none" else None

    # The Advisor's own computation on the job's rows: each row's capped seconds as its busy seconds are counted
    # (both of the interval a sample closes), cut to the running part like them.
    cap = cap_share(gpu, capped_seconds(gpu) * run_part, np.nan_to_num(busy_row), in_span)
    return GpuFigures(index=gpu.meta.index, uuid=gpu.meta.uuid, name=gpu.meta.name, sampled_s=sampled_s,
                      busy_s=busy_s, busy_share=busy_share, mean_util_pct=mean_util, peak_vram_mib=peak_vram,
                      vram_total_mib=total, headroom_mib=headroom, peak_temperature_c=peak_temp,
                      mean_power_w=mean_power, throttle_s=throttle, throttle_timing=timing, energy_wh=energy_wh,
                      energy_source=energy_source, power_limit_w=gpu.limit_in_force(running > 0),
                      mean_effective_load_pct=mean_effective, capped_s=cap.capped_s,
                      capped_power_w=finite_or_none(cap.mean_power_w), capped_limits=cap.limits_text())
