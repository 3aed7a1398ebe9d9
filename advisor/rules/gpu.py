"""Advice rules on a GPU's own metrics: VRAM headroom, utilization, thermal and power throttling, PCIe, battery."""

from __future__ import annotations

import numpy as np

from advisor.cap_share import CapShare, cap_share, capped_seconds
from advisor.clock_events import THERMAL_REASONS, ClockEventReason, bits
from advisor.costs import smallest_fitting
from advisor.frame import GpuSeries
from advisor.profile import INFERENCE, Job
from advisor.rules import actions
from advisor.rules.base import (
    HEAVY_UTIL_PCT,
    Evidence,
    Recommendation,
    RuleContext,
    Severity,
    busy_share,
    fires,
    job_evidence,
    ranges,
)
from advisor.stats import BoolArray, nanmax, reason_seconds, rows_in, weighted_mean


def vram_headroom(ctx: RuleContext) -> list[Recommendation]:
    out = []
    t = ctx.thresholds
    for gpu in ctx.frame.gpus:
        total = gpu.meta.vram_total_mib
        if not total or not ctx.enough_busy(gpu):
            continue
        used = gpu.vram_used_max_mib if gpu.vram_used_max_mib is not None else gpu.vram_used_mib
        tight = np.nan_to_num(used) > total * (1.0 - t.vram_headroom_pct / 100.0)
        share = busy_share(ctx, gpu, np.where(tight, gpu.duration_s, 0.0))
        if not fires(share, t.vram_tight_share_pct):
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
            *job_evidence(share, "Share"),
            Evidence("Peak VRAM used", peak, "MiB"),
            Evidence("VRAM total", total, "MiB"),
        )
        out.append(Recommendation("vram_headroom", "warning", f"GPU {gpu.meta.index}: little VRAM headroom",
                                  evidence, actions.vram(hint), ranges(gpu, tight & (ctx.gpu_busy(gpu) > 0)),
                                  gpu.meta.index, "vram_used_mib", share.seconds / 3600.0, gpu_key=gpu.meta.key))
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
                                      gpu.meta.index, "utilization_gpu_pct", sum(j[0].busy_s for j in jobs) / 3600.0,
                                      gpu_key=gpu.meta.key))
    return out


def _on_battery(ctx: RuleContext, gpu: GpuSeries) -> BoolArray:
    return np.asarray(ctx.host_at(gpu, "on_ac_power") == 0.0)


def thermal_throttling(ctx: RuleContext) -> list[Recommendation]:
    """Judged from the first data: a throttle seen under load is seen (no history minimum, issue 24)."""
    out = []
    for gpu in ctx.frame.gpus:
        if not ctx.some_busy(gpu):
            continue
        seconds = reason_seconds(gpu, bits(THERMAL_REASONS))
        share = busy_share(ctx, gpu, seconds)
        if not fires(share, ctx.thresholds.thermal_share_pct):
            continue
        temp = gpu.temperature_max_c if gpu.temperature_max_c is not None else gpu.temperature_c
        hw = reason_seconds(gpu, bits(ClockEventReason.HW_THERMAL_SLOWDOWN))
        evidence = (
            Evidence("Busy time thermally throttled", share.share * 100.0, "%"),
            *job_evidence(share, "Throttled"),
            Evidence("Time throttled", share.seconds / 60.0, "min"),
            Evidence("Of it at the HW thermal slowdown", float(hw.sum()) / 60.0, "min"),
            Evidence("Peak temperature", nanmax(temp), "°C"),
            # In force while throttled (a driver or a firmware mode can move it).
            Evidence("Slowdown temperature", gpu.slowdown_in_force(seconds > 0) or float("nan"), "°C"),
            Evidence("Busy time judged", float(ctx.gpu_busy(gpu).sum()) / 60.0, "min"),
        )
        severity: Severity = "critical" if share.share >= 0.5 else "warning"
        out.append(Recommendation("thermal_throttling", severity, f"GPU {gpu.meta.index}: thermal throttling",
                                  evidence, actions.thermal(gpu.meta, ctx.frame.platform), ranges(gpu, seconds > 0),
                                  gpu.meta.index, "temperature_c", share.seconds / 3600.0, gpu_key=gpu.meta.key))
    return out


def power_cap(ctx: RuleContext) -> list[Recommendation]:
    """Judged from the first data, as the thermal rule. The limit, the share and the mean power come from the
    capped samples themselves (``advisor.cap_share``, the job card's computation): each against the limit in
    force then (a laptop's moves with its firmware mode), its mean over the capped seconds only."""
    out = []
    for gpu in ctx.frame.gpus:
        if not ctx.some_busy(gpu):
            continue
        seconds = capped_seconds(gpu)
        share = busy_share(ctx, gpu, seconds)
        if not fires(share, ctx.thresholds.power_cap_share_pct):
            continue
        capped = seconds > 0
        cap = cap_share(gpu, seconds, ctx.gpu_busy(gpu))
        battery_s = float(seconds[capped & _on_battery(ctx, gpu)].sum())
        battery_share = battery_s / share.seconds if share.seconds > 0 else 0.0
        evidence = (
            Evidence("Busy time at the power limit", share.share * 100.0, "%"),
            *job_evidence(share, "Capped"),
            Evidence("Time power-capped", share.seconds / 60.0, "min"),
            Evidence("Power limit", cap.limit_w or gpu.meta.power_limit_w or float("nan"), "W"),
            *(Evidence(f"Time capped at the {s.limit_w:g} W limit", s.capped_s / 60.0, "min")
              for s in cap.stretches if s.limit_w is not None and len(cap.stretches) > 1),
            Evidence("Mean power while capped", cap.mean_power_w, "W"),
            Evidence("Of it on battery", battery_share * 100.0, "%"),
            Evidence("Busy time judged", float(ctx.gpu_busy(gpu).sum()) / 60.0, "min"),
        )
        out.append(Recommendation("power_cap", "info", _power_cap_title(gpu, cap), evidence,
                                  actions.power_cap(gpu.meta, ctx.frame.platform, battery_share),
                                  ranges(gpu, capped), gpu.meta.index, "power_w", share.seconds / 3600.0,
                                  gpu_key=gpu.meta.key))
    return out


def _power_cap_title(gpu: GpuSeries, cap: CapShare) -> str:
    """"held at its power limit (150 W)" only where the power while capped is at >= 95 % of the limit in force
    (the stress verdict's rule, advisor/power_cap.py); below it (a cap set by another limit: a clock setting, a
    power policy) the card says what it measured. Several limits in force while capped are each named."""
    name = f"GPU {gpu.meta.index}"
    limit = cap.limit_w
    if cap.at_limit or limit is None or not np.isfinite(cap.mean_power_w):
        return f"{name}: held at its power limit" + (f" ({cap.limits_text()})" if limit is not None else "")
    parts = [f"{s.mean_power_w:.0f} W of its {s.limit_w:g} W limit" if i == 0 else
             f"{s.mean_power_w:.0f} W of {s.limit_w:g} W" for i, s in enumerate(
                 s for s in cap.stretches if s.limit_w is not None)]
    return f"{name}: power cap set under load (mean {', then '.join(parts)})"


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
                                  evidence, actions.pcie(gpu.meta), ranges(gpu, low), gpu.meta.index, "pcie_gen",
                                  float(gpu.duration_s[low].sum()) / 3600.0, gpu_key=gpu.meta.key))
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
                                  evidence, actions.battery(ctx.frame.platform, weighted_mean(
                                      gpu.power_w[heavy], gpu.duration_s[heavy]), gpu.limit_in_force(heavy)),
                                  ranges(gpu, heavy),
                                  gpu.meta.index, "utilization_gpu_pct", seconds / 3600.0, gpu_key=gpu.meta.key))
    return out
