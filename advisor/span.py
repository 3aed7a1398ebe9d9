"""The recorded span: how much of a window a GPU's history covers, the one figure every extrapolation uses.

A window (an ISO week, "the last 7 days") is not the time recorded in it: a fresh install has 34
minutes of a week, an imported log 12 minutes of ten years. Costs per month, busy hours per month
and shares are all extrapolated from the time recorded, never the window's length, and say so:
"from 1.6 recorded days of 2026-W48". The report, the Costs and History pages and `rigscope advise`
all take the figure from ``recorded_span`` (one computation per figure).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.wording import duration_text

if TYPE_CHECKING:  # `rigscope --help` imports advisor.costs, which imports this: no numpy at import
    from advisor.frame import GpuSeries, HistoryFrame

#: The month every monthly figure is extrapolated to.
MONTH_S = 30 * 86400.0


@dataclass(frozen=True)
class RecordedSpan:
    """The time a GPU's rows stand for within a window, and the window they are of."""

    recorded_s: float
    window_s: float
    #: How the window is named: "2026-W48", "the last 7 days".
    window_label: str

    def per_month(self, value: float) -> float:
        """``value`` (a sum over the recorded time) extrapolated to 30 days; 0 with nothing recorded."""
        return value * MONTH_S / self.recorded_s if self.recorded_s > 0 else 0.0

    def text(self) -> str:
        """"1.6 recorded days of 2026-W48", "34 recorded minutes of the last 7 days" ("7 recorded days" where the
        window has no name)."""
        number, _, unit = duration_text(self.recorded_s).partition(" ")
        return f"{number} recorded {unit}" + (f" of {self.window_label}" if self.window_label else "")


def window_label(frame: HistoryFrame) -> str:
    """The frame's own name for its window, else its length ("the last 7 days" of a frame without one)."""
    return frame.label or f"the last {duration_text(frame.end_s - frame.start_s)}"


def recorded_s(gpu: GpuSeries) -> float:
    """Seconds of history the GPU's rows stand for (each row its duration: a sample period or a rollup bucket)."""
    import numpy as np

    return float(np.nansum(gpu.duration_s)) if len(gpu) else 0.0


def recorded_span(frame: HistoryFrame, gpu: GpuSeries | None) -> RecordedSpan:
    """The recorded span of ``gpu`` in ``frame``'s window (nothing recorded when the GPU is not in it)."""
    return RecordedSpan(recorded_s(gpu) if gpu is not None else 0.0, frame.end_s - frame.start_s, window_label(frame))


def frame_span(frame: HistoryFrame) -> RecordedSpan:
    """The span of the best-covered GPU: how much history advice over the whole frame is judged from."""
    best = max(frame.gpus, key=recorded_s, default=None)
    return recorded_span(frame, best)
