"""What every advice rule shares: Recommendation and its Evidence, the rule context, and the busy-share helpers.

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

from advisor.cap_share import busy_text
from advisor.costs import CloudOffer
from advisor.frame import FloatArray, GpuSeries, HistoryFrame
from advisor.profile import Job, WorkloadProfile, gpu_profile
from advisor.stats import BoolArray, busy_seconds, host_values_at, intervals_from_mask, rows_in
from advisor.thresholds import Thresholds

Severity = Literal["critical", "warning", "info"]
SEVERITY_ORDER: dict[str, int] = {"critical": 0, "warning": 1, "info": 2}
#: Utilization at or above this is "heavy work" (battery, PCIe rules).
HEAVY_UTIL_PCT = 50.0
#: Below this a GPU holding memory counts as idle (a desktop's compositor shows a few %).
IDLE_UTIL_PCT = 5.0
#: Stretches of evidence closer than this are shown as one time range.
RANGE_GAP_S = 600.0
#: Rules that judge what the data shows (a throttle under load) need this much busy time, not the
#: ``min_busy_hours`` that rules over history need: a 5 min stress run or an 18 min log is advice enough.
FIRST_DATA_BUSY_S = 120.0


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
    #: The GPU by identity (``GpuMeta.key``): ``gpu_index`` is only its slot, which two machines share.
    gpu_key: str | None = None

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
    #: Per GPU by identity (``GpuMeta.key``), never its index: two machines' logs both say GPU 0.
    busy: dict[str, FloatArray] = field(default_factory=dict)
    profiles: dict[str, WorkloadProfile] = field(default_factory=dict)
    _host: dict[tuple[str, str], FloatArray] = field(default_factory=dict)

    def gpu_busy(self, gpu: GpuSeries) -> FloatArray:
        if gpu.meta.key not in self.busy:
            self.busy[gpu.meta.key] = busy_seconds(gpu, self.frame.processes,
                                                   threshold_pct=self.thresholds.busy_util_pct)
        return self.busy[gpu.meta.key]

    def gpu_profile(self, gpu: GpuSeries) -> WorkloadProfile:
        if gpu.meta.key not in self.profiles:
            self.profiles[gpu.meta.key] = gpu_profile(self.frame, gpu, threshold_pct=self.thresholds.busy_util_pct)
        return self.profiles[gpu.meta.key]

    def host_at(self, gpu: GpuSeries, column: str) -> FloatArray:
        """A host column at the GPU's row times (cached: several rules ask)."""
        key = (gpu.meta.key, column)
        if key not in self._host:
            self._host[key] = host_values_at(self.frame, gpu.time_s, column)
        return self._host[key]

    def enough_busy(self, gpu: GpuSeries) -> bool:
        """Enough busy time for rules over history (``[advisor] min_busy_hours``)."""
        return float(self.gpu_busy(gpu).sum()) >= self.thresholds.min_busy_hours * 3600.0

    def some_busy(self, gpu: GpuSeries) -> bool:
        """Enough busy time for rules that judge what the first data shows (``FIRST_DATA_BUSY_S``)."""
        return float(self.gpu_busy(gpu).sum()) >= FIRST_DATA_BUSY_S


Rule = Callable[[RuleContext], list[Recommendation]]


def ranges(gpu: GpuSeries, mask: BoolArray, limit: int = 5) -> tuple[tuple[float, float], ...]:
    """The ``limit`` longest stretches where ``mask`` holds, in time order (the ranges a card shows)."""
    spans = intervals_from_mask(gpu.time_s, gpu.duration_s, mask, RANGE_GAP_S)
    spans.sort(key=lambda s: s.duration_s, reverse=True)
    return tuple(sorted((s.start_s, s.end_s) for s in spans[:limit]))


@dataclass(frozen=True)
class BusyShare:
    """How much of the busy time a condition held: over the whole window and in its worst run."""

    share: float  # of all busy time
    seconds: float
    worst_job: Job | None
    worst_share: float


def busy_share(ctx: RuleContext, gpu: GpuSeries, seconds: FloatArray) -> BusyShare:
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
    return BusyShare(float(hit.sum()) / total if total > 0 else 0.0, float(hit.sum()), worst, worst_share)


def job_evidence(share: BusyShare, label: str) -> tuple[Evidence, ...]:
    if share.worst_job is None:
        return ()
    name = share.worst_job.process_names[0] if share.worst_job.process_names else "busy stretch"
    # Said with what it is a share of ("of its 6.6 busy hours"): a job card's share of the same run is too.
    return (Evidence(f"{label} in the worst run ({name}, of its {busy_text(share.worst_job.busy_s)})",
                     share.worst_share * 100.0, "%"),)


def fires(share: BusyShare, threshold_pct: float) -> bool:
    """The window as a whole, or its worst run alone, crosses the threshold."""
    return share.share * 100.0 >= threshold_pct or share.worst_share * 100.0 >= threshold_pct


def sort_key(rec: Recommendation) -> tuple[int, float, str]:
    """Most severe first, then the biggest, then by rule id (a stable order for equal scores)."""
    return (SEVERITY_ORDER.get(rec.severity, 9), -rec.score, rec.rule_id)
