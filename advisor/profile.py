"""Workload profile: what the busy time of each GPU looks like (training, bursts, serving), with reasons."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from advisor.busy import DEFAULT_BUSY_UTIL_PCT
from advisor.frame import FloatArray, GpuMeta, GpuSeries, HistoryFrame, IntArray, ProcessSamples
from advisor.stats import Interval, busy_intervals, busy_seconds, fmt_hours, rows_in, weighted_mean

TRAINING = "training"
BURSTS = "bursts"
INFERENCE = "inference"
KINDS: tuple[str, ...] = (TRAINING, BURSTS, INFERENCE)
KIND_LABELS = {
    TRAINING: "long training runs",
    BURSTS: "fine-tuning or experimentation bursts",
    INFERENCE: "inference serving",
    "idle": "idle",
}

#: A busy stretch at least this long is a run, not a burst.
LONG_RUN_S = 2 * 3600.0
#: A long stretch averaging less than this looks like a server answering requests.
SERVING_MAX_UTIL_PCT = 40.0
#: Process names that say "server" whatever the utilization.
_SERVING_HINTS = ("serve", "server", "vllm", "triton", "tgi", "ollama", "text-generation")


@dataclass(frozen=True)
class Job:
    """One busy stretch of one GPU and what it looks like."""

    gpu_index: int
    interval: Interval
    kind: str
    mean_util_pct: float
    busy_s: float
    process_names: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class WorkloadProfile:
    """Shares of a GPU's busy time per kind (they sum to 1 when there was any), idle share of all time."""

    gpu_index: int
    total_s: float
    busy_s: float
    shares: dict[str, float]
    idle_share: float
    reasons: dict[str, str]
    jobs: tuple[Job, ...]
    #: The GPU by identity (``GpuMeta.key``): two machines' GPUs share an index.
    gpu_key: str = ""


@dataclass(frozen=True)
class _GpuProcesses:
    """One GPU's process rows sorted by time, so a time range is a slice (no scan per busy stretch)."""

    time_s: FloatArray
    name_id: IntArray
    names: tuple[str, ...]

    @classmethod
    def of(cls, processes: ProcessSamples | None, gpu: GpuMeta) -> _GpuProcesses:
        if processes is None or processes.time_s.size == 0:
            return cls(np.zeros(0), np.zeros(0, dtype=np.int64), ())
        rows = np.flatnonzero(processes.rows_of(gpu))
        rows = rows[np.argsort(processes.time_s[rows], kind="stable")]
        return cls(processes.time_s[rows], processes.name_id[rows], processes.names)

    def names_in(self, interval: Interval) -> tuple[str, ...]:
        """Process names seen within ``interval``, most often seen first."""
        lo = int(np.searchsorted(self.time_s, interval.start_s, side="left"))
        hi = int(np.searchsorted(self.time_s, interval.end_s, side="left"))
        if hi <= lo:
            return ()
        ids, counts = np.unique(self.name_id[lo:hi], return_counts=True)
        order = np.argsort(-counts, kind="stable")
        return tuple(self.names[int(i)] for i in ids[order])


def names_in(processes: ProcessSamples | None, gpu: GpuMeta, interval: Interval) -> tuple[str, ...]:
    """Process names seen on the GPU within ``interval``, most often seen first."""
    return _GpuProcesses.of(processes, gpu).names_in(interval)


def classify(interval: Interval, mean_util_pct: float, names: tuple[str, ...],
             busy_s: float | None = None) -> tuple[str, str]:
    """The kind of a busy stretch and the reason, in words: its length is its busy time when given (a stretch
    bridges short dips, so its wall time could exceed the busy total it is "the longest" of)."""
    length = fmt_hours(interval.duration_s if busy_s is None else min(busy_s, interval.duration_s))
    serving = [n for n in names if any(h in n.lower() for h in _SERVING_HINTS)]
    if serving:
        return INFERENCE, f"{length} of {serving[0]} (a serving process)"
    if interval.duration_s >= LONG_RUN_S:
        if np.isfinite(mean_util_pct) and mean_util_pct < SERVING_MAX_UTIL_PCT:
            return INFERENCE, f"{length} busy at only {mean_util_pct:.0f} % on average: requests, not a run"
        return TRAINING, f"{length} of sustained load at {mean_util_pct:.0f} %"
    return BURSTS, f"a {length} burst"


def gpu_profile(frame: HistoryFrame, gpu: GpuSeries, *,
                threshold_pct: float = DEFAULT_BUSY_UTIL_PCT) -> WorkloadProfile:
    busy = busy_seconds(gpu, frame.processes, threshold_pct=threshold_pct)
    total_s = float(gpu.duration_s.sum())
    busy_total = float(busy.sum())
    jobs: list[Job] = []
    procs = _GpuProcesses.of(frame.processes, gpu.meta)
    for interval in busy_intervals(gpu, frame.processes, threshold_pct=threshold_pct):
        rows = rows_in(gpu.time_s, interval)
        # The run's own mean: its data-loader waits (a few % between steps) are part of the run,
        # though not busy seconds.
        util = weighted_mean(gpu.utilization_gpu_pct[rows], gpu.duration_s[rows])
        names = procs.names_in(interval)
        busy_in = float(busy[rows].sum())
        kind, reason = classify(interval, util, names, busy_in)
        jobs.append(Job(gpu.meta.index, interval, kind, util, busy_in, names, reason))
    by_kind = {k: sum(j.busy_s for j in jobs if j.kind == k) for k in KINDS}
    counted = sum(by_kind.values())
    shares = {k: (v / counted if counted > 0 else 0.0) for k, v in by_kind.items()}
    reasons: dict[str, str] = {}
    for kind in KINDS:
        mine = [j for j in jobs if j.kind == kind]
        if not mine:
            continue
        top = max(mine, key=lambda j: j.busy_s)
        first_names = sorted({n for j in mine for n in j.process_names[:1]})
        who = f" ({', '.join(first_names[:3])})" if first_names else ""
        stretches = f"{len(mine)} stretch" + ("" if len(mine) == 1 else "es")
        reasons[kind] = f"{stretches}, {fmt_hours(by_kind[kind])} busy{who}; longest: {top.reason}"
    idle_share = 1.0 - busy_total / total_s if total_s > 0 else 1.0
    reasons["idle"] = f"{idle_share * 100:.0f} % of the time nothing ran"
    return WorkloadProfile(gpu.meta.index, total_s, busy_total, shares, idle_share, reasons, tuple(jobs),
                           gpu.meta.key)


def workload_profiles(frame: HistoryFrame, *, threshold_pct: float = DEFAULT_BUSY_UTIL_PCT
                      ) -> tuple[WorkloadProfile, ...]:
    return tuple(gpu_profile(frame, gpu, threshold_pct=threshold_pct) for gpu in frame.gpus)
