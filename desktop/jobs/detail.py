"""A stored job as the Jobs page shows it: its card, its throughput and its GPUs' telemetry over its span,
long jobs binned to about one mean per few pixels of chart (no Qt, no database: desktop/sessions/jobs_reader.py
reads the job with ``read_job_card``, the one read `rigscope jobs show` makes too, on the page's worker thread).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from advisor.frame import FloatArray, HistoryFrame
from advisor.job_card import JobCard
from advisor.progress import JobSeries
from desktop.jobs.card import duration_text, job_gpus, pause_spans
from desktop.jobs.model import JobRecord

CHARTS: tuple[tuple[str, str, str], ...] = (
    ("throughput", "Throughput", "items/s"), ("utilization_gpu_pct", "GPU utilization", "%"),
    ("temperature_c", "Temperature", "°C"), ("power_w", "Power", "W"),
)

#: Chart points across a job where the chart's width is not known: a 12 h job at 1 Hz is 43,200 samples,
#: far more than pixels.
CHART_BINS = 800
#: The Jobs page lists the newest jobs, this many (issue 38: a year of jobs opens as fast as a week's).
JOBS_LISTED = 500
#: A long job is drawn as one mean per this many pixels of chart: at one per pixel (or more) the means of
#: a job that idles in a short cycle (a data-starved loader, 40 s on and off) zigzag from pixel to pixel
#: and alias into a moire; a few pixels per mean read as a band at the job's typical level.
PX_PER_BIN = 3.0
#: The fewest stretches, for a chart not laid out yet (or very narrow).
MIN_CHART_BINS = 100


def chart_bins(width_px: float) -> int:
    """How many means to draw a long job with in a chart ``width_px`` wide."""
    return max(MIN_CHART_BINS, int(width_px / PX_PER_BIN))


@dataclass
class GpuTrace:
    """One GPU's telemetry over a job's span, for the charts."""

    index: int
    time_s: FloatArray
    columns: dict[str, FloatArray]


@dataclass
class JobDetail:
    """What the page shows for one job (built on a worker thread)."""

    record: JobRecord
    card: JobCard
    series: JobSeries
    pauses: tuple[tuple[float, float], ...]
    end_s: float
    gpus: list[GpuTrace] = field(default_factory=list)


def job_detail(record: JobRecord, card: JobCard, series: JobSeries, frame: HistoryFrame, *, now_s: float,
               bins: int = CHART_BINS) -> JobDetail:
    """What the page shows for a job read with its telemetry (``read_job_card``), a long job's charts as means
    over ``bins`` stretches (``chart_bins``)."""
    end_s = record.ended_s if record.ended_s is not None else now_s
    traces = []
    for gpu in job_gpus(record, frame):
        rows = (gpu.time_s >= record.started_s) & (gpu.time_s <= end_s)
        columns = {}
        for key, _title, _unit in CHARTS[1:]:
            times, columns[key] = binned(gpu.time_s[rows], getattr(gpu, key)[rows], record.started_s, end_s, bins)
        traces.append(GpuTrace(gpu.meta.index, times, columns))
    shown = JobSeries(*binned(series.time_s, series.throughput, record.started_s, end_s, bins))
    return JobDetail(record, card, shown, pause_spans(record, end_s), end_s, traces)


#: A job shorter than this shows no charts: at one sample a second they would be a few points on an axis
#: of milliseconds ("14.500 15.000"); its card has the numbers.
MIN_CHART_S = 20.0


def charts_note(detail: JobDetail) -> str:
    """Why the job's charts are not drawn ("" when they are): too short, or nothing sampled meanwhile."""
    span_s = detail.end_s - detail.record.started_s
    if span_s < MIN_CHART_S:
        return (f"This job ran {duration_text(max(0.0, span_s))}: too short to chart (telemetry is sampled about "
                "once a second). Its card above has the numbers.")
    sampled = bool(np.isfinite(detail.series.throughput).any()) or any(
        bool(np.isfinite(column).any()) for trace in detail.gpus for column in trace.columns.values())
    if not sampled:
        return ("No telemetry was recorded while this job ran (neither the window nor rigscope record was "
                "sampling the GPU, and the job printed no progress).")
    return ""


def binned(time_s: FloatArray, values: FloatArray, start_s: float, end_s: float, bins: int = CHART_BINS
           ) -> tuple[FloatArray, FloatArray]:
    """Means over ``bins`` equal stretches of [start_s, end_s] (NaN where none has a value); short series as they are.

    A mean, not pyqtgraph's min/max "peak" envelope: over hours of noisy samples that paints a solid block.
    Each stretch's mean also takes in half of each neighbour's samples (a triangle, [1, 2, 1]): plain means
    of a job that cycles a little faster than a stretch (a data-starved loader) beat against the cycle and
    draw a moire; the triangle damps that to a band at the job's mean.
    """
    time_s = np.asarray(time_s, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if len(time_s) <= bins or end_s <= start_s:
        return time_s, values
    width = (end_s - start_s) / bins
    index = np.clip(((time_s - start_s) / width).astype(np.int64), 0, bins - 1)
    ok = np.isfinite(values)
    count = np.bincount(index[ok], minlength=bins).astype(np.float64)
    total = np.bincount(index[ok], weights=values[ok], minlength=bins)
    triangle = np.array([1.0, 2.0, 1.0])
    weighted_count = np.convolve(count, triangle, mode="same")
    weighted_total = np.convolve(total, triangle, mode="same")
    with np.errstate(invalid="ignore", divide="ignore"):  # a stretch without readings stays a gap
        means = np.where(count > 0, weighted_total / np.where(count > 0, weighted_count, 1.0), np.nan)
    centres = start_s + width * (np.arange(bins, dtype=np.float64) + 0.5)
    return np.asarray(centres, dtype=np.float64), np.asarray(means, dtype=np.float64)


def broken_at_pauses(time_s: FloatArray, values: FloatArray, pauses: tuple[tuple[float, float], ...]
                      ) -> tuple[FloatArray, FloatArray]:
    """The job's reports with a gap (NaN) at each pause: no line drawn across the time it was stopped."""
    if not pauses or len(time_s) == 0:
        return time_s, values
    starts = np.array([p[0] for p in pauses], dtype=np.float64)
    times = np.concatenate([time_s, starts])
    order = np.argsort(times, kind="stable")
    return times[order], np.concatenate([values, np.full(len(starts), np.nan)])[order]
