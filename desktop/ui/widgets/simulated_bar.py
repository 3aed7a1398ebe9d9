"""The Dashboard's word on a simulated GPU: why its graphs are flat, and two ways to make them move.

Shown above the GPU cards while the window reads the simulated GPU: it says what runs on it
(nothing: the graphs stay flat) and offers "Load demo week" (a simulated week of history
written into a separate demo database, with progress) and "Start simulated workload"
(training, an inference server, a forgotten notebook; and stop). It only asks: the app wires
the requests to the simulated machine and the demo writer, and reports back here.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QMenu, QProgressBar, QPushButton, QWidget

from advisor.envelope import MSI_SHIFT_MODE_NAMES
from desktop.telemetry.model import Snapshot
from desktop.telemetry.simulated import WORKLOADS
from desktop.telemetry.simulated.envelope import DEFAULT_MODE, SHIFT_MODES
from desktop.ui.text import plain
from desktop.ui.theme import Theme
from desktop.ui.widgets.elided_label import elide_words

IDLE_TEXT = ("Simulated GPU, nothing running on it: its graphs stay flat until something loads it. "
             "Start a simulated workload, or load a demo week of history to look back on.")
#: Idle while the demo week is shown: its history fills the 24 h and 7 d windows, so the graphs are not flat.
DEMO_IDLE_TEXT = ("Showing the demo week: its history fills the 24 h and 7 d windows. The simulated GPU runs "
                  "nothing now, so the live readings stay flat until you start a simulated workload.")
_WORKLOAD_PIDS = {w.pid for w in WORKLOADS.values()}


#: The demo week's progress bar: wide enough for "Writing host and process samples… 80 %" in the default font.
PROGRESS_WIDTH_PX = 300
#: What the bar's frame and text margins take from its width (px).
PROGRESS_PADDING_PX = 12

DEMO_TOOLTIP = ("Write a simulated week into a separate demo database (never your own history) and show it on "
                "the Dashboard, Advisor, Costs, History and Jobs pages")


class SimulatedBar(QFrame):
    """Says what the simulated GPU runs; asks for a workload, a stop, or the demo week."""

    workload_requested = Signal(str)
    stop_requested = Signal()
    demo_requested = Signal()
    #: "Leave demo": back to this machine's own history.
    leave_demo_requested = Signal()
    #: The simulated laptop's power envelope: ("on_ac", "1"/"0"), ("powerd", "1"/"0") or ("mode", msi-ec mode).
    envelope_requested = Signal(str, str)

    def __init__(self, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("simulatedBar")
        self.text = plain(QLabel(IDLE_TEXT))  # commands are chosen by whoever runs them: plain text
        self.text.setWordWrap(True)
        self.demo_button = QPushButton("&Load demo week")
        self.demo_button.setToolTip(DEMO_TOOLTIP)
        #: True while the pages show the demo week: the button leaves it instead of offering it again.
        self.demo_shown = False
        self.demo_button.clicked.connect(self._demo_clicked)
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setFixedWidth(PROGRESS_WIDTH_PX)
        self.progress.hide()
        self.workload_button = QPushButton("Start simulated &workload ▾")
        self.workload_button.setToolTip("Give the simulated GPU something to do: every page, alert and the "
                                        "recording see it")
        self.menu = QMenu(self.workload_button)
        self.workload_actions: dict[str, QAction] = {}
        for key, workload in WORKLOADS.items():
            action = self.menu.addAction(workload.label)
            action.setToolTip(workload.command)
            action.triggered.connect(lambda _=False, k=key: self.workload_requested.emit(k))
            self.workload_actions[key] = action
        self.menu.addSeparator()
        self.stop_action = self.menu.addAction("Stop simulated workloads")
        self.stop_action.triggered.connect(self.stop_requested)
        self.stop_action.setEnabled(False)
        self.workload_button.setMenu(self.menu)
        self.envelope_button = QPushButton("Laptop &power ▾")
        self.envelope_button.setToolTip("Unplug the simulated laptop, stop nvidia-powerd or switch its firmware "
                                        "mode: the GPU's power limit and the line that explains it follow")
        self.envelope_menu = QMenu(self.envelope_button)
        self.battery_action = self.envelope_menu.addAction("On battery")
        self.battery_action.setCheckable(True)
        self.battery_action.toggled.connect(lambda on: self.envelope_requested.emit("on_ac", "0" if on else "1"))
        self.powerd_action = self.envelope_menu.addAction("nvidia-powerd running (Dynamic Boost)")
        self.powerd_action.setCheckable(True)
        self.powerd_action.setChecked(True)
        self.powerd_action.toggled.connect(lambda on: self.envelope_requested.emit("powerd", "1" if on else "0"))
        self.envelope_menu.addSeparator()
        modes = QActionGroup(self.envelope_menu)
        self.mode_actions: dict[str, QAction] = {}
        for mode in SHIFT_MODES:
            action = self.envelope_menu.addAction(f"Firmware mode: {MSI_SHIFT_MODE_NAMES[mode]}")
            action.setCheckable(True)
            action.setChecked(mode == DEFAULT_MODE)
            modes.addAction(action)
            action.triggered.connect(lambda _=False, m=mode: self.envelope_requested.emit("mode", m))
            self.mode_actions[mode] = action
        self.envelope_button.setMenu(self.envelope_menu)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.progress)
        layout.addWidget(self.demo_button)
        layout.addWidget(self.workload_button)
        layout.addWidget(self.envelope_button)
        self.apply_theme(theme)

    def update_state(self, snap: Snapshot) -> None:
        """What runs on the simulated GPUs now (from the snapshot's process list)."""
        if not snap.processes_fresh:
            return
        # The busiest first; past two, a count (the Processes page lists them all).
        procs = sorted(snap.processes, key=lambda p: -(p.sm_util_pct or 0.0))
        running = [p.command or p.name for p in procs]
        self.stop_action.setEnabled(any(p.pid in _WORKLOAD_PIDS for p in snap.processes))
        if running:
            shown = "; ".join(running[:2])
            if len(running) > 2:
                shown += f" and {len(running) - 2} more (Processes page)"
            self.text.setText("Simulated GPU running " + shown
                              + ". The Dashboard, Processes page, alerts and recording all see this load.")
        else:
            self.text.setText(self.idle_text())

    def idle_text(self) -> str:
        """What the bar says while nothing runs on the simulated GPU (the demo week shown or not)."""
        return DEMO_IDLE_TEXT if self.demo_shown else IDLE_TEXT

    # --- the demo week ---------------------------------------------------------------
    def demo_started(self) -> None:
        self.demo_button.setEnabled(False)
        self.progress.show()
        self.demo_progress(0.0, "Writing the demo week…")

    def demo_progress(self, fraction: float, step: str) -> None:
        self.progress.setValue(round(100 * max(0.0, min(1.0, fraction))))
        # Inside the bar, shortened at a word when it would overflow it; the whole step as tooltip.
        metrics = self.progress.fontMetrics()
        room = self.progress.contentsRect().width() - PROGRESS_PADDING_PX - metrics.horizontalAdvance(" 100 %")
        self.progress.setFormat(f"{elide_words(step, metrics, room)} %p %")
        self.progress.setToolTip(step)

    def demo_finished(self, message: str) -> None:
        self.progress.hide()
        self.demo_button.setEnabled(True)
        self.demo_button.setToolTip(message)

    def _demo_clicked(self) -> None:
        (self.leave_demo_requested if self.demo_shown else self.demo_requested).emit()

    def set_demo_shown(self, shown: bool) -> None:
        """The pages show the demo week (the button says "Leave demo"), or this machine's history again."""
        was_idle = self.text.text() in (IDLE_TEXT, DEMO_IDLE_TEXT)
        self.demo_shown = shown
        if was_idle:
            self.text.setText(self.idle_text())
        self.demo_button.setText("&Leave demo" if shown else "&Load demo week")
        self.demo_button.setToolTip("Show this machine's own history again" if shown else DEMO_TOOLTIP)

    def apply_theme(self, theme: Theme) -> None:
        self.setStyleSheet(f"QFrame#simulatedBar {{ background: {theme.base}; border: 1px solid {theme.accent};"
                           f" border-radius: 4px; }} QFrame#simulatedBar QLabel {{ color: {theme.text}; }}")
