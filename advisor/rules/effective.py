"""Advice on effective load: utilization says a kernel ran, effective load says how hard the GPU worked.

A memory-bound, small-batch or input-starved job keeps NVML's utilization near 100 % while the
GPU draws about a third of what a compute-bound load does at that clock. ``effective_load_pct``
(SM activity where measured, else estimated from power and clock against the GPU's own
calibration: ``advisor.effective_load``) exposes it; history without it is skipped.
"""

from __future__ import annotations

import numpy as np

from advisor.effective_load import UNCERTAINTY_PCT
from advisor.rules import actions
from advisor.rules.base import Evidence, Recommendation, RuleContext, busy_share, fires, job_evidence, ranges
from advisor.stats import weighted_mean

#: Memory-controller busy share at or above which the job counts as memory-bound (else small/starved).
MEMORY_BOUND_MEM_UTIL_PCT = 50.0


def low_effective_load(ctx: RuleContext) -> list[Recommendation]:
    out = []
    t = ctx.thresholds
    for gpu in ctx.frame.gpus:
        effective = gpu.effective_load_pct
        if effective is None or not np.isfinite(effective).any() or not ctx.enough_busy(gpu):
            continue
        util = gpu.utilization_gpu_pct
        with np.errstate(invalid="ignore"):
            hollow = np.asarray((util >= t.hollow_util_pct) & (effective <= t.low_effective_load_pct))
        seconds = np.where(hollow, gpu.duration_s, 0.0)
        share = busy_share(ctx, gpu, seconds)
        if not fires(share, t.low_effective_share_pct):
            continue
        dur = gpu.duration_s[hollow]
        util_mean = weighted_mean(util[hollow], dur)
        effective_mean = weighted_mean(effective[hollow], dur)
        mem_mean = weighted_mean(gpu.utilization_mem_pct[hollow], dur)
        memory_bound = bool(np.isfinite(mem_mean) and mem_mean >= MEMORY_BOUND_MEM_UTIL_PCT)
        evidence = (
            Evidence("Mean GPU utilization meanwhile", util_mean, "%"),
            Evidence("Mean effective load meanwhile", effective_mean, "%"),
            Evidence("Busy time at high utilization but low effective load", share.share * 100.0, "%"),
            *job_evidence(share, "Share"),
            Evidence("Time affected", share.seconds / 3600.0, "h"),
            Evidence("Mean power meanwhile", weighted_mean(gpu.power_w[hollow], dur), "W"),
            # The limit in force over most of that time (a laptop's moves with its firmware mode).
            Evidence("Power limit", gpu.limit_in_force(hollow) or float("nan"), "W"),
            Evidence("Mean memory-controller utilization meanwhile", mem_mean, "%"),
            # Measured where the GPU has GPM; elsewhere estimated against its own stress run, to about this.
            Evidence("Uncertainty of an estimate (a GPU without GPM), +/-", UNCERTAINTY_PCT, "%"),
        )
        title = (f"GPU {gpu.meta.index}: utilization {util_mean:.0f} % but working at ~{effective_mean:.0f} % "
                 "of its calibrated load")
        out.append(Recommendation("low_effective_load", "warning", title, evidence,
                                  actions.low_effective_load(memory_bound),
                                  ranges(gpu, hollow & (ctx.gpu_busy(gpu) > 0)), gpu.meta.index,
                                  "effective_load_pct", share.seconds / 3600.0, gpu_key=gpu.meta.key))
    return out
