"""One GPU on the dashboard: its card above its stacked plots, fed from its own ring buffer.

The plot set is fixed (utilization, VRAM, temperature, power, SM clock and a lane of
throttle causes); y ranges and limit lines come from the device's own limits. The shown
range runs slightly ahead of the newest sample so the time axis moves in steps, not every
sample. History older than the ring buffer arrives separately (``paint_history``).
"""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QVBoxLayout, QWidget

from advisor.clock_events import LANE_ROWS
from desktop.telemetry.model import DeviceState, GpuInfo, GpuReading
from desktop.ui.theme import REASON_COLOURS, Theme
from desktop.ui.widgets.cards import GpuCard
from desktop.ui.widgets.charts import FloatArray, TimePlot
from desktop.ui.widgets.plot_column import PlotColumn
from desktop.ui.widgets.ring_buffer import RingBuffer

_EMPTY: FloatArray = np.empty(0, dtype=np.float64)
#: The shown range runs ahead of the newest sample by this share of the window, so the time
#: axis jumps once per lead (12 s in the 10 min window) instead of sliding every sample: a
#: frame that moves the x range costs about twice one that only adds the new points.
LEAD_FRACTION = 0.02
#: What the ring buffers keep per sample (and the history fill asks for).
RING_COLUMNS = ("utilization_gpu_pct", "utilization_mem_pct", "vram_used_mib", "temperature_c", "power_w",
                "sm_clock_mhz", "clock_event_reasons", "effective_load_pct")
#: The utilization plot's dashed line: how hard the GPU worked, beside the share of time a kernel ran;
#: measured SM activity where the GPU has GPM (Hopper, Blackwell), else the power/clock estimate.
EFFECTIVE_LOAD_LABEL = "Effective load (estimate)"
MEASURED_LOAD_LABEL = "SM activity (measured)"
#: The legend beside the title names each line (the estimate or measurement in the dashed line's label).
UTIL_TITLES = {False: "Utilization", True: "Utilization"}
#: The throttle causes' lanes, top first (advisor/clock_events.py's table: power causes, thermal, the rest).
LANE_REASONS = tuple(row.reason for row in LANE_ROWS)


#: Half a lane row's height (rows are 1 apart): a cause's share of a bucket fills that share of 2 x this.
LANE_HALF_HEIGHT = 0.4
#: What the history fill asks for beside RING_COLUMNS: each lane cause's seconds and the seconds each row covers.
LANE_SHARE_COLUMNS = ("duration_s", *(f"reason_s_{int(reason)}" for reason in LANE_REASONS))


def lane_rows(mask: FloatArray) -> list[FloatArray | None]:
    """Per LANE_REASONS entry: 1.0 (the whole sample) where the cause held, NaN elsewhere; None if it never did.

    A sample stands for the interval up to the next one, so the point after a set sample is
    kept too: a cause seen in one isolated sample still draws a segment, not an invisible dot.
    """
    finite = np.isfinite(mask)
    bits = np.where(finite, mask, 0).astype(np.int64)
    seen = int(np.bitwise_or.reduce(bits)) if bits.size else 0
    rows: list[FloatArray | None] = []
    for reason in LANE_REASONS:
        if not seen & int(reason):
            rows.append(None)
            continue
        held = (bits & int(reason)) != 0
        held[1:] |= held[:-1].copy()
        rows.append(np.where(held & finite, 1.0, np.nan))
    return rows


def lane_shares(columns: dict[str, FloatArray]) -> list[FloatArray | None]:
    """Per LANE_REASONS entry: the share (0..1] of each history row's time the cause held, NaN where it did not;
    None if it never did. From the rows' ``reason_s_<bit>`` seconds over their ``duration_s``: a minute row
    with HW thermal in 1 of 60 samples is 1.7 % of that minute, not the whole minute."""
    duration = columns["duration_s"]
    out: list[FloatArray | None] = []
    for reason in LANE_REASONS:
        seconds = columns.get(f"reason_s_{int(reason)}")
        if seconds is None or not np.any(np.nan_to_num(seconds) > 0):
            out.append(None)
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.clip(seconds / duration, 0.0, 1.0)
        out.append(np.where(np.isfinite(share) & (share > 0), share, np.nan))
    return out


def lane_bucket_widths(time_s: FloatArray) -> FloatArray:
    """Seconds each history row spans on the time axis: to the next row, the typical step across a gap."""
    if time_s.size == 0:
        return np.empty(0, dtype=np.float64)
    steps = np.diff(time_s)
    typical = float(np.median(steps[steps > 0])) if np.any(steps > 0) else 1.0
    widths: FloatArray = np.append(np.where(steps > 3 * typical, typical, np.maximum(steps, 0.0)), typical)
    return widths


def lane_share_drawing(time_s: FloatArray, shares: FloatArray, row: int) -> tuple[FloatArray, FloatArray]:
    """Each row with a share as a flat top over its own width at ``share`` of the lane row's height (filled
    down to the row's base by the curve); a NaN breaks the line where a row has none or time has a gap."""
    widths = lane_bucket_widths(time_s)
    ends = time_s + widths
    keep = np.isfinite(shares) & (shares > 0)
    base = row - LANE_HALF_HEIGHT
    top = base + 2 * LANE_HALF_HEIGHT * np.clip(np.nan_to_num(shares), 0.0, 1.0)
    contiguous = np.zeros(time_s.size, dtype=bool)
    contiguous[:-1] = keep[1:] & np.isclose(ends[:-1], time_s[1:])
    idx = np.flatnonzero(keep)
    if idx.size == 0:
        return np.empty(0, dtype=np.float64), np.empty(0, dtype=np.float64)
    brk = ~contiguous[idx]
    brk[-1] = False  # no break after the last run
    counts = 2 + brk.astype(np.int64)
    pos = np.r_[0, np.cumsum(counts)[:-1]]
    t = np.empty(int(counts.sum()), dtype=np.float64)
    y = np.empty_like(t)
    t[pos], y[pos] = time_s[idx], top[idx]
    t[pos + 1], y[pos + 1] = ends[idx], top[idx]
    t[pos[brk] + 2], y[pos[brk] + 2] = ends[idx][brk], np.nan
    return t, y


def lane_segments(time_s: FloatArray, held: FloatArray, row: int) -> tuple[FloatArray, FloatArray]:
    """The live marks of ``held`` drawn at lane row ``row`` with two points per run (start, end) and a NaN break.

    A cause held for an hour is one 6 px wide line instead of 3,600 points: wide pens are
    the costly part of a raster repaint, and the lane is not downsampled.
    """
    on = np.isfinite(held).astype(np.int8)
    edges = np.diff(on, prepend=np.int8(0), append=np.int8(0))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1) - 1
    t = np.empty(3 * starts.size, dtype=np.float64)
    y = np.empty(3 * starts.size, dtype=np.float64)
    t[0::3], t[1::3], t[2::3] = time_s[starts], time_s[ends], time_s[ends]
    y[0::3], y[1::3], y[2::3] = float(row), float(row), np.nan
    return t, y


class GpuPanel(QWidget):
    """One GPU: its card above its stacked plots, fed from its own ring buffer."""

    def __init__(self, info: GpuInfo, capacity: int, theme: Theme, tiles_per_row: int = 5,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.info = info
        self.ring = RingBuffer(capacity, RING_COLUMNS)
        self.painted_version = -1
        #: The window end of the last paint: a new paint waits until the window moved a pixel.
        self.painted_end_s: float | None = None
        #: The right edge of the shown range (end + lead), kept while the newest sample is inside it.
        self.view_end_s: float | None = None
        self._view_span_s = 0.0
        self.history_key: tuple[float, float] | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        self.card = GpuCard(info, theme, tiles_per_row)
        self.plots = PlotColumn(theme)
        layout.addWidget(self.card)
        layout.addWidget(self.plots, 1)
        util = self.plots.add_plot("util", UTIL_TITLES[False], "%", y_range=(0, 100))
        util.add_series("utilization_gpu_pct", "GPU")
        # Memory dotted, the load dashed and purple: orange beside vermillion/yellow told them apart by hue alone.
        util.add_series("utilization_mem_pct", "Memory", style="dot")
        util.add_series("effective_load_pct", EFFECTIVE_LOAD_LABEL, colour=theme.series[3], width=1.5, style="dash",
                        below=True)
        vram = self.plots.add_plot("vram", "VRAM used", "MiB")
        vram.add_series("vram_used_mib", "Used")
        temp = self.plots.add_plot("temp", "Temperature", "°C")
        temp.add_series("temperature_c", "GPU", colour=theme.series[1])
        power = self.plots.add_plot("power", "Power", "W")
        power.add_series("power_w", "Board", colour=theme.series[2])
        clock = self.plots.add_plot("clock", "SM clock", "MHz")
        clock.add_series("sm_clock_mhz", "SM", colour=theme.series[3])
        lane = self.plots.add_plot("lane", "Throttle causes", "", height=110)
        for row, reason in enumerate(LANE_REASONS):
            # Live samples: a wide mark where the cause held; history rows: their share of the row, filled.
            lane.add_series(reason.name or str(int(reason)), reason.label, colour=REASON_COLOURS[reason], width=6,
                            downsample=False, style="solid", history_fill=row - LANE_HALF_HEIGHT)
        lane.set_categories([r.label for r in LANE_REASONS])
        self.set_info(info)

    def set_info(self, info: GpuInfo) -> None:
        """Limit lines and y ranges from the device's own limits."""
        self.info = info
        p = self.plots
        total = info.vram_total_mib
        p.plot("vram").set_limit("total", total, "total")
        if total:
            p.plot("vram").set_y_range(0, total * 1.03)
        slowdown = info.temp_slowdown_c
        p.plot("temp").set_limit("slowdown", slowdown, "slowdown")
        p.plot("temp").set_y_range(20, max(95.0, (slowdown or 0) + 8))
        limit = info.power_limit_enforced_w
        p.plot("power").set_limit("limit", limit, "power limit")
        if limit:
            p.plot("power").set_y_range(0, limit * 1.15)
        sm_max = info.sm_clock_max_mhz
        p.plot("clock").set_limit("max", sm_max, "max")
        if sm_max:
            p.plot("clock").set_y_range(0, sm_max * 1.08)
        measured = info.gpm_supported
        p.plot("util").relabel(UTIL_TITLES[measured],
                               {"effective_load_pct": MEASURED_LOAD_LABEL if measured else EFFECTIVE_LOAD_LABEL})

    def add_reading(self, time_s: float, reading: GpuReading) -> None:
        sample = reading.sample if reading.state is DeviceState.OK else None
        values: dict[str, float | None] = {}
        if sample is not None:
            values = {name: getattr(sample, name) for name in RING_COLUMNS}
        self.ring.append(time_s, values)  # a lost GPU writes a NaN row: a gap in every curve
        if reading.info != self.info:
            self.set_info(reading.info)
        self.card.update_reading(reading)

    def paint(self, start_s: float, end_s: float) -> None:
        ring = self.ring
        times = ring.times(start_s)
        span_s = end_s - start_s
        view_end, lead_s = self.view_end_s, span_s * LEAD_FRACTION
        if view_end is None or span_s != self._view_span_s or not view_end - lead_s <= end_s <= view_end:
            view_end = self.view_end_s = end_s + lead_s
            self._view_span_s = span_s
        # First: the curves then downsample once, for the new range (a no-op unless it moved).
        self.plots.set_x_range(view_end - span_s, view_end)
        for plot in self.plots.plots():
            if plot.categories:
                for row, (key, held) in enumerate(zip(plot.series_keys(),
                                                      lane_rows(ring.view("clock_event_reasons", start_s)),
                                                      strict=True)):
                    self._set_lane(plot, key, times, held, row)
            else:
                for key in plot.series_keys():
                    plot.set_data(key, times, ring.view(key, start_s))
        self.plots.refresh_readouts()
        self.painted_version = ring.version
        self.painted_end_s = end_s

    def due(self, end_s: float, window_s: float) -> bool:
        """New data, and the window moved at least a pixel (no faster than the eye can see)."""
        if self.ring.version == self.painted_version:
            return False
        if self.painted_end_s is None:
            return True
        pixel_s = window_s / max(1, self.plots.width())
        return end_s - self.painted_end_s >= pixel_s or end_s < self.painted_end_s

    @staticmethod
    def _set_lane(plot: TimePlot, key: str, times: FloatArray, held: FloatArray | None, row: int) -> None:
        """A cause absent from the window gets no points at all (cheaper than 3,600 NaNs)."""
        if held is None:
            if plot.data(key)[0].size == 0:
                return  # already empty: leave the curve alone
            times = held = _EMPTY
        plot.set_data(key, times, held, lane_segments(times, held, row) if times.size else None)

    @staticmethod
    def _set_lane_history(plot: TimePlot, key: str, times: FloatArray, shares: FloatArray | None, row: int) -> None:
        """History rows: hover reads each row's share at its middle (the row under the cursor), the curve
        draws it over the row's width."""
        if shares is None:
            if plot.history(key)[0].size:
                plot.set_history(key, _EMPTY, _EMPTY)
            return
        middles = times + lane_bucket_widths(times) / 2
        plot.set_history(key, middles, shares, lane_share_drawing(times, shares, row))

    def paint_history(self, time_s: FloatArray, columns: dict[str, FloatArray]) -> None:
        for plot in self.plots.plots():
            if plot.categories:
                if "duration_s" in columns:
                    shares = lane_shares(columns)
                else:  # a reader without the per-cause seconds: each row counts as held throughout
                    shares = lane_rows(columns.get("clock_event_reasons", np.full(time_s.size, np.nan)))
                for row, (key, share) in enumerate(zip(plot.series_keys(), shares, strict=True)):
                    self._set_lane_history(plot, key, time_s, share, row)
            else:
                for key in plot.series_keys():
                    plot.set_history(key, time_s, columns.get(key, np.full(time_s.size, np.nan)))

    def apply_theme(self, theme: Theme) -> None:
        self.card.apply_theme(theme)
        self.plots.apply_theme(theme)

