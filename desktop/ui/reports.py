"""`rigscope report`: the weekly summary as HTML, PDF (Qt's PDF writer), JSON or CSV.

The advisor supplies the numbers (``advisor.summary``, ``desktop.advice``); this module adds
the week selection in local time, the charts (pyqtgraph exported offscreen to PNG, so no
display is needed) and the four renderings. A GPU is a card, not a slot: series, charts and
labels are keyed on its uuid, so a card swapped in slot 0 mid-week gets its own charts and a
label that says which ("GPU 0 (RTX 4090)", plus the uuid where slot and name are shared).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import math
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

import numpy as np

from advisor.frame import FloatArray, GpuSeries, HistoryFrame
from advisor.summary import WEEKDAYS, WeeklySummary, weekly_summary
from desktop import config
from desktop.advice import Advice, advice_json, compute_advice, json_safe, open_history, recommendation_dict
from desktop.csvsafe import CsvWriter
from desktop.errors import UserError
from desktop.safetext import printable

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
    #: Hourly means per GPU for the charts: {gpu uuid: {"time_s"| metric: array}}.
    series: dict[str, dict[str, FloatArray]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: gpu uuid -> how the report names it ("GPU 0 (NVIDIA GeForce RTX 4090)").
    labels: dict[str, str] = field(default_factory=dict)


def gpu_labels(gpus: list[tuple[int, str, str]]) -> dict[str, str]:
    """(index, uuid, name) -> {uuid: "GPU 0 (name)"}; cards that share slot and name also show their uuid."""
    shared = Counter((index, name) for index, _, name in gpus)
    return {uuid: f"GPU {index} ({name})" + (f" [{uuid}]" if shared[(index, name)] > 1 else "")
            for index, uuid, name in gpus}


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
    return ReportData(label, summary, advice, time.time() if now_s is None else now_s, captions, series, notes,
                      labels)


def render_charts(data: ReportData) -> dict[str, bytes]:
    """Every chart of the report as PNG bytes (needs a QApplication, not a display)."""
    from desktop.ui import report_charts as rc

    rc.ensure_app()
    pngs: dict[str, bytes] = {}
    metas = {g.meta.uuid: g.meta for g in data.advice.frame.gpus}
    for n, week in enumerate(data.summary.gpus):
        s = data.series[week.uuid]
        meta = metas[week.uuid]
        name = data.labels.get(week.uuid, f"GPU {week.index}")
        pngs[chart_key("util", n)] = rc.time_chart_png(
            s["time_s"], [("utilization", s["utilization_gpu_pct"])], title=f"{name} utilization", y_label="%",
            y_range=(0, 100))
        pngs[chart_key("temp", n)] = rc.time_chart_png(
            s["time_s"], [("temperature", s["temperature_c"])], title=f"{name} temperature", y_label="°C",
            limit=(meta.temp_slowdown_c, "slowdown") if meta.temp_slowdown_c else None)
        pngs[chart_key("power", n)] = rc.time_chart_png(
            s["time_s"], [("power", s["power_w"])], title=f"{name} power", y_label="W",
            limit=(meta.power_limit_w, "power limit") if meta.power_limit_w else None)
        pngs[chart_key("heat", n)] = rc.heatmap_png(week.heatmap_pct, title=f"{name}: mean utilization, local time")
        pngs[chart_key("daily", n)] = rc.bar_chart_png(WEEKDAYS, week.daily_busy_hours,
                                                       title=f"{name}: busy hours per day", y_label="h")
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


def to_csv(data: ReportData) -> str:
    """Long format: section, gpu, item, value, unit (one figure a line, easy to pivot).

    The gpu column is the index; where a slot held two cards it is "index (uuid)". Cells go
    through ``desktop.csvsafe`` (a process may be named ``=cmd|...``)."""
    out = io.StringIO()
    w = CsvWriter(out)
    w.writerow(["section", "gpu", "item", "value", "unit"])
    slots = Counter(g.index for g in data.summary.gpus)

    def row(*cells: Any) -> None:
        w.writerow(cells)

    for g in data.summary.gpus:
        gpu: int | str = g.index if slots[g.index] == 1 else f"{g.index} ({g.uuid})"
        row("gpu", gpu, "name", g.name, "")
        row("gpu", gpu, "busy", round(g.busy_hours, 3), "h")
        row("gpu", gpu, "mean utilization while busy", round(g.mean_util_busy_pct, 2), "%")
        row("gpu", gpu, "energy", round(g.energy_kwh, 4), "kWh")
        row("gpu", gpu, "energy cost", round(g.energy_cost, 4), data.summary.currency)
        row("gpu", gpu, "peak temperature", g.peak_temp_c, "°C")
        row("gpu", gpu, "p95 temperature", g.p95_temp_c, "°C")
        for cause, minutes in g.throttle_minutes.items():
            row("gpu", gpu, f"throttled: {cause}", round(minutes, 2), "min")
        row("gpu", gpu, "VRAM peak", g.vram_peak_mib, "MiB")
        row("gpu", gpu, "VRAM above 90 %", round(g.vram_above_90_minutes, 2), "min")
        for d, day in enumerate(WEEKDAYS):
            for h, value in enumerate(g.heatmap_pct[d]):
                row("heatmap", gpu, f"{day} {h:02d}:00", round(value, 2) if math.isfinite(value) else "", "%")
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


def check_output(path: Path) -> None:
    """Say why a report cannot be written to ``path`` before rendering it: Qt's PDF writer fails
    silently (a folder given as the file, a folder that does not exist), and rendering takes seconds."""
    if path.is_dir():
        raise UserError(f"cannot write {printable(path)}: it is a folder; give a file name such as "
                        f"{printable(path / 'report.pdf')}")
    if not path.parent.is_dir():
        raise UserError(f"cannot write {printable(path)}: the folder {printable(path.parent)} does not exist")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UserError(f"cannot write {printable(path)}: no permission to write there")


def main(args: argparse.Namespace) -> int:
    fmt = args.format
    output = Path(args.output).expanduser()
    check_output(output)
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
                if not output.is_file() or output.stat().st_size == 0:
                    raise UserError(f"could not write the PDF to {printable(output)} (Qt's PDF writer gave no file: "
                                    "a full disk, or the file is open in another program?)")
                print(f"{pages} page(s)")
    except OSError as exc:
        raise UserError(f"cannot write {printable(output)}: {exc.strerror or exc}") from exc
    print(f"wrote {printable(output)} ({label}, {fmt})")
    return 0
