"""The Fleet page's machine cards: one per machine, a line per GPU, updated in place on each refresh.

A refresh of 50 machines x 8 GPUs repaints only the texts that changed: the cards are kept
by machine name and only re-ordered when the attention order moved, and their text is painted by hand
(``TextLines``: a new text repaints, it does not lay the page out again), so the GUI thread's share of a
refresh stays small (tests/bench/test_bench_fleet_page.py). Every shown string goes through ``printable``.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QFrame, QSizePolicy, QVBoxLayout, QWidget

from advisor.safetext import printable
from desktop.fleet.model import FleetGpu, FleetMachine
from desktop.fleet.text import ago as fleet_ago
from desktop.fleet.text import of_limit
from desktop.ui.theme import Theme

#: The attention words a card shows (the reader's reasons, in its order).
ATTENTION_WORDS: dict[str, str] = {
    "down": "down", "throttled": "throttled now", "hot": "hot", "recorder_down": "recorder not writing",
    "stress_throttled": "last stress test throttled",
}


def _num(value: float | None, unit: str, fmt: str = "{:.0f}") -> str:
    return "n/a" if value is None else f"{fmt.format(value)} {unit}"


def _of(value: float | None, limit: float | None, unit: str) -> str:
    return of_limit(value, limit, unit) or "n/a"


def ago(time_s: float | None, now_s: float) -> str:
    """How long ago (``desktop.fleet.text.ago``, as `rigscope fleet` says it); "never" for None."""
    return fleet_ago(time_s, now_s) or "never"


def throttle_text(gpu: FleetGpu) -> str:
    """Throttled now and by what; "n/a" where the machine cannot say (DCGM-only)."""
    if gpu.throttle_reasons is None:
        return "throttle n/a"
    return "throttled: " + ", ".join(gpu.throttle_reasons) if gpu.throttle_reasons else "not throttled"


def stress_text(gpu: FleetGpu) -> str:
    if gpu.last_stress is None:
        return ""
    verdict = "throttled" if gpu.last_stress.throttled else "held its clocks"
    return f"last stress: {verdict}"


def gpu_line(gpu: FleetGpu, dcgm_only: bool) -> str:
    """One GPU on its card, two lines: which GPU and its state (throttled, last stress test), then what it runs
    at now against its limits where the machine says them."""
    name = printable(gpu.model or gpu.uuid)
    index = f"GPU {printable(gpu.index)}" if gpu.index is not None else "GPU"
    if not gpu.live:
        return f"{index}  {name}  ·  no reading now"
    first = [f"{index}  {name}"]
    if not dcgm_only:
        first.append(throttle_text(gpu))
        if stress := stress_text(gpu):
            first.append(stress)
    vram = _of(gpu.vram_used_mib, gpu.vram_total_mib, "MiB")
    second = [_num(gpu.utilization_pct, "%"), f"VRAM {vram}", _num(gpu.temperature_c, "°C"),
              _of(gpu.power_w, gpu.power_limit_w, "W"), f"SM {_of(gpu.sm_clock_mhz, gpu.sm_clock_max_mhz, 'MHz')}"]
    return "  ·  ".join(first) + "\n      " + "  ·  ".join(second)


def header_text(machine: FleetMachine, now_s: float) -> str:
    """The card's title line: name, DCGM-only or Rigscope, the recorder, when it was last seen."""
    parts = [printable(machine.name)]
    if machine.source == "dcgm":
        parts.append("DCGM only")
    elif machine.recorder_up is not None:
        parts.append("recorder up" if machine.recorder_up else "recorder down")
    else:
        parts.append("Rigscope, no recorder")
    parts.append(f"seen {ago(machine.last_seen_s, now_s)}")
    return "  ·  ".join(parts)


def attention_text(machine: FleetMachine) -> str:
    words = [ATTENTION_WORDS.get(a, a) for a in machine.attention]
    text = "Needs attention: " + ", ".join(words) if words else "OK"
    if machine.missing:
        text += "\nDCGM only: no " + ", ".join(machine.missing)
    return text


class TextLines(QWidget):
    """Lines of plain text painted by hand, each cut with "…" to the width (its tooltip has them whole).

    A new text of as many lines only repaints: the height depends on the line count alone and the width on
    the layout, so nothing above is laid out again. A QLabel asks its parents for a new layout at every text
    change, which with 50 cards of 8 GPUs cost ~20 ms of the GUI thread per refresh."""

    def __init__(self, bold: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        if bold:
            font = self.font()
            font.setBold(True)
            self.setFont(font)
        self._lines: list[str] = []
        self._colour: QColor | None = None
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def text(self) -> str:
        return "\n".join(self._lines)

    def setText(self, text: str) -> None:
        lines = text.split("\n") if text else []
        if lines == self._lines:
            return
        resized = len(lines) != len(self._lines)
        self._lines = lines
        self.setToolTip(text)
        if resized:
            self.updateGeometry()
        self.update()

    def set_colour(self, colour: str | None) -> None:
        self._colour = QColor(colour) if colour else None
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(240, self.fontMetrics().lineSpacing() * len(self._lines))

    def minimumSizeHint(self) -> QSize:
        return QSize(80, self.sizeHint().height())

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        metrics = self.fontMetrics()
        painter.setPen(self._colour or self.palette().color(QPalette.ColorRole.WindowText))
        width = self.width()
        for row, line in enumerate(self._lines):
            text = metrics.elidedText(line, Qt.TextElideMode.ElideRight, width)
            painter.drawText(0, row * metrics.lineSpacing() + metrics.ascent(), text)
        painter.end()


class MachineCard(QFrame):
    """A machine: its header, what needs attention, a line per GPU. Click to see its plots."""

    clicked = Signal(str)

    def __init__(self, name: str, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.theme = theme
        self.setObjectName("fleetCard")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(10, 6, 10, 6)
        self._layout.setSpacing(2)
        self.header = TextLines(bold=True)
        self.attention = TextLines()
        self.gpus_label = TextLines()
        self._layout.addWidget(self.header)
        self._layout.addWidget(self.attention)
        self._layout.addWidget(self.gpus_label)
        self.selected = False
        self._level = ""
        self.machine: FleetMachine | None = None

    def update_from(self, machine: FleetMachine, now_s: float) -> None:
        self.machine = machine
        self.header.setText(header_text(machine, now_s))
        self.attention.setText(attention_text(machine))
        self.gpus_label.setText("\n".join(gpu_line(gpu, machine.source == "dcgm") for gpu in machine.gpus))
        level = "bad" if machine.attention[:1] in (("down",), ("throttled",)) else (
            "warn" if machine.attention else "ok")
        if level != self._level:
            self._level = level
            self.paint()

    def set_selected(self, selected: bool) -> None:
        if selected != self.selected:
            self.selected = selected
            self.paint()

    def paint(self) -> None:
        t = self.theme
        edge = {"bad": t.bad, "warn": t.warn}.get(self._level, t.ok)
        border = t.accent if self.selected else t.border
        self.setStyleSheet(f"#fleetCard {{ border: 1px solid {border}; border-left: 5px solid {edge};"
                           f" border-radius: 4px; background: {t.base}; }}")
        self.attention.set_colour(edge if self._level != "ok" else t.muted)

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        self.paint()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit(self.name)
        super().mousePressEvent(event)


