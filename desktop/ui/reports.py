"""`rigscope report`: the weekly summary as HTML, PDF (Qt's PDF writer), JSON or CSV.

The advisor supplies the numbers (``advisor.summary``, ``desktop.advice``); this module adds
the week selection in local time, the charts (pyqtgraph exported offscreen to PNG, so no
display is needed) and the four renderings.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import math
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

import numpy as np

from advisor.frame import FloatArray, GpuSeries, HistoryFrame
from advisor.summary import WEEKDAYS, WeeklySummary, weekly_summary
from desktop import config
from desktop.advice import Advice, advice_json, compute_advice, json_safe, open_history, recommendation_dict
from desktop.errors import UserError

WEEK_S = 7 * 86400.0
FORMATS = ("html", "pdf", "json", "csv")


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
    #: Hourly means per GPU for the charts: {gpu index: {"time_s"| metric: array}}.
    series: dict[int, dict[str, FloatArray]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


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
    """Hourly time-weighted means of the charted metrics (NaN for hours with no data)."""
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
    return out


def build_report(frame: HistoryFrame, previous: HistoryFrame | None, settings: config.Settings, tz: tzinfo,
                 label: str, *, now_s: float | None = None, notes: tuple[str, ...] = (),
                 offers: list[Any] | None = None, specs: list[Any] | None = None) -> ReportData:
    """The report's data from frames (no database, no Qt): what every format renders."""
    advice = compute_advice(frame, settings, offers, specs)
    summary = weekly_summary(frame, tz=tz, previous=previous, recommendations=advice.recommendations,
                             price_per_kwh=settings.costs.electricity_price_per_kwh, currency=settings.costs.currency)
    captions: dict[str, str] = {}
    series: dict[int, dict[str, FloatArray]] = {}
    for gpu in frame.gpus:
        i = gpu.meta.index
        series[i] = hourly(gpu, frame.start_s, frame.end_s)
        captions[f"util-{i}"] = f"GPU {i}: utilization (hourly mean)"
        captions[f"temp-{i}"] = f"GPU {i}: temperature (hourly mean) and slowdown temperature"
        captions[f"power-{i}"] = f"GPU {i}: power (hourly mean) and power limit"
        captions[f"heat-{i}"] = f"GPU {i}: utilization by weekday and hour"
        captions[f"daily-{i}"] = f"GPU {i}: busy hours per day"
    return ReportData(label, summary, advice, time.time() if now_s is None else now_s, captions, series, notes)


def render_charts(data: ReportData) -> dict[str, bytes]:
    """Every chart of the report as PNG bytes (needs a QApplication, not a display)."""
    from desktop.ui import report_charts as rc

    rc.ensure_app()
    pngs: dict[str, bytes] = {}
    metas = {g.meta.index: g.meta for g in data.advice.frame.gpus}
    for week in data.summary.gpus:
        i = week.index
        s = data.series[i]
        meta = metas[i]
        pngs[f"util-{i}"] = rc.time_chart_png(s["time_s"], [("utilization", s["utilization_gpu_pct"])],
                                              title=f"GPU {i} utilization", y_label="%", y_range=(0, 100))
        pngs[f"temp-{i}"] = rc.time_chart_png(
            s["time_s"], [("temperature", s["temperature_c"])], title=f"GPU {i} temperature", y_label="°C",
            limit=(meta.temp_slowdown_c, "slowdown") if meta.temp_slowdown_c else None)
        pngs[f"power-{i}"] = rc.time_chart_png(
            s["time_s"], [("power", s["power_w"])], title=f"GPU {i} power", y_label="W",
            limit=(meta.power_limit_w, "power limit") if meta.power_limit_w else None)
        pngs[f"heat-{i}"] = rc.heatmap_png(week.heatmap_pct, title=f"GPU {i}: mean utilization, local time")
        pngs[f"daily-{i}"] = rc.bar_chart_png(WEEKDAYS, week.daily_busy_hours, title=f"GPU {i}: busy hours per day",
                                              y_label="h")
    return pngs


def to_html(data: ReportData, pngs: dict[str, bytes]) -> str:
    from desktop.ui.report_html import data_uri, render_html

    return render_html(data, lambda key: data_uri(pngs[key]))


def write_pdf(data: ReportData, pngs: dict[str, bytes], path: Path) -> int:
    """Render the HTML through QTextDocument into a PDF (A4); returns the page count."""
    from PySide6.QtCore import QMarginsF, QSizeF, QUrl
    from PySide6.QtGui import QImage, QPageLayout, QPageSize, QPdfWriter, QTextDocument

    from desktop.ui.report_html import render_html

    writer = QPdfWriter(str(path))
    writer.setPageSize(QPageSize(QPageSize.PageSizeId.A4))
    writer.setPageMargins(QMarginsF(15, 15, 15, 15), QPageLayout.Unit.Millimeter)
    writer.setResolution(96)
    writer.setTitle(f"Rigscope weekly report {data.week_label}")
    writer.setCreator("Rigscope")
    doc = QTextDocument()
    for key, png in pngs.items():
        doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(f"chart-{key}.png"), QImage.fromData(png))
    doc.setHtml(render_html(data, lambda key: f"chart-{key}.png"))
    rect = writer.pageLayout().paintRectPixels(writer.resolution())
    doc.setPageSize(QSizeF(rect.width(), rect.height()))
    doc.print_(writer)
    return int(doc.pageCount())


def to_json(data: ReportData) -> str:
    summary = dataclasses.asdict(data.summary)
    summary["recommendations"] = [recommendation_dict(r) for r in data.summary.recommendations]
    payload = {"week": data.week_label, "generated_s": data.generated_s, "notes": list(data.notes),
               "summary": json_safe(summary), "advice": advice_json(data.advice)}
    return json.dumps(payload, indent=2, ensure_ascii=False)


def _cell(value: Any) -> Any:
    """Keep a spreadsheet from reading a process name such as ``=cmd|...`` as a formula."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@"):
        return "'" + value
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    return value


def to_csv(data: ReportData) -> str:
    """Long format: section, gpu, item, value, unit (one figure a line, easy to pivot)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["section", "gpu", "item", "value", "unit"])

    def row(*cells: Any) -> None:
        w.writerow([_cell(c) for c in cells])

    for g in data.summary.gpus:
        row("gpu", g.index, "name", g.name, "")
        row("gpu", g.index, "busy", round(g.busy_hours, 3), "h")
        row("gpu", g.index, "mean utilization while busy", round(g.mean_util_busy_pct, 2), "%")
        row("gpu", g.index, "energy", round(g.energy_kwh, 4), "kWh")
        row("gpu", g.index, "energy cost", round(g.energy_cost, 4), data.summary.currency)
        row("gpu", g.index, "peak temperature", g.peak_temp_c, "°C")
        row("gpu", g.index, "p95 temperature", g.p95_temp_c, "°C")
        for cause, minutes in g.throttle_minutes.items():
            row("gpu", g.index, f"throttled: {cause}", round(minutes, 2), "min")
        row("gpu", g.index, "VRAM peak", g.vram_peak_mib, "MiB")
        row("gpu", g.index, "VRAM above 90 %", round(g.vram_above_90_minutes, 2), "min")
        for d, day in enumerate(WEEKDAYS):
            for h, value in enumerate(g.heatmap_pct[d]):
                row("heatmap", g.index, f"{day} {h:02d}:00", round(value, 2) if math.isfinite(value) else "", "%")
    for p in data.summary.top_processes:
        row("process", p.gpu_index, p.name, round(p.gpu_hours, 3), "GPU-h")
    for c in data.summary.changes:
        row("change", c.gpu_index, c.label, round(c.delta, 3), c.unit)
    for r in data.summary.recommendations:
        row("recommendation", "" if r.gpu_index is None else r.gpu_index, f"{r.severity}: {r.title}", r.rule_id, "")
    for cost in data.advice.costs:
        row("cost", cost.gpu_name, "owned per month", round(cost.owned_month, 2), data.advice.currency)
        for o in cost.options:
            row("cost", cost.gpu_name, f"{o.offer.gpu_model} at {o.offer.provider}, on demand per month",
                round(o.on_demand_month, 2), "USD")
    return out.getvalue()


def load_week(store: Any, label: str | None, tz: tzinfo, now_s: float) -> tuple[str, HistoryFrame,
                                                                                 HistoryFrame | None, tuple[str, ...]]:
    """The frames for ``label`` (default: the last full week, or the newest week with data) and the week before."""
    from desktop.history.frames import load_frame

    notes: tuple[str, ...] = ()
    span = store.time_range()
    if label is None:
        label = week_label(now_s - WEEK_S, tz)
        start, end = week_bounds(label, tz)
        if span is not None and (span[1] <= start or span[0] >= end):  # nothing recorded then
            # the week holding the newest hour, so a lone sample on Monday 00:00 does not pick an empty week
            label = week_label(max(span[0], span[1] - 3600.0), tz)
            notes = (f"The last full week has no history; this is the newest week with data ({label}).",)
    start, end = week_bounds(label, tz)
    if span is None or span[1] <= start or span[0] >= end:
        raise UserError(f"no history recorded in {label}"
                        + (f" (the history covers {week_label(span[0], tz)} to {week_label(span[1] - 1, tz)})"
                           if span else ""))
    frame = load_frame(store, start, end, platform=sys.platform)
    previous = load_frame(store, start - WEEK_S, start, platform=sys.platform) if span[0] < start else None
    if previous is not None and not previous.gpus:
        previous = None
    return label, frame, previous, notes


def main(args: argparse.Namespace) -> int:
    fmt = args.format
    output = Path(args.output).expanduser()
    settings, problems = config.load()
    for key, message in problems:
        print(f"settings: {key}: {message}", file=sys.stderr)
    tz = SystemLocalTime()
    store = open_history(args.db)
    try:
        label, frame, previous, notes = load_week(store, args.week, tz, args.now_s)
    finally:
        store.close()
    data = build_report(frame, previous, settings, tz, label, now_s=args.now_s, notes=notes)
    try:
        if fmt == "json":
            output.write_text(to_json(data), encoding="utf-8")
        elif fmt == "csv":
            output.write_text(to_csv(data), encoding="utf-8")
        else:
            pngs = render_charts(data)
            if fmt == "html":
                output.write_text(to_html(data, pngs), encoding="utf-8")
            else:
                pages = write_pdf(data, pngs, output)
                if not output.exists() or output.stat().st_size == 0:
                    raise UserError(f"could not write the PDF to {output}")
                print(f"{pages} page(s)")
    except OSError as exc:
        raise UserError(f"cannot write {output}: {exc.strerror}") from exc
    print(f"wrote {output} ({label}, {fmt})")
    return 0
