"""The dashboard page: per-GPU cards and live plots over ring buffers, filled from history beyond them.

Snapshots arrive at the sampling rate (``add_snapshot``: append to the ring buffers, update
the card text). Plots repaint on a main-thread timer at a few Hz, only while the page is
visible, not paused, and something changed. A time window longer than the ring buffer
covers is completed from the history database at a resolution of ~2,000 points.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QHideEvent, QKeySequence, QShortcut, QShowEvent
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.telemetry.model import ClockEventReason, DeviceState, GpuInfo, GpuReading, Snapshot
from desktop.ui.cards import GpuCard, HostStrip
from desktop.ui.charts import FloatArray, PlotColumn, RingBuffer, TimePlot
from desktop.ui.theme import REASON_COLOURS, Theme

log = logging.getLogger(__name__)

WINDOWS_S: dict[str, float] = {"1 min": 60.0, "10 min": 600.0, "1 h": 3600.0, "24 h": 86400.0, "7 d": 7 * 86400.0}
DEFAULT_WINDOW = "10 min"
#: The ring buffer holds one hour of samples: the 1 min / 10 min / 1 h windows without a query.
RING_SPAN_S = 3600.0
REPAINT_INTERVAL_MS = 500
_EMPTY: FloatArray = np.empty(0, dtype=np.float64)
#: The shown range runs ahead of the newest sample by this share of the window, so the time
#: axis jumps once per lead (12 s in the 10 min window) instead of sliding every sample: a
#: frame that moves the x range costs about twice one that only adds the new points.
LEAD_FRACTION = 0.02
HISTORY_POINTS = 2000
#: Re-query history at most this often while a long window stays on screen.
HISTORY_REFRESH_S = 60.0

RING_COLUMNS = ("utilization_gpu_pct", "utilization_mem_pct", "vram_used_mib", "temperature_c", "power_w",
                "sm_clock_mhz", "clock_event_reasons")
LANE_REASONS = (
    ClockEventReason.SW_POWER_CAP,
    ClockEventReason.HW_POWER_BRAKE_SLOWDOWN,
    ClockEventReason.SW_THERMAL_SLOWDOWN,
    ClockEventReason.HW_THERMAL_SLOWDOWN,
    ClockEventReason.HW_SLOWDOWN,
)


class HistoryQuery(Protocol):
    """What the dashboard needs from the history store (``desktop.history.store.HistoryStore``)."""

    def query(self, gpu_uuid: str, metrics: Any, start_s: float, end_s: float, max_points: int = ...) -> Any: ...


def lane_rows(mask: FloatArray) -> list[FloatArray | None]:
    """Per LANE_REASONS entry: its row number where the cause held, NaN elsewhere; None if it never did.

    A sample stands for the interval up to the next one, so the point after a set sample is
    kept too: a cause seen in one isolated sample still draws a segment, not an invisible dot.
    """
    finite = np.isfinite(mask)
    bits = np.where(finite, mask, 0).astype(np.int64)
    seen = int(np.bitwise_or.reduce(bits)) if bits.size else 0
    rows: list[FloatArray | None] = []
    for row, reason in enumerate(LANE_REASONS):
        if not seen & int(reason):
            rows.append(None)
            continue
        held = (bits & int(reason)) != 0
        held[1:] |= held[:-1].copy()
        rows.append(np.where(held & finite, float(row), np.nan))
    return rows


def lane_segments(time_s: FloatArray, rows: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The same marks as ``rows`` drawn with two points per run (start, end) and a NaN break.

    A cause held for an hour is one 6 px wide line instead of 3,600 points: wide pens are
    the costly part of a raster repaint, and the lane is not downsampled.
    """
    held = np.isfinite(rows).astype(np.int8)
    edges = np.diff(held, prepend=np.int8(0), append=np.int8(0))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1) - 1
    t = np.empty(3 * starts.size, dtype=np.float64)
    y = np.empty(3 * starts.size, dtype=np.float64)
    t[0::3], t[1::3], t[2::3] = time_s[starts], time_s[ends], time_s[ends]
    y[0::3], y[1::3], y[2::3] = rows[starts], rows[ends], np.nan
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
        util = self.plots.add_plot("util", "Utilization", "%", y_range=(0, 100))
        util.add_series("utilization_gpu_pct", "GPU")
        util.add_series("utilization_mem_pct", "Memory")
        vram = self.plots.add_plot("vram", "VRAM used", "MiB")
        vram.add_series("vram_used_mib", "Used")
        temp = self.plots.add_plot("temp", "Temperature", "°C")
        temp.add_series("temperature_c", "GPU", colour=theme.series[1])
        power = self.plots.add_plot("power", "Power", "W")
        power.add_series("power_w", "Board", colour=theme.series[2])
        clock = self.plots.add_plot("clock", "SM clock", "MHz")
        clock.add_series("sm_clock_mhz", "SM", colour=theme.series[3])
        lane = self.plots.add_plot("lane", "Throttle causes", "", height=110)
        for reason in LANE_REASONS:
            lane.add_series(reason.name or str(int(reason)), reason.label, colour=REASON_COLOURS[reason.label], width=6,
                            downsample=False)
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
        p.plot("power").set_limit("limit", limit, "limit")
        if limit:
            p.plot("power").set_y_range(0, limit * 1.15)
        sm_max = info.sm_clock_max_mhz
        p.plot("clock").set_limit("max", sm_max, "max")
        if sm_max:
            p.plot("clock").set_y_range(0, sm_max * 1.08)

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
                for key, rows in zip(plot.series_keys(), lane_rows(ring.view("clock_event_reasons", start_s)),
                                     strict=True):
                    self._set_lane(plot, key, times, rows)
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
    def _set_lane(plot: TimePlot, key: str, times: FloatArray, rows: FloatArray | None, history: bool = False) -> None:
        """A cause absent from the window gets no points at all (cheaper than 3,600 NaNs)."""
        if rows is None:
            if (plot.history(key) if history else plot.data(key))[0].size == 0:
                return  # already empty: leave the curve alone
            times = rows = _EMPTY
        drawn = lane_segments(times, rows) if times.size else None
        (plot.set_history if history else plot.set_data)(key, times, rows, drawn)

    def paint_history(self, time_s: FloatArray, columns: dict[str, FloatArray]) -> None:
        for plot in self.plots.plots():
            if plot.categories:
                mask = columns.get("clock_event_reasons", np.full(time_s.size, np.nan))
                for key, rows in zip(plot.series_keys(), lane_rows(mask), strict=True):
                    self._set_lane(plot, key, time_s, rows, history=True)
            else:
                for key in plot.series_keys():
                    plot.set_history(key, time_s, columns.get(key, np.full(time_s.size, np.nan)))

    def apply_theme(self, theme: Theme) -> None:
        self.card.apply_theme(theme)
        self.plots.apply_theme(theme)


class DashboardPage(QWidget):
    """Cards and plots for every GPU, a time-window bar, pause, and the CPU / RAM strip."""

    def __init__(self, theme: Theme, interval_s: float = 1.0, history: HistoryQuery | None = None,
                 now: Callable[[], float] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        self.history = history
        self.capacity = max(60, min(200_000, math.ceil(RING_SPAN_S / max(interval_s, 0.05))))
        self.panels: dict[int, GpuPanel] = {}
        #: The GPU chosen in the selector (None = all side by side).
        self.chosen_gpu: int | None = None
        self.window_s = WINDOWS_S[DEFAULT_WINDOW]
        self.paused = False
        self.latest_s: float | None = None
        self._now = now
        self._history_at: float | None = None
        self.repaints = 0

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Window:"))
        self.window_buttons = QButtonGroup(self)
        for name, span_s in WINDOWS_S.items():
            button = QPushButton(name)
            button.setCheckable(True)
            button.setChecked(name == DEFAULT_WINDOW)
            button.setToolTip(f"Show the last {name}" + (" (filled from history)" if span_s > RING_SPAN_S else ""))
            self.window_buttons.addButton(button)
            bar.addWidget(button)
        self.window_buttons.buttonClicked.connect(lambda b: self.set_window(b.text()))
        bar.addSpacing(12)
        self.pause_button = QPushButton("Pause")
        self.pause_button.setCheckable(True)
        self.pause_button.setToolTip("Freeze the plots (Space); sampling and recording go on")
        self.pause_button.toggled.connect(self.set_paused)
        bar.addWidget(self.pause_button)
        bar.addSpacing(12)
        self.gpu_choice = QComboBox()
        self.gpu_choice.setToolTip("Show every GPU side by side, or one")
        self.gpu_choice.currentIndexChanged.connect(self._choose_gpu)
        self.gpu_choice.hide()
        bar.addWidget(self.gpu_choice)
        bar.addStretch(1)
        self.history_note = QLabel("")
        self._bar_buttons = [*self.window_buttons.buttons(), self.pause_button]
        bar.addWidget(self.history_note)
        layout.addLayout(bar)

        self.empty = QLabel("Waiting for the first reading from the GPU…")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.addWidget(self.empty, 1)
        self.panel_row = QHBoxLayout()
        self.panel_row.setSpacing(8)
        layout.addLayout(self.panel_row, 1)
        self.host_strip = HostStrip(theme)
        layout.addWidget(self.host_strip)

        self.timer = QTimer(self)
        self.timer.setInterval(REPAINT_INTERVAL_MS)
        self.timer.timeout.connect(self.repaint_plots)
        pause = QShortcut(QKeySequence(Qt.Key.Key_Space), self)
        pause.setContext(Qt.ShortcutContext.WindowShortcut)
        pause.activated.connect(self.pause_button.toggle)
        self.apply_theme(theme)

    # --- input ----------------------------------------------------------------------
    def add_snapshot(self, snap: Snapshot) -> None:
        if not self.panels and snap.gpus:
            self._build_panels(snap)
        for reading in snap.gpus:
            panel = self.panels.get(reading.info.index)
            if panel is not None:
                panel.add_reading(snap.time_s, reading)
        self.host_strip.update_host(snap.host)
        self.latest_s = snap.time_s

    def _build_panels(self, snap: Snapshot) -> None:
        self.empty.hide()
        # Side by side, a card gets a share of the width: fewer value tiles per row.
        tiles_per_row = {1: 5, 2: 3}.get(len(snap.gpus), 2)
        for reading in snap.gpus:
            panel = GpuPanel(reading.info, self.capacity, self.theme, tiles_per_row)
            self.panels[reading.info.index] = panel
            self.panel_row.addWidget(panel, 1)
        if len(self.panels) > 1:
            self.gpu_choice.addItem("All GPUs side by side", -1)
            for index, panel in self.panels.items():
                self.gpu_choice.addItem(f"GPU {index}: {panel.info.name}", index)
            self.gpu_choice.show()

    def _choose_gpu(self, row: int) -> None:
        chosen = self.gpu_choice.itemData(row)
        self.chosen_gpu = None if chosen in (-1, None) else int(chosen)
        for index, panel in self.panels.items():
            panel.setVisible(self.chosen_gpu in (None, index))
        self._force_repaint()

    # --- controls -------------------------------------------------------------------
    def set_window(self, name: str) -> None:
        self.window_s = WINDOWS_S[name]
        for button in self.window_buttons.buttons():
            button.setChecked(button.text() == name)
        self._force_repaint()

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        self.pause_button.setChecked(paused)
        self.pause_button.setText("Resume" if paused else "Pause")
        if not paused:
            self._force_repaint()

    def _force_repaint(self) -> None:
        for panel in self.panels.values():
            panel.painted_version = -1
            panel.painted_end_s = None
        self._history_at = None
        self.repaint_plots()

    # --- painting -------------------------------------------------------------------
    def end_s(self) -> float | None:
        return self.latest_s if self._now is None else self._now()

    def repaint_plots(self) -> None:
        """Set the plot data for the current window; skipped when paused or nothing changed."""
        end = self.end_s()
        if self.paused or end is None:
            return
        start = end - self.window_s
        need_history = self._history_due(end)
        painted = False
        for index, panel in self.panels.items():
            if self.chosen_gpu not in (None, index):
                continue  # not on screen: painted when chosen
            if need_history:
                self._fill_history(panel, start)
            if panel.due(end, self.window_s):
                panel.paint(start, end)
                painted = True
        if need_history:
            self._history_at = end
        if painted:
            self.repaints += 1

    def _history_due(self, end: float) -> bool:
        return self._history_at is None or end - self._history_at >= HISTORY_REFRESH_S

    def _fill_history(self, panel: GpuPanel, start: float) -> None:
        """Query the part of the window older than the ring buffer; clear it when not needed."""
        oldest = panel.ring.oldest_s()
        empty = np.empty(0, dtype=np.float64)
        if self.history is None or (oldest is not None and oldest <= start):
            panel.paint_history(empty, {})
            self.history_note.setText("" if self.history is not None or self.window_s <= RING_SPAN_S
                                      else "No history database: showing what this window has seen")
            return
        until = oldest if oldest is not None else (self.end_s() or start)
        try:
            result = self.history.query(panel.info.uuid, list(RING_COLUMNS), start, until, max_points=HISTORY_POINTS)
        except Exception as exc:  # a broken or busy database must not take the dashboard down
            log.warning("history query failed: %s", exc)
            self.history_note.setText(f"History unavailable: {exc}")
            return
        time_s = np.asarray(result.time_s, dtype=np.float64)
        columns = {k: np.asarray(v, dtype=np.float64) for k, v in result.columns.items()}
        panel.paint_history(time_s, columns)
        resolution = getattr(result, "resolution", "")
        self.history_note.setText(f"Older than the live buffer: history ({resolution})" if time_s.size else
                                  "No history for this window yet")
        panel.painted_version = -1
        panel.painted_end_s = None

    # --- visibility -----------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.timer.start()
        self._force_repaint()

    def hideEvent(self, event: QHideEvent) -> None:
        self.timer.stop()  # nobody looks: no repaint cost while hidden or in the tray
        super().hideEvent(event)

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        # Fusion barely marks a checked button in a dark palette: colour it with the accent.
        style = (f"QPushButton:checked {{ background: {theme.accent}; color: {'#000' if theme.dark else '#fff'};"
                 f" border: 1px solid {theme.accent}; border-radius: 3px; padding: 3px 10px; }}")
        for button in self._bar_buttons:
            button.setStyleSheet(style)
        for panel in self.panels.values():
            panel.apply_theme(theme)
        self.host_strip.apply_theme(theme)
