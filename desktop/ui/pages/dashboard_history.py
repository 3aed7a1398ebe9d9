"""The dashboard's history fill: the part of a time window older than the ring buffers, read on a worker thread.

A window longer than the ring buffer covers (24 h, 7 d, or any window right after start) is
completed from the history database at ~2,000 points per curve. A week of one GPU takes a
noticeable fraction of a second, more on a slow disk or under the recorder's writes, so the
read runs on a worker thread: one at a time on the store's single connection, and only the
newest window's answer is painted. The note beside the window buttons says what is shown:
reading, history at which resolution, nothing yet, or why not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from PySide6.QtCore import QObject
from PySide6.QtWidgets import QLabel

from desktop.ui.background import Loader
from desktop.ui.pages.dashboard_panel import LANE_SHARE_COLUMNS, RING_COLUMNS, GpuPanel
from desktop.ui.widgets.charts import FloatArray

log = logging.getLogger(__name__)

#: The ring buffer holds one hour of samples: the 1 min / 10 min / 1 h windows without a query.
RING_SPAN_S = 3600.0
HISTORY_POINTS = 2000
#: Re-query history at most this often while a long window stays on screen.
HISTORY_REFRESH_S = 60.0
READING_TEXT = "Reading history…"
#: How the note names each history resolution, in plain words.
RESOLUTION_WORDS = {"raw": "every sample", "minute": "minute averages", "hour": "hourly averages"}


def live_span_text(seconds: float) -> str:
    """"15 min", "45 s", "1 h": how much of the window the live readings cover, for the note."""
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if round(seconds / 60) < 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.3g} h"


def history_note(live_s: float, resolution: str) -> str:
    """The note under a window filled from history, e.g. "Before the last 15 min: from the history (every sample)"."""
    words = RESOLUTION_WORDS.get(resolution, resolution)
    return f"Before the last {live_span_text(live_s)}: from the history ({words})"


def empty_history_note(live_s: float) -> str:
    """The note when the history holds nothing before the live readings: what the plot does show (its live part),
    not "No history for this window yet" over 9 minutes of data."""
    if live_s <= 0:
        return "No history for this window yet"
    return f"Showing the live readings of the last {live_span_text(live_s)}: nothing recorded before them"


class HistoryQuery(Protocol):
    """What the dashboard needs from the history store (``desktop.history.store.HistoryStore``)."""

    def query(self, gpu_uuid: str, metrics: Any, start_s: float, end_s: float, max_points: int = ...) -> Any: ...


@dataclass(frozen=True)
class HistoryRead:
    """One GPU's part of a window to read: ``start_s`` up to the oldest sample its ring buffer holds."""

    gpu_index: int
    gpu_uuid: str
    start_s: float
    until_s: float


@dataclass(frozen=True)
class HistoryPart:
    """What the history holds for one ``HistoryRead``: float64 arrays, and the resolution they come at."""

    time_s: FloatArray
    columns: dict[str, FloatArray]
    resolution: str


def read_history(history: HistoryQuery, reads: Sequence[HistoryRead]) -> dict[int, HistoryPart]:
    """Query each GPU's part (worker thread); by GPU index."""
    parts: dict[int, HistoryPart] = {}
    for read in reads:
        # The lanes draw each cause's seconds over each row's seconds, not the OR of its masks.
        result = history.query(read.gpu_uuid, [*RING_COLUMNS, *LANE_SHARE_COLUMNS], read.start_s, read.until_s,
                               max_points=HISTORY_POINTS)
        columns = {k: np.asarray(v, dtype=np.float64) for k, v in result.columns.items()}
        parts[read.gpu_index] = HistoryPart(np.asarray(result.time_s, dtype=np.float64), columns,
                                            str(getattr(result, "resolution", "")))
    return parts


class HistoryFill(QObject):
    """Fills the panels' windows from history off the GUI thread; ``note`` says what it shows."""

    def __init__(self, history: HistoryQuery | None, on_filled: Callable[[], None],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.history = history
        self.on_filled = on_filled
        self.note = QLabel("")
        # One connection: a read waits for the one before instead of competing with it.
        self.loader = Loader(self, name="dashboard-history", one_at_a_time=True)
        #: The window end of the last request (None: read at the next repaint).
        self.read_at: float | None = None
        #: What the live readings cover at the end of the window last read (the note names it).
        self.live_s = 0.0

    @property
    def loading(self) -> bool:
        return self.loader.busy

    def due(self, end_s: float) -> bool:
        return self.read_at is None or end_s - self.read_at >= HISTORY_REFRESH_S

    def invalidate(self) -> None:
        """The window changed: read again at the next repaint."""
        self.read_at = None

    def discard(self) -> None:
        """Drop a read in flight (the plots were paused): its answer must not change them."""
        if self.loading:
            self.loader.discard()
            self.note.setText("")
        self.read_at = None

    def request(self, panels: Sequence[GpuPanel], start_s: float, end_s: float, window_s: float) -> None:
        """Read the part of the window older than each panel's ring buffer; clear it where not needed."""
        self.read_at = end_s
        reads: list[HistoryRead] = []
        for panel in panels:
            oldest = panel.ring.oldest_s()
            if self.history is None or (oldest is not None and oldest <= start_s):
                panel.paint_history(np.empty(0, dtype=np.float64), {})
                self.note.setText("" if self.history is not None or window_s <= RING_SPAN_S
                                  else "No history database: showing what this window has seen")
                continue
            until = oldest if oldest is not None else end_s
            reads.append(HistoryRead(panel.info.index, panel.info.uuid, start_s, until))
            self.live_s = end_s - until
        if not reads:
            self.loader.discard()  # an older window's answer must not land in this one
            return
        history = self.history
        assert history is not None
        by_index = {panel.info.index: panel for panel in panels}
        self.note.setText(READING_TEXT)
        self.loader.run(lambda: read_history(history, reads), lambda parts: self._filled(by_index, parts),
                        self._failed)

    def _filled(self, panels: dict[int, GpuPanel], parts: dict[int, HistoryPart]) -> None:
        for index, part in parts.items():
            panel = panels[index]
            panel.paint_history(part.time_s, part.columns)
            self.note.setText(history_note(self.live_s, part.resolution) if part.time_s.size else
                              empty_history_note(self.live_s))
            panel.painted_version = -1
            panel.painted_end_s = None
        self.on_filled()

    def _failed(self, error: str) -> None:
        # A broken or busy database must not take the dashboard down: the live part goes on.
        log.warning("history query failed: %s", error)
        self.note.setText(f"History unavailable: {error}")

    def wait(self, timeout_s: float) -> bool:
        """Let a read in flight end (on quit, before the store closes); True when none is left."""
        return self.loader.wait(timeout_s)
