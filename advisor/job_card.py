"""The job card: what one job run under `rigscope run` did to the GPU and what it cost, from arrays.

Pure (numpy only): the desktop side reads the job's record and the history's GPU samples over its
span (``desktop/jobs/card.py``) and passes them in. Every figure is time-weighted over the part of
each row inside the job's span; a missing value drops out instead of counting as zero.

- Busy share and mean utilization are over the time the job ran, the guard's pauses left out.
- Time under each throttle cause is NVML's per-cause counter (exact) where the GPU keeps one,
  else the sampled reason bits; ``throttle_timing`` says which.
- Energy is the energy counter's delta where present, else power x time.
- The power cap's share is of the busy seconds, with its limit(s) in force and the mean power over the
  capped seconds: ``advisor.cap_share``, the computation of the Advisor's power-cap card.
- Throttle causes, mean power and the verdict leave the guard's pauses out (a stopped job is
  neither throttled nor working); energy counts them (the GPU drew idle power meanwhile).
- Cloud equivalents (``advisor.job_cloud``): only the GPU-bound part of the running time (busy share
  x effective load) runs faster on the cloud GPU; a job the data loader, the CPU or idling limits
  says so. Offers whose VRAM cannot hold the job's peak are left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from advisor.cap_share import cap_share, capped_seconds
from advisor.clock_events import CLOCK_EVENT_COUNTERS
from advisor.costs import CloudOffer, GpuSpec, find_spec
from advisor.frame import FloatArray, GpuSeries, HostSeries, ProcessSamples
from advisor.job_cloud import CLOUD_ROWS, DEFAULT_THRESHOLDS, CloudEquivalent, job_bound
from advisor.job_cloud import cloud_equivalents as _cloud_rows
from advisor.stats import busy_seconds, nanmax
from advisor.thresholds import Thresholds

#: Card format version (``as_dict()["version"]``); ``from_dict`` reads this one.
CARD_VERSION = 1
#: Throttle causes in the order the card lists them: (key, counter column, reason bit, label).
THROTTLE_CAUSES: tuple[tuple[str, str, int, str], ...] = tuple(
    (name.removeprefix("clock_event_").removesuffix("_s"), name, int(reason), reason.label)
    for name, reason in CLOCK_EVENT_COUNTERS
)
__all__ = ["CLOUD_ROWS", "CloudEquivalent", "CloudInputs", "GpuFigures", "JobCard", "JobInputs", "cloud_equivalents",
           "gpu_figures", "job_card", "mean_throughput"]


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



@dataclass(frozen=True)
class JobCard:
    """The figures of one job; ``as_dict()`` is what history stores and ``rigscope run -o`` writes."""

    job_id: int
    name: str
    command: str
    started_s: float
    ended_s: float
    duration_s: float
    exit_code: int | None
    #: Seconds the thermal guard kept the job stopped, and how many times it did.
    paused_s: float
    pauses: int
    verdict: str
    gpus: tuple[GpuFigures, ...]
    throughput_mean: float | None
    throughput_unit: str | None
    energy_wh: float | None
    energy_cost: float | None
    electricity_price_per_kwh: float
    currency: str
    cloud: tuple[CloudEquivalent, ...]
    #: "measured" (the local GPU's speed from a stress test) or "datasheet"; None without a local spec.
    speed_basis: str | None
    local_tflops: float | None
    source: str = "nvml"
    notes: tuple[str, ...] = ()
    version: int = CARD_VERSION
    #: The verdict's answer (a cause other than a normal power cap held the job back); None: not judged.
    throttled: bool | None = None
    #: What limits the job (``advisor.job_cloud.Bound``): its kind, sentence and GPU-bound share of the running time.
    bound: str | None = None
    bound_text: str = ""
    gpu_part: float | None = None

    @property
    def running_s(self) -> float:
        return max(0.0, self.duration_s - self.paused_s)

    @property
    def busy_share(self) -> float | None:
        """The mean busy share of the job's GPUs."""
        shares = [g.busy_share for g in self.gpus if g.busy_share is not None]
        return sum(shares) / len(shares) if shares else None

    def as_dict(self) -> dict[str, Any]:
        data = _json_safe(asdict(self))
        assert isinstance(data, dict)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobCard:
        """The card ``as_dict`` wrote; ValueError naming what is wrong for anything else."""
        if not isinstance(data, Mapping):
            raise ValueError("a job card must be a JSON object")
        version = data.get("version")
        if version != CARD_VERSION:
            raise ValueError(f"job card version {version!r} is not {CARD_VERSION}")
        try:
            gpus = tuple(GpuFigures(**{**g, "throttle_s": dict(g["throttle_s"])}) for g in data["gpus"])
            cloud = tuple(CloudEquivalent(**c) for c in data["cloud"])
            fields = {k: v for k, v in data.items() if k not in ("gpus", "cloud")}
            fields["notes"] = tuple(fields.get("notes", ()))
            return cls(**fields, gpus=gpus, cloud=cloud)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"damaged job card: {exc}") from None


def _json_safe(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


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
    peak_vram = _finite(nanmax(vram[in_span]))
    total = gpu.meta.vram_total_mib
    headroom = total - peak_vram if total is not None and peak_vram is not None else None
    temps = gpu.temperature_max_c if gpu.temperature_max_c is not None else gpu.temperature_c
    peak_temp = _finite(nanmax(temps[in_span]))
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
                      capped_power_w=_finite(cap.mean_power_w), capped_limits=cap.limits_text())


def mean_throughput(time_s: FloatArray, throughput: FloatArray, pauses: Sequence[tuple[float, float]] = ()
                    ) -> float | None:
    """Time-weighted mean of the job's reported throughput while it ran (each point holds until the next;
    the guard's pauses are left out)."""
    time_s = np.asarray(time_s, dtype=np.float64)
    values = np.asarray(throughput, dtype=np.float64)
    if len(time_s) < 2:
        return _finite(float(values[0])) if len(values) == 1 else None
    weight = running_s_per_row(time_s[:-1], np.diff(time_s), float(time_s[0]), float(time_s[-1]), pauses)
    ok = np.isfinite(values[:-1]) & (weight > 0)
    if not ok.any():
        return None
    return float((values[:-1][ok] * weight[ok]).sum() / weight[ok].sum())


@dataclass(frozen=True)
class CloudInputs:
    """What the cloud comparison needs: the price and spec tables and the local GPU's measured speed."""

    offers: Sequence[CloudOffer] = ()
    specs: Sequence[GpuSpec] = ()
    #: Sustained TFLOP/s of the local GPU from its latest GEMM stress test; None: use the datasheet.
    measured_tflops: float | None = None


def cloud_equivalents(gpu_name: str, gpus: int, running_s: float, *, busy_share: float | None,
                      peak_vram_mib: float | None, inputs: CloudInputs, effective_load_pct: float | None = None,
                      cpu_pct: float | None = None, rows: int = CLOUD_ROWS
                      ) -> tuple[tuple[CloudEquivalent, ...], list[str]]:
    """The cheapest offers (on demand) that hold the job, each with the hours it would take there; and notes."""
    bound = job_bound(busy_share, effective_load_pct, cpu_pct)
    equivalents, notes = _cloud_rows(gpu_name, gpus, running_s, bound=bound, peak_vram_mib=peak_vram_mib,
                                     offers=inputs.offers, specs=inputs.specs, measured_tflops=inputs.measured_tflops,
                                     rows=rows)
    return equivalents, notes


@dataclass(frozen=True)
class JobInputs:
    """One finished job as the card reads it (the desktop side fills it from the record and the history)."""

    job_id: int
    name: str
    command: str
    started_s: float
    ended_s: float
    exit_code: int | None
    gpus: Sequence[GpuSeries]
    pauses: Sequence[tuple[float, float]] = ()
    paused_s: float = 0.0
    verdict: str = ""
    throughput_time_s: FloatArray = field(default_factory=lambda: np.zeros(0))
    throughput: FloatArray = field(default_factory=lambda: np.zeros(0))
    throughput_unit: str | None = None
    processes: ProcessSamples | None = None
    counters_since_previous: bool = True
    source: str = "nvml"
    #: The verdict's ``throttled`` (None: not judged).
    throttled: bool | None = None
    #: The host's CPU over the job's span (for "the CPU limits this job"); None: not recorded.
    host: HostSeries | None = None


def host_cpu_pct(host: HostSeries | None, start_s: float, end_s: float,
                 pauses: Sequence[tuple[float, float]] = ()) -> float | None:
    """The host's mean CPU utilization (%) while the job ran; None where it was not recorded."""
    if host is None or len(host.time_s) == 0:
        return None
    weight = running_s_per_row(host.time_s, host.duration_s, start_s, end_s, pauses)
    ok = np.isfinite(host.cpu_pct) & (weight > 0)
    return float((host.cpu_pct[ok] * weight[ok]).sum() / weight[ok].sum()) if ok.any() else None


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def job_card(job: JobInputs, *, electricity_price_per_kwh: float, currency: str,
             cloud: CloudInputs = CloudInputs(), thresholds: Thresholds = DEFAULT_THRESHOLDS) -> JobCard:
    """The card of ``job``: per-GPU figures, energy and its cost, the guard's pauses, what limits the job and
    its cloud equivalents."""
    figures = tuple(gpu_figures(g, job.started_s, job.ended_s, pauses=job.pauses, processes=job.processes,
                                counters_since_previous=job.counters_since_previous) for g in job.gpus)
    notes: list[str] = []
    if not figures:
        notes.append("No GPU samples over the job's span: GPU figures unknown.")
    energies = [f.energy_wh for f in figures if f.energy_wh is not None]
    energy_wh = sum(energies) if energies else None
    energy_cost = energy_wh / 1000.0 * electricity_price_per_kwh if energy_wh is not None else None
    duration_s = max(0.0, job.ended_s - job.started_s)
    running_s = max(0.0, duration_s - job.paused_s)
    equivalents: tuple[CloudEquivalent, ...] = ()
    speed_basis = local_tflops = None
    bound = None
    if figures:
        peaks = [f.peak_vram_mib for f in figures if f.peak_vram_mib is not None]
        bound = job_bound(_mean([f.busy_share for f in figures]), _mean([f.mean_effective_load_pct for f in figures]),
                          host_cpu_pct(job.host, job.started_s, job.ended_s, job.pauses), thresholds)
        equivalents, cloud_notes = _cloud_rows(
            figures[0].name, len(figures), running_s, bound=bound, peak_vram_mib=max(peaks) if peaks else None,
            offers=cloud.offers, specs=cloud.specs, measured_tflops=cloud.measured_tflops)
        notes += cloud_notes
        local = find_spec(figures[0].name, list(cloud.specs))
        if local is not None:
            measured = cloud.measured_tflops is not None and cloud.measured_tflops > 0
            speed_basis = "measured" if measured else "datasheet"
            local_tflops = cloud.measured_tflops if measured else local.peak_bf16_tflops
    if currency.upper() != "USD" and equivalents:
        notes.append(f"Cloud prices are in USD; energy is in {currency}.")
    return JobCard(
        job_id=job.job_id, name=job.name, command=job.command, started_s=job.started_s, ended_s=job.ended_s,
        duration_s=duration_s, exit_code=job.exit_code, paused_s=job.paused_s, pauses=len(job.pauses),
        verdict=job.verdict, gpus=figures,
        throughput_mean=mean_throughput(job.throughput_time_s, job.throughput, job.pauses),
        throughput_unit=job.throughput_unit, energy_wh=energy_wh, energy_cost=energy_cost,
        electricity_price_per_kwh=electricity_price_per_kwh, currency=currency, cloud=equivalents,
        speed_basis=speed_basis, local_tflops=local_tflops, source=job.source, notes=tuple(notes),
        throttled=job.throttled, bound=bound.kind if bound else None, bound_text=bound.text if bound else "",
        gpu_part=bound.gpu_part if bound and bound.kind is not None else None)
