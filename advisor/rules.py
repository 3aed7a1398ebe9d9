"""Advice rules: each a small function from the history to explained Recommendations.

A recommendation carries its rule id, a severity, the numbers that triggered it (with units),
the action (tailored to laptop/desktop and Linux/Windows) and the time ranges to look at.
Thresholds come from the user's settings (``Thresholds`` mirrors ``[advisor]``).
Shares are of *busy* time; a share rule fires when the whole window or one run of at least
``min_busy_hours`` crosses the threshold, so one bad 12-hour run is not diluted by a quiet week.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from advisor import actions
from advisor.costs import CloudOffer, smallest_fitting
from advisor.frame import FloatArray, GpuSeries, HistoryFrame
from advisor.profile import INFERENCE, Job, WorkloadProfile, gpu_profile
from advisor.stats import (
    POWER_BITS,
    REASON_HW_THERMAL,
    THERMAL_BITS,
    BoolArray,
    busy_seconds,
    fmt_hours,
    host_values_at,
    intervals_from_mask,
    nanmax,
    reason_seconds,
    rows_in,
    weighted_mean,
)
from advisor.thresholds import Thresholds

Severity = Literal["critical", "warning", "info"]
SEVERITY_ORDER: dict[str, int] = {"critical": 0, "warning": 1, "info": 2}
#: Utilization at or above this is "heavy work" (battery, PCIe rules).
HEAVY_UTIL_PCT = 50.0
#: Below this a GPU holding memory counts as idle (a desktop's compositor shows a few %).
IDLE_UTIL_PCT = 5.0
#: Stretches of evidence closer than this are shown as one time range.
RANGE_GAP_S = 600.0


@dataclass(frozen=True)
class Evidence:
    label: str
    value: float
    unit: str

    def text(self) -> str:
        if not np.isfinite(self.value):
            number = "n/a"
        elif abs(self.value) >= 100 or float(self.value).is_integer():
            number = f"{self.value:,.0f}"
        else:
            number = f"{self.value:,.1f}"
        return f"{self.label}: {number} {self.unit}".rstrip()


@dataclass(frozen=True)
class Recommendation:
    rule_id: str
    severity: Severity
    title: str
    evidence: tuple[Evidence, ...]
    action: str
    time_ranges: tuple[tuple[float, float], ...] = ()
    gpu_index: int | None = None
    #: The frame metric that shows the evidence best (for the small chart on a card).
    chart_metric: str | None = None
    #: Orders recommendations of equal severity (bigger first), e.g. hours affected.
    score: float = 0.0

    def evidence_value(self, label: str) -> float:
        for item in self.evidence:
            if item.label == label:
                return item.value
        raise KeyError(label)


@dataclass
class RuleContext:
    frame: HistoryFrame
    thresholds: Thresholds
    offers: tuple[CloudOffer, ...] = ()
    busy: dict[int, FloatArray] = field(default_factory=dict)
    profiles: dict[int, WorkloadProfile] = field(default_factory=dict)
    _host: dict[tuple[int, str], FloatArray] = field(default_factory=dict)

    def gpu_busy(self, gpu: GpuSeries) -> FloatArray:
        if gpu.meta.index not in self.busy:
            self.busy[gpu.meta.index] = busy_seconds(gpu, self.frame.processes)
        return self.busy[gpu.meta.index]

    def gpu_profile(self, gpu: GpuSeries) -> WorkloadProfile:
        if gpu.meta.index not in self.profiles:
            self.profiles[gpu.meta.index] = gpu_profile(self.frame, gpu)
        return self.profiles[gpu.meta.index]

    def host_at(self, gpu: GpuSeries, column: str) -> FloatArray:
        """A host column at the GPU's row times (cached: several rules ask)."""
        key = (gpu.meta.index, column)
        if key not in self._host:
            self._host[key] = host_values_at(self.frame, gpu.time_s, column)
        return self._host[key]

    def enough_busy(self, gpu: GpuSeries) -> bool:
        return float(self.gpu_busy(gpu).sum()) >= self.thresholds.min_busy_hours * 3600.0


Rule = Callable[[RuleContext], list[Recommendation]]


def _ranges(gpu: GpuSeries, mask: BoolArray, limit: int = 5) -> tuple[tuple[float, float], ...]:
    spans = intervals_from_mask(gpu.time_s, gpu.duration_s, mask, RANGE_GAP_S)
    spans.sort(key=lambda s: s.duration_s, reverse=True)
    return tuple(sorted((s.start_s, s.end_s) for s in spans[:limit]))


@dataclass(frozen=True)
class _Share:
    share: float  # of all busy time
    seconds: float
    worst_job: Job | None
    worst_share: float


def _share(ctx: RuleContext, gpu: GpuSeries, seconds: FloatArray) -> _Share:
    """Share of busy time under a condition, for the window and for its worst run."""
    busy = ctx.gpu_busy(gpu)
    total = float(busy.sum())
    hit = np.minimum(seconds, busy)
    worst: Job | None = None
    worst_share = 0.0
    for job in ctx.gpu_profile(gpu).jobs:
        if job.busy_s < ctx.thresholds.min_busy_hours * 3600.0:
            continue
        rows = rows_in(gpu.time_s, job.interval)
        share = float(hit[rows].sum()) / job.busy_s
        if share > worst_share:
            worst, worst_share = job, share
    return _Share(float(hit.sum()) / total if total > 0 else 0.0, float(hit.sum()), worst, worst_share)


def _job_evidence(share: _Share, label: str) -> tuple[Evidence, ...]:
    if share.worst_job is None:
        return ()
    name = share.worst_job.process_names[0] if share.worst_job.process_names else "busy stretch"
    return (Evidence(f"{label} in the worst run ({name}, {fmt_hours(share.worst_job.busy_s)})",
                     share.worst_share * 100.0, "%"),)


def _fires(share: _Share, threshold_pct: float) -> bool:
    return share.share * 100.0 >= threshold_pct or share.worst_share * 100.0 >= threshold_pct


def vram_headroom(ctx: RuleContext) -> list[Recommendation]:
    out = []
    t = ctx.thresholds
    for gpu in ctx.frame.gpus:
        total = gpu.meta.vram_total_mib
        if not total or not ctx.enough_busy(gpu):
            continue
        used = gpu.vram_used_max_mib if gpu.vram_used_max_mib is not None else gpu.vram_used_mib
        tight = np.nan_to_num(used) > total * (1.0 - t.vram_headroom_pct / 100.0)
        share = _share(ctx, gpu, np.where(tight, gpu.duration_s, 0.0))
        if not _fires(share, t.vram_tight_share_pct):
            continue
        peak = nanmax(used)
        need_gb = peak / 1024.0 / (1.0 - t.vram_headroom_pct / 100.0)
        offer = smallest_fitting([o for o in ctx.offers if o.vram_gb > total / 1024.0 + 0.5], need_gb)
        hint = ""
        if offer is not None:
            hint = (f"For jobs that need more room, the smallest cloud GPU that fits is the {offer.gpu_model} "
                    f"({offer.vram_gb:.0f} GB) at {offer.provider}, ${offer.on_demand_usd_h:.2f}/h on demand.")
        evidence = (
            Evidence(f"Busy time with less than {t.vram_headroom_pct:.0f} % VRAM free", share.share * 100.0, "%"),
            *_job_evidence(share, "Share"),
            Evidence("Peak VRAM used", peak, "MiB"),
            Evidence("VRAM total", total, "MiB"),
        )
        out.append(Recommendation("vram_headroom", "warning", f"GPU {gpu.meta.index}: little VRAM headroom",
                                  evidence, actions.vram(hint), _ranges(gpu, tight & (ctx.gpu_busy(gpu) > 0)),
                                  gpu.meta.index, "vram_used_mib", share.seconds / 3600.0))
    return out


def low_utilization(ctx: RuleContext) -> list[Recommendation]:
    out = []
    t = ctx.thresholds
    for gpu in ctx.frame.gpus:
        busy = ctx.gpu_busy(gpu)
        cpu = ctx.host_at(gpu, "cpu_pct")
        groups: dict[bool, list[tuple[Job, float, float]]] = {True: [], False: []}
        for job in ctx.gpu_profile(gpu).jobs:
            if job.kind == INFERENCE or job.busy_s < t.min_busy_hours * 3600.0:
                continue
            if not np.isfinite(job.mean_util_pct) or job.mean_util_pct >= t.low_utilization_pct:
                continue
            rows = rows_in(gpu.time_s, job.interval)
            cpu_mean = weighted_mean(cpu[rows], busy[rows])
            groups[bool(np.isfinite(cpu_mean) and cpu_mean >= t.cpu_saturated_pct)].append(
                (job, job.mean_util_pct, cpu_mean))
        for cpu_bound, jobs in groups.items():
            if not jobs:
                continue
            job, util, cpu_mean = max(jobs, key=lambda j: j[0].busy_s)
            name = job.process_names[0] if job.process_names else "a run"
            title = (f"GPU {gpu.meta.index}: {name} starved by the CPU" if cpu_bound
                     else f"GPU {gpu.meta.index}: low utilization while busy")
            evidence = (
                Evidence(f"Mean GPU utilization while busy ({name})", util, "%"),
                Evidence("Mean CPU utilization meanwhile", cpu_mean, "%"),
                Evidence("Busy time affected", sum(j[0].busy_s for j in jobs) / 3600.0, "h"),
                Evidence("Threshold", t.low_utilization_pct, "%"),
            )
            action = actions.low_util_cpu_bound(ctx.frame.platform) if cpu_bound else actions.low_util_gpu_waits()
            ranges = tuple((j[0].interval.start_s, j[0].interval.end_s) for j in jobs)
            out.append(Recommendation("low_utilization", "warning", title, evidence, action, ranges,
                                      gpu.meta.index, "utilization_gpu_pct", sum(j[0].busy_s for j in jobs) / 3600.0))
    return out


def _on_battery(ctx: RuleContext, gpu: GpuSeries) -> BoolArray:
    return np.asarray(ctx.host_at(gpu, "on_ac_power") == 0.0)


def thermal_throttling(ctx: RuleContext) -> list[Recommendation]:
    out = []
    for gpu in ctx.frame.gpus:
        if not ctx.enough_busy(gpu):
            continue
        seconds = reason_seconds(gpu, THERMAL_BITS)
        share = _share(ctx, gpu, seconds)
        if not _fires(share, ctx.thresholds.thermal_share_pct):
            continue
        temp = gpu.temperature_max_c if gpu.temperature_max_c is not None else gpu.temperature_c
        hw = reason_seconds(gpu, (REASON_HW_THERMAL,))
        evidence = (
            Evidence("Busy time thermally throttled", share.share * 100.0, "%"),
            *_job_evidence(share, "Throttled"),
            Evidence("Time throttled", share.seconds / 60.0, "min"),
            Evidence("Of it at the hardware slowdown", float(hw.sum()) / 60.0, "min"),
            Evidence("Peak temperature", nanmax(temp), "°C"),
            Evidence("Slowdown temperature", gpu.meta.temp_slowdown_c or float("nan"), "°C"),
        )
        severity: Severity = "critical" if share.share >= 0.5 else "warning"
        out.append(Recommendation("thermal_throttling", severity, f"GPU {gpu.meta.index}: thermal throttling",
                                  evidence, actions.thermal(gpu.meta, ctx.frame.platform), _ranges(gpu, seconds > 0),
                                  gpu.meta.index, "temperature_c", share.seconds / 3600.0))
    return out


def power_cap(ctx: RuleContext) -> list[Recommendation]:
    out = []
    for gpu in ctx.frame.gpus:
        if not ctx.enough_busy(gpu):
            continue
        seconds = reason_seconds(gpu, POWER_BITS)
        share = _share(ctx, gpu, seconds)
        if not _fires(share, ctx.thresholds.power_cap_share_pct):
            continue
        capped = seconds > 0
        battery_s = float(seconds[capped & _on_battery(ctx, gpu)].sum())
        battery_share = battery_s / share.seconds if share.seconds > 0 else 0.0
        evidence = (
            Evidence("Busy time at the power limit", share.share * 100.0, "%"),
            *_job_evidence(share, "Capped"),
            Evidence("Time power-capped", share.seconds / 60.0, "min"),
            Evidence("Power limit", gpu.meta.power_limit_w or float("nan"), "W"),
            Evidence("Mean power while capped", weighted_mean(gpu.power_w[capped], gpu.duration_s[capped]), "W"),
            Evidence("Of it on battery", battery_share * 100.0, "%"),
        )
        out.append(Recommendation("power_cap", "info", f"GPU {gpu.meta.index}: held at its power limit", evidence,
                                  actions.power_cap(gpu.meta, ctx.frame.platform, battery_share),
                                  _ranges(gpu, capped), gpu.meta.index, "power_w", share.seconds / 3600.0))
    return out


def pcie_link(ctx: RuleContext) -> list[Recommendation]:
    out = []
    t = ctx.thresholds
    for gpu in ctx.frame.gpus:
        gen_max, width_max = gpu.meta.pcie_gen_max, gpu.meta.pcie_width_max
        if not gen_max and not width_max:
            continue
        heavy = np.asarray(np.nan_to_num(gpu.utilization_gpu_pct) >= HEAVY_UTIL_PCT)
        heavy_s = float(gpu.duration_s[heavy].sum())
        if heavy_s < t.min_busy_hours * 3600.0:
            continue
        # The link drops its generation at idle to save power: only a slow link under load matters.
        low = np.zeros(len(gpu), dtype=bool)
        if gen_max:
            low |= np.asarray(gpu.pcie_gen < gen_max)
        if width_max:
            low |= np.asarray(gpu.pcie_width < width_max)
        low &= heavy
        share = float(gpu.duration_s[low].sum()) / heavy_s
        if share * 100.0 < t.pcie_low_share_pct:
            continue
        evidence = (
            Evidence("Heavy-load time with a slower link", share * 100.0, "%"),
            Evidence("Link generation under load (median)", float(np.nanmedian(gpu.pcie_gen[heavy])), ""),
            Evidence("Maximum generation", float(gen_max or float("nan")), ""),
            Evidence("Link width under load (median)", float(np.nanmedian(gpu.pcie_width[heavy])), "lanes"),
            Evidence("Maximum width", float(width_max or float("nan")), "lanes"),
        )
        out.append(Recommendation("pcie_link", "warning", f"GPU {gpu.meta.index}: PCIe link below its maximum",
                                  evidence, actions.pcie(gpu.meta), _ranges(gpu, low), gpu.meta.index, "pcie_gen",
                                  float(gpu.duration_s[low].sum()) / 3600.0))
    return out


def battery_heavy(ctx: RuleContext) -> list[Recommendation]:
    out = []
    for gpu in ctx.frame.gpus:
        heavy = np.asarray(np.nan_to_num(gpu.utilization_gpu_pct) >= HEAVY_UTIL_PCT) & _on_battery(ctx, gpu)
        seconds = float(gpu.duration_s[heavy].sum())
        if seconds < ctx.thresholds.battery_heavy_minutes * 60.0:
            continue
        evidence = (
            Evidence("Heavy GPU work on battery", seconds / 60.0, "min"),
            Evidence("Mean GPU utilization meanwhile", weighted_mean(gpu.utilization_gpu_pct[heavy],
                                                                     gpu.duration_s[heavy]), "%"),
            Evidence("Mean power meanwhile", weighted_mean(gpu.power_w[heavy], gpu.duration_s[heavy]), "W"),
        )
        out.append(Recommendation("battery_heavy", "warning", f"GPU {gpu.meta.index}: heavy work on battery",
                                  evidence, actions.battery(ctx.frame.platform), _ranges(gpu, heavy),
                                  gpu.meta.index, "utilization_gpu_pct", seconds / 3600.0))
    return out


def all_rules() -> tuple[Rule, ...]:
    from advisor import rules_history

    return (vram_headroom, low_utilization, thermal_throttling, power_cap, rules_history.idle_memory,
            rules_history.persistence_mode, rules_history.driver_change, rules_history.stress_regression,
            pcie_link, battery_heavy)


def sort_key(rec: Recommendation) -> tuple[int, float, str]:
    return (SEVERITY_ORDER.get(rec.severity, 9), -rec.score, rec.rule_id)


def run_rules(frame: HistoryFrame, thresholds: Thresholds | None = None,
              offers: tuple[CloudOffer, ...] | list[CloudOffer] = ()) -> list[Recommendation]:
    """Every rule over ``frame``; most severe first, then the biggest."""
    ctx = RuleContext(frame, thresholds or Thresholds(), tuple(offers))
    recs = [rec for rule in all_rules() for rec in rule(ctx)]
    return sorted(recs, key=sort_key)

