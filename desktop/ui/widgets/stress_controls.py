"""The Stress page's row of controls: which test to run (preset, workload, precision, GPU) and Start / Cancel.

One button starts the test, with the preset shown selected to its left; its text names that preset. With
several GPUs (``gpus``: NVML index and name, as the app lists them) a picker chooses which one. The row only
holds the choice: the page reads it (``preset``, ``selected_gpu``), connects Start and Cancel, and turns the
controls off while a run is under way (``set_busy``).
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QButtonGroup, QComboBox, QHBoxLayout, QLabel, QPushButton, QWidget

from advisor.baseline import QUICK_S, SUSTAINED_S

PRESETS: tuple[tuple[str, float], ...] = (("Quick 2 min", QUICK_S), ("Sustained 10 min", SUSTAINED_S),
                                          ("Soak 30 min", 1800.0))
WORKLOADS = ("gemm", "bandwidth", "train", "infer")
PRECISIONS = ("default", "bf16", "fp16", "tf32", "fp32")
DEFAULT_PRESET = 1


class StressControls(QWidget):
    """"Test" presets, workload, precision, the GPU picker (several GPUs only), the start button and Cancel."""

    preset_changed = Signal()  # another preset is selected: the start button's words follow it

    def __init__(self, gpus: Sequence[tuple[int, str]] = (), parent: QWidget | None = None) -> None:
        super().__init__(parent)
        #: The GPUs to choose from (NVML index, name); the picker shows only with more than one.
        self.gpus = tuple(gpus)
        self.row = QHBoxLayout(self)
        self.row.setContentsMargins(0, 0, 0, 0)
        self.row.addWidget(QLabel("Test"))
        self.presets = QButtonGroup(self)
        for i, (label, _seconds) in enumerate(PRESETS):
            button = QPushButton(label)
            button.setObjectName("preset")
            button.setCheckable(True)
            button.setChecked(i == DEFAULT_PRESET)
            self.presets.addButton(button, i)
            self.row.addWidget(button)
        self.presets.idToggled.connect(lambda _id, _on: self.preset_changed.emit())
        self.workload = QComboBox()
        self.workload.addItems(list(WORKLOADS))
        self.precision = QComboBox()
        self.precision.addItems(list(PRECISIONS))
        for label, box in (("Workload", self.workload), ("Precision", self.precision)):
            self.row.addWidget(QLabel(label))
            self.row.addWidget(box)
        self.gpu_label = QLabel("GPU")
        self.gpu_combo = QComboBox()
        for index, name in self.gpus:
            self.gpu_combo.addItem(f"GPU {index}: {name}", index)
        for widget in (self.gpu_label, self.gpu_combo):
            self.row.addWidget(widget)
            widget.setVisible(len(self.gpus) > 1)
        self.row.addStretch(1)
        # The one way to start: it runs the preset shown selected to its left.
        self.one_click = QPushButton()
        self.one_click.setObjectName("oneClick")
        self.start_button = self.one_click
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.row.addWidget(self.one_click)
        self.row.addWidget(self.cancel_button)

    def add_control(self, widget: QWidget) -> None:
        """Another control before the start button (the "Compare modes" menu: desktop/ui/pages/stress_modes.py)."""
        self.row.insertWidget(self.row.indexOf(self.one_click), widget)

    def preset(self) -> tuple[str, float]:
        """The selected preset: its label and its length in seconds."""
        return PRESETS[max(0, self.presets.checkedId())]

    def select_preset(self, index: int) -> None:
        self.presets.button(index).setChecked(True)

    def selected_gpu(self) -> int:
        """The NVML index of the GPU to test: the picker's choice, the only GPU listed, or 0."""
        data = self.gpu_combo.currentData()
        if data is not None:
            return int(data)
        return self.gpus[0][0] if self.gpus else 0

    def set_busy(self, busy: bool, workload_fixed: bool) -> None:
        """While a run is under way (or held off) only Cancel is on; ``workload_fixed``: one workload only (the
        simulated GPU models GEMM throughput only)."""
        for widget in (self.one_click, self.precision, self.gpu_combo, *self.presets.buttons()):
            widget.setEnabled(not busy)
        self.workload.setEnabled(not busy and not workload_fixed)
        self.cancel_button.setEnabled(busy)

    def set_unavailable(self, message: str) -> None:
        """No test can run here: the start button is off and says why."""
        for button in (self.one_click, self.start_button):
            button.setEnabled(False)
            button.setToolTip(message)
