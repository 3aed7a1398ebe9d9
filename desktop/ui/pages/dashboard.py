"""The dashboard page: per-GPU cards and live plots over ring buffers, filled from history beyond them.

Snapshots arrive at the sampling rate (``add_snapshot``: append to the ring buffers, update
the card text). A snapshot schedules one repaint of the plots (a single-shot timer, so a burst
of snapshots paints once), only while the page is visible and not paused, and the repaint is
skipped unless something changed; no timer ticks between snapshots (one that polls does only
with a ``now`` clock, whose window moves without samples). A time window longer than the ring buffer
covers is completed from the history database on a worker thread (``dashboard_history``);
one GPU's card and plots are a ``dashboard_panel.GpuPanel``. On a simulated GPU a bar above
the cards (``simulated_bar.SimulatedBar``) says why the graphs are flat and offers a simulated
workload and the demo week.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

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

from desktop.telemetry.model import Snapshot
from desktop.ui.pages.base import PageWidget
from desktop.ui.pages.dashboard_history import RING_SPAN_S, HistoryFill, HistoryQuery
from desktop.ui.pages.dashboard_panel import GpuPanel
from desktop.ui.theme import Theme
from desktop.ui.widgets.cards import HostStrip
from desktop.ui.widgets.simulated_bar import SimulatedBar

WINDOWS_S: dict[str, float] = {"1 min": 60.0, "10 min": 600.0, "1 h": 3600.0, "24 h": 86400.0, "7 d": 7 * 86400.0}
DEFAULT_WINDOW = "10 min"
#: The least time between two repaints (snapshots closer together share one); with a ``now``
#: clock, the period of the repaint timer.
REPAINT_INTERVAL_MS = 500
#: How long quitting waits for a history read in flight before the store closes under it.
SHUTDOWN_WAIT_S = 2.0


class DashboardPage(PageWidget):
    """Cards and plots for every GPU, a time-window bar, pause, and the CPU / RAM strip."""

    def __init__(self, theme: Theme, interval_s: float = 1.0, history: HistoryQuery | None = None,
                 now: Callable[[], float] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        self.capacity = max(60, min(200_000, math.ceil(RING_SPAN_S / max(interval_s, 0.05))))
        self.panels: dict[int, GpuPanel] = {}
        #: The GPU chosen in the selector (None = all side by side).
        self.chosen_gpu: int | None = None
        self.window_s = WINDOWS_S[DEFAULT_WINDOW]
        self.paused = False
        self.latest_s: float | None = None
        self._now = now
        self.repaints = 0
        self.fill = HistoryFill(history, self._history_filled, self)

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
        self.history_note = self.fill.note
        self._bar_buttons = [*self.window_buttons.buttons(), self.pause_button]
        bar.addWidget(self.history_note)
        layout.addLayout(bar)

        self.simulated_bar = SimulatedBar(theme)
        self.simulated_bar.hide()
        layout.addWidget(self.simulated_bar)

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
        # Without a clock of its own the window ends at the newest sample: nothing moves between
        # snapshots, so the timer runs only when a snapshot asks (no wake-up without work).
        self.timer.setSingleShot(now is None)
        self.timer.timeout.connect(self.repaint_plots)
        self._shown = False
        #: When the plots were last repainted (time.monotonic()), for the snapshot-driven timer's wait.
        self._painted_at = -math.inf
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
                panel.card.update_envelope(snap.envelope)
        self.host_strip.update_host(snap.host)
        self.latest_s = snap.time_s
        if self._shown and not self.paused and not self.timer.isActive() and self._now is None:
            # One repaint for this snapshot (and any that come before it runs), no sooner than
            # REPAINT_INTERVAL_MS after the last: fast sampling still repaints at most 2 times a second.
            # Due already (1 Hz sampling, always): at once, so that the cards' new values and the curves
            # go out in one frame, not in two a timer event apart.
            waited_ms = (time.monotonic() - self._painted_at) * 1000
            if waited_ms >= REPAINT_INTERVAL_MS:
                self.repaint_plots()
            else:
                self.timer.start(round(REPAINT_INTERVAL_MS - waited_ms))
        if snap.source.simulated:
            self.simulated_bar.update_state(snap)
            if self.simulated_bar.isHidden():
                self.simulated_bar.show()

    def set_history(self, history: HistoryQuery | None) -> None:
        """Fill long windows from another history (the demo week) from now on."""
        self.fill.discard()
        self.fill.history = history
        self._force_repaint()

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
        if paused:
            self.fill.discard()  # frozen means frozen: a read in flight does not land
        else:
            self._force_repaint()

    def _force_repaint(self) -> None:
        for panel in self.panels.values():
            panel.painted_version = -1
            panel.painted_end_s = None
        self.fill.invalidate()
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
        shown = [panel for index, panel in self.panels.items() if self.chosen_gpu in (None, index)]
        if self.fill.due(end):  # the hidden panels are filled when chosen
            self.fill.request(shown, start, end, self.window_s)
        painted = False
        for panel in shown:
            if panel.due(end, self.window_s):
                panel.paint(start, end)
                painted = True
        if painted:
            self.repaints += 1
            self._painted_at = time.monotonic()

    @property
    def loading(self) -> bool:
        """A history read for the window is in flight."""
        return self.fill.loading

    def _history_filled(self) -> None:
        if not self.paused:
            self.repaint_plots()

    # --- visibility -----------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._shown = True
        if self._now is not None:
            self.timer.start()
        self._force_repaint()

    def hideEvent(self, event: QHideEvent) -> None:
        self._shown = False
        self.timer.stop()  # nobody looks: no repaint cost while hidden or in the tray
        super().hideEvent(event)

    def shutdown(self) -> None:
        """Stop repainting and let a history read in flight end (the app closes the store next)."""
        self._shown = False
        self.timer.stop()
        self.fill.discard()
        self.fill.wait(SHUTDOWN_WAIT_S)

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
        self.simulated_bar.apply_theme(theme)
