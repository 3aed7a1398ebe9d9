"""Advice rules about processes, configuration and stress-test history (the GPU-metric rules live in gpu.py)."""

from __future__ import annotations

import numpy as np

from advisor.baseline import pick_baseline, usable
from advisor.frame import ProcessSamples, StressResult
from advisor.rules import actions
from advisor.rules.base import IDLE_UTIL_PCT, Evidence, Recommendation, RuleContext, Severity
from advisor.stats import intervals_from_mask, values_at
from advisor.wording import plural_word


def idle_memory(ctx: RuleContext) -> list[Recommendation]:
    """A process holding GPU memory while the GPU is idle for a long time (a forgotten notebook)."""
    procs: ProcessSamples | None = ctx.frame.processes
    t = ctx.thresholds
    if procs is None or procs.time_s.size == 0:
        return []
    out = []
    for gpu in ctx.frame.gpus:
        mine = np.flatnonzero(procs.rows_of(gpu.meta))
        if mine.size == 0:
            continue
        # Group rows by pid, each group in time order, with one sort instead of a scan per pid.
        ordered = mine[np.lexsort((procs.time_s[mine], procs.pid[mine]))]
        bounds = np.flatnonzero(np.diff(procs.pid[ordered])) + 1
        for rows in np.split(ordered, bounds):
            pid = int(procs.pid[rows[0]])
            times = procs.time_s[rows]
            vram = np.nan_to_num(procs.vram_mib[rows])
            util = values_at(gpu, times, gpu.utilization_gpu_pct)
            idle = (util < IDLE_UTIL_PCT) & (vram >= t.idle_memory_mib)
            gap = max(3.0 * float(np.median(procs.duration_s[rows])), 60.0)
            spans = intervals_from_mask(times, procs.duration_s[rows], idle, gap)
            if not spans:
                continue
            longest = max(spans, key=lambda s: s.duration_s)
            if longest.duration_s < t.idle_memory_hours * 3600.0:
                continue
            in_span = (times >= longest.start_s) & (times < longest.end_s)
            held = float(np.max(vram[in_span]))
            name = procs.names[int(procs.name_id[rows][0])]
            evidence = [
                Evidence(f"{name} (PID {pid}) held VRAM while the GPU was idle", longest.duration_s / 3600.0, "h"),
                Evidence("VRAM held", held, "MiB"),
            ]
            if gpu.meta.vram_total_mib:
                evidence.append(Evidence("Share of the GPU's VRAM", held / gpu.meta.vram_total_mib * 100.0, "%"))
            idle_total = sum(s.duration_s for s in spans if s.duration_s >= t.idle_memory_hours * 3600.0)
            out.append(Recommendation(
                "idle_memory", "warning", f"GPU {gpu.meta.index}: {name} holds {held / 1024:.1f} GiB while idle",
                tuple(evidence), actions.idle_memory(pid, name, ctx.frame.platform),
                tuple((s.start_s, s.end_s) for s in spans if s.duration_s >= t.idle_memory_hours * 3600.0),
                gpu.meta.index, "vram_used_mib", idle_total / 3600.0, gpu_key=gpu.meta.key))
    return out


def persistence_mode(ctx: RuleContext) -> list[Recommendation]:
    if not ctx.frame.platform.lower().startswith("linux"):
        return []  # Windows (WDDM) has no persistence mode
    out = []
    for gpu in ctx.frame.gpus:
        if gpu.meta.persistence_mode is not False or gpu.meta.simulated:
            continue
        action = actions.persistence()
        if gpu.meta.is_laptop:
            action += " On a laptop it keeps the discrete GPU awake: expect shorter battery life."
        out.append(Recommendation("persistence_mode", "info", f"GPU {gpu.meta.index}: persistence mode is off",
                                  (Evidence("Persistence mode", 0.0, "(off)"),), action, (), gpu.meta.index,
                                  gpu_key=gpu.meta.key))
    return out


def _latest_by_gpu(results: tuple[StressResult, ...]) -> dict[str, StressResult]:
    latest: dict[str, StressResult] = {}
    for result in sorted(results, key=lambda r: r.started_s):
        latest[result.gpu_uuid] = result
    return latest


def driver_change(ctx: RuleContext) -> list[Recommendation]:
    """The driver changed since the last stress baseline: the baseline no longer describes the GPU."""
    out = []
    latest = _latest_by_gpu(ctx.frame.stress_results)
    for gpu in ctx.frame.gpus:
        result = latest.get(gpu.meta.uuid)
        if result is None:
            continue
        changes = [e for e in ctx.frame.events if e.kind == "driver_change" and e.time_s > result.ended_s
                   and e.gpu_uuid in (None, gpu.meta.uuid)]
        now = gpu.meta.driver_version
        differs = bool(now and result.driver_version and now != result.driver_version)
        if not changes and not differs:
            continue
        evidence = (Evidence(f"Driver at the last stress test: {result.driver_version or 'unknown'}; now: "
                             f"{now or 'unknown'}", float(len(changes) or 1), plural_word(len(changes) or 1, "change")),
                    Evidence("Days since that test", (ctx.frame.end_s - result.ended_s) / 86400.0, "days"))
        when = changes[0].time_s if changes else ctx.frame.end_s
        out.append(Recommendation("driver_change", "info",
                                  f"GPU {gpu.meta.index}: driver changed since the last stress test", evidence,
                                  actions.driver_changed(result, changes[0].detail if changes else None),
                                  ((result.started_s, when),), gpu.meta.index,
                                  gpu_key=gpu.meta.key))
    return out


def stress_regression(ctx: RuleContext) -> list[Recommendation]:
    """The latest stress result of a kind is below its baseline by more than the threshold.

    The baseline is the verdict's (``advisor.baseline.pick_baseline``): the best of the last ten
    usable runs before the latest of the same workload, dtype and GPU.
    """
    out = []
    groups: dict[tuple[str, str, str, str], list[StressResult]] = {}
    for result in ctx.frame.stress_results:
        if usable(result):
            groups.setdefault((result.gpu_uuid, result.workload, result.dtype, result.unit), []).append(result)
    by_uuid = {g.meta.uuid: g for g in ctx.frame.gpus}
    for (uuid, workload, dtype, unit), results in groups.items():
        latest = max(results, key=lambda r: (r.started_s, r.run_id))
        baseline = pick_baseline(results, workload, dtype, uuid, unit=unit, before_s=latest.started_s)
        if baseline is None:
            continue
        drop_pct = (1.0 - latest.sustained_throughput / baseline.sustained_throughput) * 100.0
        if drop_pct < ctx.thresholds.stress_regression_pct:
            continue
        gpu = by_uuid.get(uuid)
        index = gpu.meta.index if gpu is not None else None
        severity: Severity = "critical" if drop_pct >= 3 * ctx.thresholds.stress_regression_pct else "warning"
        evidence = (Evidence("Drop against the baseline", drop_pct, "%"),
                    Evidence(f"Baseline {workload} {dtype} (sustained)", baseline.sustained_throughput, unit),
                    Evidence("Latest (sustained)", latest.sustained_throughput, unit))
        name = gpu.meta.name if gpu is not None else latest.gpu_name
        action = actions.stress_regression(gpu.meta, ctx.frame.platform) if gpu is not None else \
            "Re-run the stress test and compare clocks and temperatures with the baseline."
        out.append(Recommendation("stress_regression", severity, f"{name}: stress result below its baseline",
                                  evidence, action, ((baseline.started_s, baseline.ended_s),
                                                     (latest.started_s, latest.ended_s)), index, None, drop_pct,
                                                     gpu_key=(gpu.meta.key if gpu is not None else None)))
    return out
