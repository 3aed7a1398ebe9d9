"""The job card: what one job run under `rigscope run` did to the GPU and what it cost, from arrays.

Pure (numpy only): the desktop side reads the job's record and the history's GPU samples over its
span (``desktop/jobs/card.py``) and passes them in. Each GPU's figures (busy share, VRAM, heat, power,
throttling, energy, the power cap's share) are ``advisor.job_figures``; this module adds the job's
own: its span and the guard's pauses, its mean throughput, energy cost, what limits it and its cloud
equivalents, and the card's stored form (``JobCard.as_dict`` / ``from_dict``).

- The throughput and the verdict leave the guard's pauses out (a stopped job is neither throttled
  nor working); energy counts them (the GPU drew idle power meanwhile).
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

from advisor.costs import CloudOffer, GpuSpec, find_spec, finite_or_none
from advisor.frame import FloatArray, GpuSeries, HostSeries, ProcessSamples
from advisor.job_cloud import CLOUD_ROWS, DEFAULT_THRESHOLDS, CloudEquivalent, job_bound
from advisor.job_cloud import cloud_equivalents as _cloud_rows
from advisor.job_figures import GpuFigures, gpu_figures, running_s_per_row
from advisor.thresholds import Thresholds

#: Card format version (``as_dict()["version"]``); ``from_dict`` reads this one.
CARD_VERSION = 1
__all__ = ["CLOUD_ROWS", "CloudEquivalent", "CloudInputs", "JobCard", "JobInputs", "job_card",
           "mean_throughput"]


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


def mean_throughput(time_s: FloatArray, throughput: FloatArray, pauses: Sequence[tuple[float, float]] = ()
                    ) -> float | None:
    """Time-weighted mean of the job's reported throughput while it ran (each point holds until the next;
    the guard's pauses are left out)."""
    time_s = np.asarray(time_s, dtype=np.float64)
    values = np.asarray(throughput, dtype=np.float64)
    if len(time_s) < 2:
        return finite_or_none(float(values[0])) if len(values) == 1 else None
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
