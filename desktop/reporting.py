"""The weekly report's data, without Qt: the week in local time, its summary and advice, JSON and CSV.

The advisor supplies the numbers (``advisor.summary``, ``desktop.advice``); this module picks
the week (ISO weeks in local time, DST included), builds the ``ReportData`` every format
renders, and writes the JSON and CSV; ``desktop.ui.report.reports`` draws the charts and renders
HTML and PDF from the same data. ``HistorySource`` reads the history for the Advisor, Costs
and History pages (on their worker threads). A GPU is a card, not a slot: series, charts and
labels are keyed on its uuid, so a card swapped in slot 0 mid-week gets its own charts and a
label that says which ("GPU 0 (RTX 4090)", plus the uuid where slot and name are shared).
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

import numpy as np

from advisor.frame import FloatArray, GpuSeries, HistoryFrame
from advisor.rules import Recommendation
from advisor.safetext import printable
from advisor.summary import WEEKDAYS, WeeklySummary, weekly_summary
from advisor.usage import NO_KEY, GpuEnergy, ProcessUsageRows, UsageTable, account_usage
from advisor.wording import parenthesized
from desktop import config
from desktop.advice import (
    Advice,
    advice_json,
    compute_advice,
    json_safe,
    load_recent_frame,
    open_history,
    recommendation_dict,
)
from desktop.csvsafe import CsvWriter
from desktop.errors import UserError

WEEK_S = 7 * 86400.0


class SystemLocalTime(tzinfo):
    """The operating system's local time zone, DST included (``datetime.astimezone()`` fixes one offset)."""

    def _offset_at(self, epoch_s: float) -> timedelta:
        return timedelta(seconds=time.localtime(epoch_s).tm_gmtoff)

    def utcoffset(self, dt: datetime | None) -> timedelta:
        if dt is None:
            return self._offset_at(time.time())
        return self._offset_at(time.mktime(dt.replace(tzinfo=None).timetuple()))

    def dst(self, dt: datetime | None) -> timedelta:
        return timedelta(0)

    def tzname(self, dt: datetime | None) -> str:
        return time.strftime("%Z")

    def fromutc(self, dt: datetime) -> datetime:
        epoch = (dt.replace(tzinfo=None) - datetime(1970, 1, 1)).total_seconds()
        return dt + self._offset_at(epoch)

    def __str__(self) -> str:
        return f"local time, {time.strftime('%Z')}"


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


def week_bounds(label: str, tz: tzinfo) -> tuple[float, float]:
    """``2026-W48`` -> Monday 00:00 to the next Monday 00:00, local time, as epoch seconds."""
    try:
        year_text, week_text = label.upper().split("-W")
        monday = datetime.fromisocalendar(int(year_text), int(week_text), 1)
    except ValueError:
        raise UserError(f"--week {label!r}: expected an ISO week such as 2026-W48") from None
    start = monday.replace(tzinfo=tz).timestamp()
    end = (monday + timedelta(days=7)).replace(tzinfo=tz).timestamp()
    return start, end


def week_label(time_s: float, tz: tzinfo) -> str:
    year, week, _ = datetime.fromtimestamp(time_s, tz).isocalendar()
    return f"{year}-W{week:02d}"


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


def to_json(data: ReportData) -> str:
    summary = dataclasses.asdict(data.summary)
    summary["recommendations"] = [recommendation_dict(r) for r in data.summary.recommendations]
    # The change and its unit as the HTML shows them: a percentage changes by percentage points.
    for change, row in zip(data.summary.changes, summary["changes"], strict=True):
        row.update(delta=change.delta, delta_unit=change.delta_unit)
    payload = {"week": data.week_label, "generated_s": data.generated_s, "notes": list(data.notes),
               "summary": json_safe(summary), "advice": advice_json(data.advice),
               "who_used_the_gpu": [table.to_dict() for table in data.who], "who_notes": list(data.who_notes)}
    # ASCII only: a name's ESC, C1 control, bidi override or lone surrogate is written as its \\u escape,
    # so `report --format json -o -` is safe on a terminal and any reader gets the exact name back.
    return json.dumps(payload, indent=2, ensure_ascii=True)


def to_csv(data: ReportData) -> str:
    """Long format: section, gpu, item, value, unit (one figure a line, easy to pivot).

    The gpu column is the index; where a slot held two cards it is "index (uuid)". Text cells are
    ``printable`` (a process named ``py\\x1b]0;…`` shows the escape, never the byte, so `-o -` is safe
    on a terminal) and go through ``desktop.csvsafe`` (a process may be named ``=cmd|...``)."""
    out = io.StringIO()
    w = CsvWriter(out)
    w.writerow(["section", "gpu", "item", "value", "unit"])
    slots = Counter(g.index for g in data.summary.gpus)

    def row(*cells: Any) -> None:
        w.writerow(printable(c) if isinstance(c, str) else c for c in cells)

    if data.summary.demo:  # first, as the HTML report's note: a spreadsheet of the demo week says so
        row("note", "", "demo", "Demo data: a simulated week, not your GPU.", "")

    for g in data.summary.gpus:
        gpu: int | str = g.index if slots[g.index] == 1 else f"{g.index} ({g.uuid})"
        row("gpu", gpu, "name", g.name, "")
        row("gpu", gpu, "busy", round(g.busy_hours, 3), "h")
        row("gpu", gpu, "mean utilization while busy", round(g.mean_util_busy_pct, 2), "%")
        row("gpu", gpu, "energy", round(g.energy_kwh, 4), "kWh")
        row("gpu", gpu, "energy cost", round(g.energy_cost, 4), data.summary.currency)
        row("gpu", gpu, "peak temperature", g.peak_temp_c, "°C")
        row("gpu", gpu, "p95 temperature", g.p95_temp_c, "°C")
        row("gpu", gpu, "throttled: any cause", round(g.throttled_minutes, 2), "min")
        for cause, minutes in g.throttle_minutes.items():
            row("gpu", gpu, f"throttled: {cause}", round(minutes, 2), "min")
        row("gpu", gpu, "throttled: of it HW thermal", round(g.hw_thermal_minutes, 2), "min")
        row("gpu", gpu, "VRAM peak", g.vram_peak_mib, "MiB")
        row("gpu", gpu, "VRAM above 90 %", round(g.vram_above_90_minutes, 2), "min")
        for d, day in enumerate(WEEKDAYS):
            for h, value in enumerate(g.heatmap_pct[d]):
                row("heatmap", gpu, f"{day} {h:02d}:00", round(value, 2) if math.isfinite(value) else "", "%")
    for p in data.summary.top_processes:
        row("process", p.gpu_index, p.name, round(p.gpu_hours, 3), "GPU-h")
    for table in data.who:
        for line in table.lines:
            row(f"who by {table.by}", "", f"{line.key}: GPU time", round(line.gpu_hours, 3), "GPU-h")
            row(f"who by {table.by}", "", f"{line.key}: energy", round(line.energy_wh, 2), "Wh")
            row(f"who by {table.by}", "", f"{line.key}: energy cost", round(line.cost, 4), table.currency)
    for c in data.summary.changes:
        row("change", c.gpu_index, c.label, round(c.delta, 3), c.delta_unit)
    for r in data.summary.recommendations:
        row("recommendation", "" if r.gpu_index is None else r.gpu_index, f"{r.severity}: {r.title}", r.rule_id, "")
    for cost in data.advice.costs:
        row("cost", cost.gpu_name, "owned per month", round(cost.owned_month, 2), data.advice.currency)
        for o in cost.options:
            row("cost", cost.gpu_name, f"{o.offer.gpu_model} at {o.offer.provider}, on demand per month",
                round(o.on_demand_month, 2), "USD")
    return out.getvalue()


def _umask() -> int:
    """The process's umask without changing it (os.umask sets it: not thread-safe); 022 where it cannot be read."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def write_beside(path: Path, write: Callable[[Path], None]) -> None:
    """Make ``path`` whole or not at all: ``write(temporary)`` fills a file beside it (same folder, so the
    rename is atomic), which then replaces ``path`` (``os.replace``). A symlink at ``path`` is replaced by
    the file, never followed (what it points to is untouched); a write that fails (a full disk) leaves the
    old file as it was and no partial one. The new file gets the old one's permissions, else the umask's."""
    try:
        mode = os.lstat(path).st_mode & 0o777 if path.is_file() and not path.is_symlink() else None
    except OSError:
        mode = None
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    temporary = Path(name)
    try:
        os.chmod(temporary, mode if mode is not None else 0o666 & ~_umask())
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_report_text(path: Path, text: str) -> None:
    """A report's text (HTML, JSON, CSV) into ``path`` through ``write_beside``, flushed to the disk."""
    data = memoryview(text.encode("utf-8"))

    def write(temporary: Path) -> None:
        fd = os.open(temporary, os.O_WRONLY | os.O_TRUNC)
        try:
            view = data
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)

    write_beside(path, write)


def default_week(span: tuple[float, float] | None, tz: tzinfo, now_s: float) -> tuple[str, tuple[str, ...]]:
    """The week `rigscope report` and the window's History page open on: the last full week, or where it has no
    history, the newest week with data (and the note that says so)."""
    label = week_label(now_s - WEEK_S, tz)
    start, end = week_bounds(label, tz)
    if span is not None and (span[1] <= start or span[0] >= end):  # nothing recorded then
        # the week holding the newest hour, so a lone sample on Monday 00:00 does not pick an empty week
        label = week_label(max(span[0], span[1] - 3600.0), tz)
        return label, (f"The last full week has no history; this is the newest week with data ({label}).",)
    return label, ()


def load_week(store: Any, label: str | None, tz: tzinfo, now_s: float) -> tuple[str, HistoryFrame,
                                                                                 HistoryFrame | None, tuple[str, ...]]:
    """The frames for ``label`` (default: the last full week, or the newest week with data) and the week before."""
    from desktop.history.frames import load_frame

    notes: tuple[str, ...] = ()
    span = store.time_range()
    if label is None:
        label, notes = default_week(span, tz, now_s)
    start, end = week_bounds(label, tz)
    if span is None or span[1] <= start or span[0] >= end:
        raise UserError(f"no history recorded in {label}"
                        + (f" (the history covers {week_label(span[0], tz)} to {week_label(span[1] - 1, tz)})"
                           if span else ""))
    # Named by its week: costs and busy hours say "from 1.6 recorded days of 2026-W48" (advisor.span).
    frame = dataclasses.replace(load_frame(store, start, end, platform=sys.platform), label=label)
    previous = load_frame(store, start - WEEK_S, start, platform=sys.platform) if span[0] < start else None
    if previous is not None and not previous.gpus:
        previous = None
    return label, frame, previous, notes


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
