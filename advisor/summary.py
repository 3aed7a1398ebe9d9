"""Weekly summary: per-GPU figures, top processes, an hour-by-weekday heatmap (local time), week-on-week changes.

Pure: the caller passes the frame(s), the time zone (a ``tzinfo``; the heatmap is in local
time, DST included) and the recommendations to show; nothing here reads a clock or a file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo

import numpy as np

from advisor.busy import DEFAULT_BUSY_UTIL_PCT, busy_share
from advisor.clock_events import THROTTLE_REASONS, ClockEventReason, bits
from advisor.frame import FloatArray, GpuSeries, HistoryFrame
from advisor.profile import WorkloadProfile, gpu_profile
from advisor.rules import Recommendation, sort_key
from advisor.span import recorded_s
from advisor.stats import (
    THROTTLE_CAUSES,
    busy_seconds,
    energy_kwh,
    mean_util_while_busy,
    nanmax,
    reason_seconds,
    values_at,
    weighted_percentile,
)
from advisor.wording import duration_text

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
#: "VRAM above 90 %" in the summary (a fixed line, unlike the advisor's configurable headroom).
VRAM_HIGH_FRACTION = 0.90
#: A week with less recorded time than this share of its span is partial: its sums are compared per day.
FULL_WEEK_SHARE = 0.95


@dataclass(frozen=True)
class ProcessUse:
    name: str
    gpu_index: int
    #: Hours the process held memory while its GPU was busy.
    gpu_hours: float
    present_hours: float
    peak_vram_mib: float
    #: The GPU by identity (``GpuMeta.key``): two machines' GPUs share an index.
    gpu_key: str = ""


@dataclass(frozen=True)
class GpuWeek:
    index: int
    uuid: str
    name: str
    simulated: bool
    busy_hours: float
    mean_util_busy_pct: float
    energy_kwh: float
    energy_cost: float
    peak_temp_c: float
    p95_temp_c: float
    throttle_minutes: dict[str, float]
    vram_peak_mib: float
    vram_total_mib: float | None
    vram_above_90_minutes: float
    #: 7 x 24 mean utilization (%), Monday first, local time; NaN where nothing was recorded.
    heatmap_pct: list[list[float]]
    #: Busy hours per local weekday, Monday first.
    daily_busy_hours: list[float]
    profile: WorkloadProfile
    #: Of the thermal minutes, those at the HW thermal slowdown (the advice's "Of it at the HW thermal slowdown").
    hw_thermal_minutes: float = 0.0
    #: Minutes under any throttle cause (the causes overlap: their minutes do not add up).
    throttled_minutes: float = 0.0
    #: Seconds of history recorded in the week (a partial week has less than its span).
    recorded_s: float = 0.0


@dataclass(frozen=True)
class Change:
    gpu_index: int
    label: str
    before: float
    after: float
    unit: str
    #: The GPU by identity (``GpuMeta.key``).
    gpu_key: str = ""

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def delta_unit(self) -> str:
        """A change of a percentage is in percentage points ("+5.2 pp"), not per cent of it."""
        return "pp" if self.unit == "%" else self.unit

    def delta_text(self, decimals: int = 1) -> str:
        """"+5.2 pp", "-0.5 kWh", "+58.8 h/day"."""
        sign = "+" if self.delta > 0 else ""
        return f"{sign}{self.delta:,.{decimals}f} {self.delta_unit}"


@dataclass(frozen=True)
class WeeklySummary:
    start_s: float
    end_s: float
    timezone_name: str
    currency: str
    electricity_price_per_kwh: float
    gpus: tuple[GpuWeek, ...]
    top_processes: tuple[ProcessUse, ...]
    changes: tuple[Change, ...]
    recommendations: tuple[Recommendation, ...]
    demo: bool = False
    has_previous: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: Said above the week-on-week changes when a week is partial ("" when both are full).
    changes_note: str = ""


def _local_offsets(time_s: FloatArray, tz: tzinfo) -> FloatArray:
    """UTC offset (s) of each time in ``tz``, looked up once per hour (DST changes on the hour)."""
    if time_s.size == 0:
        return np.zeros(0)
    hours = np.floor(time_s / 3600.0).astype(np.int64)
    first = int(hours.min())
    count = int(hours.max()) - first + 1
    table = np.empty(count)
    for i in range(count):
        offset = datetime.fromtimestamp((first + i) * 3600.0, tz).utcoffset()
        table[i] = offset.total_seconds() if offset is not None else 0.0
    return np.asarray(table[hours - first], dtype=np.float64)


def weekday_hour(time_s: FloatArray, tz: tzinfo) -> tuple[FloatArray, FloatArray]:
    """Local weekday (Monday 0) and hour of day for each time."""
    local = time_s + _local_offsets(time_s, tz)
    days = np.floor(local / 86400.0)
    weekday = (days + 3) % 7  # 1970-01-01 was a Thursday
    hour = np.floor((local - days * 86400.0) / 3600.0)
    return weekday, hour


def heatmap(gpu: GpuSeries, tz: tzinfo, local: tuple[FloatArray, FloatArray] | None = None) -> list[list[float]]:
    weekday, hour = local if local is not None else weekday_hour(gpu.time_s, tz)
    cell = (weekday * 24 + hour).astype(np.int64)
    util = gpu.utilization_gpu_pct
    ok = np.isfinite(util)
    weight = np.bincount(cell[ok], weights=gpu.duration_s[ok], minlength=168)
    total = np.bincount(cell[ok], weights=(util * gpu.duration_s)[ok], minlength=168)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(weight > 0, total / np.where(weight > 0, weight, 1.0), np.nan)
    return [[float(v) for v in mean[d * 24:(d + 1) * 24]] for d in range(7)]


def gpu_week(frame: HistoryFrame, gpu: GpuSeries, tz: tzinfo, price_per_kwh: float, *,
             busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT) -> GpuWeek:
    busy = busy_seconds(gpu, frame.processes, threshold_pct=busy_util_pct)
    kwh = float(energy_kwh(gpu).sum())
    temp_max = gpu.temperature_max_c if gpu.temperature_max_c is not None else gpu.temperature_c
    vram = gpu.vram_used_max_mib if gpu.vram_used_max_mib is not None else gpu.vram_used_mib
    total = gpu.meta.vram_total_mib
    above = np.nan_to_num(vram) > (total or math.inf) * VRAM_HIGH_FRACTION
    local = weekday_hour(gpu.time_s, tz)
    weekday = local[0]
    daily = np.bincount(weekday.astype(np.int64), weights=busy, minlength=7)[:7] / 3600.0
    return GpuWeek(
        index=gpu.meta.index, uuid=gpu.meta.uuid, name=gpu.meta.name, simulated=gpu.meta.simulated,
        busy_hours=float(busy.sum()) / 3600.0,
        mean_util_busy_pct=mean_util_while_busy(gpu, busy),
        energy_kwh=kwh, energy_cost=kwh * price_per_kwh,
        peak_temp_c=nanmax(temp_max),
        p95_temp_c=weighted_percentile(gpu.temperature_c, gpu.duration_s, 95.0),
        throttle_minutes={name: float(reason_seconds(gpu, cause).sum()) / 60.0 for name, cause in THROTTLE_CAUSES},
        vram_peak_mib=nanmax(vram), vram_total_mib=total,
        vram_above_90_minutes=float(gpu.duration_s[above].sum()) / 60.0,
        heatmap_pct=heatmap(gpu, tz, local), daily_busy_hours=[float(h) for h in daily],
        profile=gpu_profile(frame, gpu, threshold_pct=busy_util_pct),
        hw_thermal_minutes=float(reason_seconds(gpu, bits(ClockEventReason.HW_THERMAL_SLOWDOWN)).sum()) / 60.0,
        throttled_minutes=float(reason_seconds(gpu, bits(THROTTLE_REASONS)).sum()) / 60.0,
        recorded_s=recorded_s(gpu),
    )


def top_processes(frame: HistoryFrame, limit: int = 8, *,
                  threshold_pct: float = DEFAULT_BUSY_UTIL_PCT) -> tuple[ProcessUse, ...]:
    """Processes by GPU-hours (time holding memory while the GPU was busy), then peak VRAM."""
    procs = frame.processes
    if procs is None or procs.time_s.size == 0:
        return ()
    busy_row = np.zeros(procs.time_s.size, dtype=bool)
    for gpu in frame.gpus:
        mine = procs.rows_of(gpu.meta)
        util = values_at(gpu, procs.time_s[mine], gpu.utilization_gpu_pct)
        # The one busy definition, per process row: its own kind is what the GPU's list said of it.
        compute = None if procs.compute is None else procs.compute[mine].astype(np.float64)
        busy_row[np.flatnonzero(mine)] = busy_share(util, compute, threshold_pct=threshold_pct) > 0
    # Per GPU by identity (its place in the frame), not its index: two machines' logs both say GPU 0.
    place = np.full(procs.time_s.size, -1, dtype=np.int64)
    for n, gpu in enumerate(frame.gpus):
        place[procs.rows_of(gpu.meta)] = n
    key = place * (len(procs.names) + 1) + procs.name_id
    out = []
    for k in np.unique(key[place >= 0]).tolist():
        rows = key == k
        n, name_id = divmod(int(k), len(procs.names) + 1)
        meta = frame.gpus[n].meta
        out.append(ProcessUse(procs.names[name_id], meta.index,
                              float(procs.duration_s[rows & busy_row].sum()) / 3600.0,
                              float(procs.duration_s[rows].sum()) / 3600.0,
                              nanmax(procs.vram_mib[rows]), meta.key))
    out.sort(key=lambda p: (-p.gpu_hours, -np.nan_to_num(p.peak_vram_mib)))
    return tuple(out[:limit])


def _partial(week: GpuWeek, span_s: float) -> bool:
    return week.recorded_s < FULL_WEEK_SHARE * span_s


def _changes(now: tuple[GpuWeek, ...], before: tuple[GpuWeek, ...], span_s: float,
             previous_span_s: float) -> tuple[tuple[Change, ...], str]:
    """The week-on-week changes, and the note that says when a partial week's sums are compared per day."""
    previous = {g.uuid: g for g in before}
    out: list[Change] = []
    notes: list[str] = []
    for g in now:
        p = previous.get(g.uuid)
        if p is None:
            continue
        per_day = _partial(g, span_s) or _partial(p, previous_span_s)
        # Sums grow with the time recorded: a partial week compares them per recorded day.
        scale_p = 86400.0 / p.recorded_s if per_day and p.recorded_s > 0 else 1.0
        scale_g = 86400.0 / g.recorded_s if per_day and g.recorded_s > 0 else 1.0
        suffix, per = (" per recorded day", "/day") if per_day else ("", "")
        pairs = (
            ("Busy hours" + suffix, p.busy_hours * scale_p, g.busy_hours * scale_g, "h" + per),
            ("Mean utilization while busy", p.mean_util_busy_pct, g.mean_util_busy_pct, "%"),
            ("Energy" + suffix, p.energy_kwh * scale_p, g.energy_kwh * scale_g, "kWh" + per),
            ("Peak temperature", p.peak_temp_c, g.peak_temp_c, "°C"),
            ("Throttled" + suffix, p.throttled_minutes * scale_p, g.throttled_minutes * scale_g, "min" + per),
            ("Peak VRAM", p.vram_peak_mib, g.vram_peak_mib, "MiB"),
        )
        out.extend(Change(g.index, label, b, a, unit, g.uuid or f"index:{g.index}") for label, b, a, unit in pairs)
        if per_day:
            notes.append(f"GPU {g.index}: the previous week holds {duration_text(p.recorded_s)} of history, this "
                         f"week {duration_text(g.recorded_s)}: busy hours, energy and throttled time are compared "
                         "per recorded day.")
    return tuple(out), " ".join(notes)


def weekly_summary(frame: HistoryFrame, *, tz: tzinfo = UTC, previous: HistoryFrame | None = None,
                   recommendations: list[Recommendation] | tuple[Recommendation, ...] = (),
                   price_per_kwh: float = 0.0, currency: str = "USD", top_n: int = 5,
                   busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT) -> WeeklySummary:
    """The summary of ``frame`` (usually one week), compared with ``previous`` when given."""
    gpus = tuple(gpu_week(frame, gpu, tz, price_per_kwh, busy_util_pct=busy_util_pct) for gpu in frame.gpus)
    changes: tuple[Change, ...] = ()
    changes_note = ""
    if previous is not None:
        before = tuple(gpu_week(previous, gpu, tz, price_per_kwh, busy_util_pct=busy_util_pct)
                       for gpu in previous.gpus)
        changes, changes_note = _changes(gpus, before, frame.end_s - frame.start_s,
                                         previous.end_s - previous.start_s)
    notes = []
    if frame.demo:
        notes.append("Demo data: a simulated week, not your GPU.")
    if not any(len(g) for g in frame.gpus):
        notes.append("No history recorded in this week.")
    top = tuple(sorted(recommendations, key=sort_key)[:top_n])
    return WeeklySummary(frame.start_s, frame.end_s, str(tz), currency, price_per_kwh, gpus,
                         top_processes(frame, threshold_pct=busy_util_pct),
                         changes, top, frame.demo, previous is not None, tuple(notes), changes_note)
