"""The Fleet page's machine cards: one per machine, a line per GPU, updated in place on each refresh.

A refresh of 50 machines x 8 GPUs changes only the texts that changed (``set_value``): the cards are kept
by machine name and only re-ordered when the attention order moved, so the GUI thread's share of a
refresh stays small (tests/bench/test_bench_fleet_page.py). Every shown string goes through ``printable``.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget

from advisor.safetext import printable
from desktop.fleet.model import FleetGpu, FleetMachine
from desktop.ui.theme import Theme

#: The attention words a card shows (the reader's reasons, in its order).
ATTENTION_WORDS: dict[str, str] = {
    "down": "down", "throttled": "throttled now", "hot": "hot", "recorder_down": "recorder not writing",
    "stress_throttled": "last stress test throttled",
}


def _num(value: float | None, unit: str, fmt: str = "{:.0f}") -> str:
    return "n/a" if value is None else f"{fmt.format(value)} {unit}"


def _of(value: float | None, limit: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value:.0f} / {limit:.0f} {unit}" if limit is not None else f"{value:.0f} {unit}"


def ago(time_s: float | None, now_s: float) -> str:
    """How long ago, in the largest whole unit ("12 s ago", "3 min ago", "2 h ago"); "never" for None."""
    if time_s is None:
        return "never"
    age = max(0.0, now_s - time_s)
    if age < 120:
        return f"{age:.0f} s ago"
    if age < 7200:
        return f"{age / 60:.0f} min ago"
    return f"{age / 3600:.0f} h ago"


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
        text += "  (DCGM only: no " + ", ".join(machine.missing) + ")"
    return text


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
        self.header = QLabel()
        self.header.setTextFormat(Qt.TextFormat.PlainText)
        font = self.header.font()
        font.setBold(True)
        self.header.setFont(font)
        self.attention = QLabel()
        self.attention.setTextFormat(Qt.TextFormat.PlainText)
        self.attention.setWordWrap(True)
        self._layout.addWidget(self.header)
        self._layout.addWidget(self.attention)
        self.gpu_labels: list[QLabel] = []
        self.selected = False
        self._level = ""
        self.machine: FleetMachine | None = None

    def update_from(self, machine: FleetMachine, now_s: float) -> None:
        self.machine = machine
        _set(self.header, header_text(machine, now_s))
        _set(self.attention, attention_text(machine))
        while len(self.gpu_labels) < len(machine.gpus):
            label = QLabel()
            label.setTextFormat(Qt.TextFormat.PlainText)
            self.gpu_labels.append(label)
            self._layout.addWidget(label)
        for label, gpu in zip(self.gpu_labels, machine.gpus, strict=False):
            _set(label, gpu_line(gpu, machine.source == "dcgm"))
            label.setVisible(True)
        for label in self.gpu_labels[len(machine.gpus):]:
            label.setVisible(False)
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
        self.attention.setStyleSheet(f"color: {edge if self._level != 'ok' else t.muted};")

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        self.paint()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit(self.name)
        super().mousePressEvent(event)


def _set(label: QLabel, text: str) -> None:
    if label.text() != text:
        label.setText(text)


def now_s() -> float:
    return time.time()
