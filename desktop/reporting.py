"""The weekly report's data, without Qt: its summary and advice, charts' series, labels and "Who used the GPU".

The advisor supplies the numbers (``advisor.summary``, ``desktop.advice``); ``desktop.report_week``
picks the week (ISO weeks in local time, DST included); this module builds the ``ReportData`` every
format renders: ``desktop.report_output`` writes the JSON and CSV, ``desktop.ui.report.reports``
draws the charts and renders HTML and PDF from the same data. ``HistorySource`` reads the history
for the Advisor, Costs and History pages (on their worker threads). A GPU is a card, not a slot:
series, charts and labels are keyed on its uuid, so a card swapped in slot 0 mid-week gets its own
charts and a label that says which ("GPU 0 (RTX 4090)", plus the uuid where slot and name are shared).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import Any

import numpy as np

from advisor.frame import FloatArray, GpuSeries, HistoryFrame
from advisor.rules import Recommendation
from advisor.summary import WeeklySummary, weekly_summary
from advisor.usage import NO_KEY, GpuEnergy, ProcessUsageRows, UsageTable, account_usage
from advisor.wording import parenthesized
from desktop import config
from desktop.advice import Advice, compute_advice, load_recent_frame, open_history
from desktop.errors import UserError
from desktop.report_week import WEEK_S, SystemLocalTime, default_week, load_week, week_label


@dataclass(frozen=True)
class ReportData:
    week_label: str
    summary: WeeklySummary
    advice: Advice
    generated_s: float
    #: chart key -> caption, in display order (the PNGs are rendered from ``series``).
    chart_captions: dict[str, str] = field(default_factory=dict)
    #: Hourly means per GPU for the charts: {gpu uuid: {"time_s"| metric: array}}.
    series: dict[str, dict[str, FloatArray]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: gpu uuid -> how the report names it ("GPU 0 (NVIDIA GeForce RTX 4090)").
    labels: dict[str, str] = field(default_factory=dict)
    #: "Who used the GPU": the week's usage by user, by command and (where any ran in one) by container.
    who: tuple[UsageTable, ...] = ()
    #: What the who tables' "(unknown …)" rows stand for (``unknown_notes``).
    who_notes: tuple[str, ...] = ()


def unknown_notes(rows: ProcessUsageRows | None) -> tuple[str, ...]:
    """What "(unknown user)" and "(unknown command)" stand for in these rows, one sentence each.

    Commands are stored since history schema v8: rows older than the first stored command were
    simply not recorded; only an unknown command after that is a process Rigscope could not read."""
    if rows is None or len(rows) == 0:
        return ()
    notes = []
    if (rows.user < 0).any():
        notes.append(f"{NO_KEY['user']}: processes whose owner Rigscope could not read.")
    unknown = rows.command < 0
    if unknown.any():
        known = ~unknown
        first_s = float(rows.time_s[known].min()) if known.any() else math.inf
        before = bool((unknown & (rows.time_s < first_s)).any())
        after = bool((unknown & (rows.time_s >= first_s)).any())
        why = []
        if before:
            why.append("command lines were not recorded then (history written before Rigscope stored them)")
        if after:
            why.append("processes whose command line Rigscope could not read (another user's)")
        notes.append(f"{NO_KEY['command']}: " + "; ".join(why) + ".")
    return tuple(notes)


def who_used(frame: HistoryFrame, rows: ProcessUsageRows | None, settings: config.Settings) -> tuple[UsageTable, ...]:
    """The week's usage tables (user, command, container) from the stored process rows and the frame's energy."""
    if rows is None or len(rows) == 0:
        return ()
    energy = [GpuEnergy.of(g) for g in frame.gpus]
    tables = tuple(account_usage(rows, energy, by, start_s=frame.start_s, end_s=frame.end_s,
                                 price_per_kwh=settings.costs.electricity_price_per_kwh,
                                 currency=settings.costs.currency) for by in ("user", "command", "container"))
    in_containers = bool((rows.container >= 0).any())
    return tables if in_containers else tables[:2]


def load_usage_rows(store: Any, frame: HistoryFrame) -> ProcessUsageRows:
    """The stored process samples of the frame's range, for ``build_report(usage_rows=...)``."""
    rows: ProcessUsageRows = store.process_usage_rows(frame.start_s, frame.end_s)
    return rows


def gpu_labels(gpus: list[tuple[int, str, str]]) -> dict[str, str]:
    """(index, uuid, name) -> {uuid: "GPU 0 (name)"}; cards that share slot and name also show their uuid."""
    shared = Counter((index, name) for index, _, name in gpus)
    return {uuid: f"GPU {index} {parenthesized(name)}" + (f" [{uuid}]" if shared[(index, name)] > 1 else "")
            for index, uuid, name in gpus}


def _slot_shared(data: ReportData, index: int) -> bool:
    return sum(1 for g in data.summary.gpus if g.index == index) > 1


def gpu_name(data: ReportData, index: int, key: str) -> str:
    """"GPU 0", or where two machines' GPUs share the slot, the report's label of the one meant (by identity)."""
    return data.labels.get(key, key) if key and _slot_shared(data, index) else f"GPU {index}"


def shared_slot_label(data: ReportData, rec: Recommendation) -> str:
    """Which GPU a recommendation is about, where its "GPU 0" is not enough (two machines' GPUs share the slot):
    the report's label of it; "" where the index names one GPU."""
    if rec.gpu_key is None or rec.gpu_index is None or not _slot_shared(data, rec.gpu_index):
        return ""
    return data.labels.get(rec.gpu_key, rec.gpu_key)


def chart_key(kind: str, position: int) -> str:
    """``util-0``: charts are numbered by the GPU's place in the report (a uuid is no safe resource name)."""
    return f"{kind}-{position}"


def hourly(gpu: GpuSeries, start_s: float, end_s: float) -> dict[str, FloatArray]:
    """Hourly time-weighted means of the charted metrics (NaN for hours with no data), and the power limit and
    slowdown temperature in force each hour."""
    edges = np.arange(start_s, end_s + 1.0, 3600.0)
    centre = edges[:-1] + 1800.0
    out: dict[str, FloatArray] = {"time_s": centre}
    bins = np.clip(np.searchsorted(edges, gpu.time_s, side="right") - 1, 0, len(centre) - 1)
    inside = (gpu.time_s >= start_s) & (gpu.time_s < end_s)
    for metric in ("utilization_gpu_pct", "temperature_c", "power_w", "vram_used_mib"):
        values: FloatArray = getattr(gpu, metric)
        ok = inside & np.isfinite(values)
        weight = np.bincount(bins[ok], weights=gpu.duration_s[ok], minlength=len(centre))
        total = np.bincount(bins[ok], weights=(values * gpu.duration_s)[ok], minlength=len(centre))
        out[metric] = np.where(weight > 0, total / np.where(weight > 0, weight, 1.0), np.nan)
    # The limits in force at the end of each hour (a step, never a mean of two limits; NaN: no data then).
    slowdown = gpu.temp_slowdown_c if gpu.temp_slowdown_c is not None else np.full(len(gpu), np.nan)
    for name, limit in (("power_limit_w", gpu.limit_per_row()), ("temp_slowdown_c", slowdown)):
        ok = inside & np.isfinite(limit)
        last = np.full(len(centre), -1, dtype=np.int64)
        np.maximum.at(last, bins[ok], np.flatnonzero(ok))
        out[name] = np.where(last >= 0, limit[np.maximum(last, 0)], np.nan) if len(limit) else \
            np.full(len(centre), np.nan)
    return out


def build_report(frame: HistoryFrame, previous: HistoryFrame | None, settings: config.Settings, tz: tzinfo,
                 label: str, *, now_s: float | None = None, notes: tuple[str, ...] = (),
                 offers: list[Any] | None = None, specs: list[Any] | None = None,
                 usage_rows: ProcessUsageRows | None = None) -> ReportData:
    """The report's data from frames (no database, no Qt): what every format renders; ``usage_rows``
    (``load_usage_rows``) gives the "Who used the GPU" tables."""
    advice = compute_advice(frame, settings, offers, specs)
    summary = weekly_summary(frame, tz=tz, previous=previous, recommendations=advice.recommendations,
                             price_per_kwh=settings.costs.electricity_price_per_kwh, currency=settings.costs.currency,
                             busy_util_pct=settings.advisor.busy_util_pct)
    labels = gpu_labels([(g.meta.index, g.meta.uuid, g.meta.name) for g in frame.gpus])
    captions: dict[str, str] = {}
    series: dict[str, dict[str, FloatArray]] = {}
    for n, gpu in enumerate(frame.gpus):
        name = labels[gpu.meta.uuid]
        series[gpu.meta.uuid] = hourly(gpu, frame.start_s, frame.end_s)
        captions[chart_key("util", n)] = f"{name}: utilization (hourly mean)"
        captions[chart_key("temp", n)] = f"{name}: temperature (hourly mean) and slowdown temperature"
        captions[chart_key("power", n)] = f"{name}: power (hourly mean) and power limit"
        captions[chart_key("heat", n)] = f"{name}: utilization by weekday and hour"
        captions[chart_key("daily", n)] = f"{name}: busy hours per day"
    who = who_used(frame, usage_rows, settings)
    if who and who[0].lines:
        captions[chart_key("who", 0)] = "Who used the GPU: energy per user"
    return ReportData(label, summary, advice, time.time() if now_s is None else now_s, captions, series, notes,
                      labels, who, unknown_notes(usage_rows) if who else ())


class HistorySource:
    """Reads the history database on demand for the three pages (read-only; the recorder may be writing)."""

    def __init__(self, db_path: Path, settings: config.Settings, days: float = 7.0) -> None:
        self.db_path = db_path
        self.settings = settings
        self.days = days

    def advice(self) -> Advice | None:
        try:
            store = open_history(str(self.db_path))
            try:
                frame = load_recent_frame(store, self.days)
            finally:
                store.close()
        except UserError:
            return None
        return compute_advice(frame, self.settings)

    def weeks(self) -> list[str]:
        try:
            store = open_history(str(self.db_path))
        except UserError:
            return []
        with store:
            span = store.time_range()
        if span is None:
            return []
        tz = SystemLocalTime()
        labels: list[str] = []
        t = max(span[0], span[1] - 3600.0)  # as the report's default: a lone sample does not make a week
        while t >= span[0] - WEEK_S and len(labels) < 520:
            label = week_label(max(t, span[0]), tz)
            if label not in labels:
                labels.append(label)
            t -= WEEK_S
        return labels

    def default_week(self, now_s: float | None = None) -> str | None:
        """The week the History page opens on: `rigscope report`'s default (``default_week``)."""
        try:
            store = open_history(str(self.db_path))
        except UserError:
            return None
        with store:
            span = store.time_range()
        if span is None:
            return None
        return default_week(span, SystemLocalTime(), time.time() if now_s is None else now_s)[0]

    def report(self, label: str) -> ReportData:
        tz = SystemLocalTime()
        with open_history(str(self.db_path)) as store:
            label, frame, previous, notes = load_week(store, label, tz, time.time())
            usage_rows = load_usage_rows(store, frame)
        return build_report(frame, previous, self.settings, tz, label, notes=notes, usage_rows=usage_rows)
