"""The at-a-glance widgets of the dashboard: one card per GPU and the CPU / RAM strip."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QFrame, QGridLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from advisor.safetext import printable
from desktop.telemetry.envelope import PowerEnvelope, explain_gpu
from desktop.telemetry.model import (
    METRICS_BY_NAME,
    THROTTLE_REASONS,
    ClockEventReason,
    DeviceState,
    GpuInfo,
    GpuReading,
    HostSample,
    format_value,
)
from desktop.ui.text import plain, plain_tooltip
from desktop.ui.theme import Theme

_TILES = (
    ("utilization", "Utilization"),
    ("vram", "VRAM used / total"),
    ("temperature", "Temperature"),
    ("power", "Power / limit"),
    ("clock", "SM clock / max"),
)


UTILIZATION_TIP = ("Utilization: share of time a kernel ran. Effective load (eff.): how hard the GPU worked, "
                   "estimated from power and SM clock against its full-load calibration (its own stress run, "
                   "else the datasheet); 100 % utilization at ~35 % effective load means memory-bound kernels, "
                   "small batches or a starved input pipeline.")


MEASURED_TIP = ("Utilization: share of time a kernel ran. SM activity (act.): share of the SMs that were busy, "
                "measured by the GPU itself (NVML GPM); 100 % utilization at low SM activity means kernels too "
                "small to fill the GPU or a starved input pipeline.")


def _activity_tip(reading: GpuReading) -> str:
    """The measured tensor and DRAM activity, where GPM gave them this tick."""
    activity = reading.activity
    if activity is None:
        return ""
    parts = [f"{label} {value:.0f} %" for label, value in (("Tensor cores", activity.tensor_active_pct),
                                                          ("DRAM bandwidth", activity.dram_active_pct))
             if value is not None]
    return f"{', '.join(parts)}. " if parts else ""


def _fmt(name: str, value: float | None) -> str:
    return format_value(METRICS_BY_NAME[name], value)


def _of(name: str, value: float | None, maximum: float | None) -> str:
    """``"120 / 150 W"``: the unit once, after the maximum."""
    metric = METRICS_BY_NAME[name]
    if value is None:
        return "n/a"
    if maximum is None:
        return format_value(metric, value)
    return f"{value:,.0f} / {maximum:,.0f} {metric.unit}"


def driver_text(driver_version: str | None, cuda_version: str | None, simulated: bool = False) -> str:
    """The line under a GPU's name: "Driver 560.35 · CUDA 12.6", or in plain words a simulated GPU."""
    if simulated or driver_version == "simulated":
        return "Simulated GPU (no NVIDIA driver)"
    cuda = f" · CUDA {cuda_version}" if cuda_version else ""
    return f"Driver {driver_version or 'n/a'}{cuda}"


def reading_texts(info: GpuInfo, reading: GpuReading | None) -> dict[str, str]:
    """The text of every tile for one reading (pure, so tests and the tray reuse it)."""
    sample = reading.sample if reading is not None else None
    if sample is None:
        tip = MEASURED_TIP if info.gpm_supported else UTILIZATION_TIP
        return {key: "n/a" for key, _ in _TILES} | {"throttle": "", "utilization_tip": tip}
    util = _fmt("utilization_gpu_pct", sample.utilization_gpu_pct)
    mem = sample.utilization_mem_pct
    effective = sample.effective_load_pct
    measured = info.gpm_supported  # GPM: measured SM activity ("act."), else the estimate ("eff.")
    util_tip = MEASURED_TIP if measured else UTILIZATION_TIP
    if effective is not None:  # beside utilization: how hard the GPU works while kernels run
        util = f"{util} · {'act.' if measured else 'eff.'} {effective:.0f} %"
        if mem is not None:
            util_tip = f"Memory controller {mem:.0f} %. {util_tip}"
    elif mem is not None:
        util = f"{util}  (mem {mem:.0f} %)"
    if measured and reading is not None:
        util_tip = _activity_tip(reading) + util_tip
    reasons = ClockEventReason.decode((sample.clock_event_reasons or 0) & int(THROTTLE_REASONS))
    return {
        "utilization": util,
        "vram": _of("vram_used_mib", sample.vram_used_mib, info.vram_total_mib),
        "temperature": _fmt("temperature_c", sample.temperature_c),
        "power": _of("power_w", sample.power_w, info.power_limit_enforced_w),
        "clock": _of("sm_clock_mhz", sample.sm_clock_mhz, info.sm_clock_max_mhz),
        "throttle": ("Held back by: " + ", ".join(r.label for r in reasons)) if reasons else "Not throttled",
        "utilization_tip": util_tip,
    }


def envelope_texts(info: GpuInfo, envelope: PowerEnvelope | None) -> tuple[str, str]:
    """The card's power-limit line ("Power limit: capped at 55 W of 175 W: on battery") and its tooltip:
    the sources behind it and what to do. Empty for a GPU whose limit the driver does not give."""
    if info.power_limit_enforced_w is None:
        return "", ""
    cap = explain_gpu(info, envelope)
    tip: list[str] = []
    if cap.rated_w is not None:
        tip.append(f"Rated power {cap.rated_w:.0f} W ({cap.rated_source}).")
    env = envelope or PowerEnvelope()
    if env.on_ac is not None:
        battery = f", battery {env.battery_pct:.0f} %" if env.battery_pct is not None else ""
        tip.append(("On AC power" if env.on_ac else "On battery") + f"{battery}.")
    if env.firmware_mode is not None:
        tip.append(f"Firmware mode: {env.firmware_mode}.")
    if env.powerd_running is not None:
        tip.append("nvidia-powerd (Dynamic Boost) is " + ("running." if env.powerd_running else "not running."))
    if cap.action:
        tip.append(f"Fix: {cap.action}")
    return printable(f"Power limit: {cap.line}"), plain_tooltip(printable(" ".join(tip)))


def tint(label: QLabel, colour: str | None = None, fill: str | None = None) -> None:
    """Colour a label through its palette (text ``colour``; ``fill``: an opaque background of that colour).

    Not a style sheet: a style sheet puts the label and its subtree under the slower style-sheet style for
    every paint and size hint, and resets the palette. An opaque label repaints alone when its text changes
    (its parent's background under it is not painted again): the values change every second."""
    palette = label.palette()
    if colour is not None:
        palette.setColor(QPalette.ColorRole.WindowText, QColor(colour))
    if fill is not None:
        palette.setColor(QPalette.ColorRole.Window, QColor(fill))
        label.setAutoFillBackground(True)
    label.setPalette(palette)


def set_value(label: QLabel, text: str) -> None:
    """Set a text that changes every second without re-laying out the window.

    A new text makes a QLabel ask its parent's layout again, and each layout up to the window follows
    (every second, for a digit). The label holds a fixed size instead: the size of the widest text it
    has shown so far (at least its minimum width), grown only when a new text needs more room."""
    if label.text() == text:
        return
    label.setText(text)
    need = label.sizeHint().expandedTo(label.minimumSize())
    if need != label.maximumSize():  # not fixed yet, or this text needs more room
        label.setFixedSize(need)


class _Panel(QFrame):
    """A frame with a rounded background in the theme's base colour, painted by hand (no style sheet)."""

    RADIUS_PX = 4.0

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._fill = QColor("transparent")

    def set_fill(self, colour: str) -> None:
        self._fill = QColor(colour)
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(self._fill)
        painter.drawRoundedRect(self.rect(), self.RADIUS_PX, self.RADIUS_PX)
        painter.end()


class GpuCard(_Panel):
    """Name, driver, a state badge and the current values of one GPU, big and with units."""

    def __init__(self, info: GpuInfo, theme: Theme, tiles_per_row: int = 5, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.info = info
        self.theme = theme
        self.state = DeviceState.OK
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        layout.setSpacing(4)
        head = QHBoxLayout()
        self.name_label = plain(QLabel(f"GPU {info.index} · {info.name}"))  # a GPU name from a log or a fake driver
        font = self.name_label.font()
        font.setPointSizeF(font.pointSizeF() * 1.15)
        font.setBold(True)
        self.name_label.setFont(font)
        self.name_label.setWordWrap(True)  # side by side, a long marketing name must not widen the window
        self.badge = QLabel()
        self.badge.setObjectName("badge")
        self.badge.setAlignment(Qt.AlignmentFlag.AlignCenter)
        head.addWidget(self.name_label, 1)
        head.addWidget(self.badge)
        layout.addLayout(head)
        self.driver_label = QLabel(driver_text(info.driver_version, info.cuda_version, info.simulated))
        layout.addWidget(self.driver_label)
        grid = QGridLayout()
        grid.setHorizontalSpacing(18 if tiles_per_row >= len(_TILES) else 8)
        grid.setVerticalSpacing(0)
        self.values: dict[str, QLabel] = {}
        self._captions: list[QLabel] = []
        for position, (key, caption) in enumerate(_TILES):
            row, column = divmod(position, tiles_per_row)
            cap = QLabel(caption)
            value = QLabel("n/a")
            value.setTextFormat(Qt.TextFormat.PlainText)
            big = value.font()
            big.setPointSizeF(big.pointSizeF() * 1.45)
            value.setFont(big)
            # Wide enough for "16,376 / 16,376 MiB": a changing number then never re-lays out the card.
            if tiles_per_row >= len(_TILES):  # one row: there is room (one or two GPUs)
                value.setMinimumWidth(value.fontMetrics().horizontalAdvance("00,000 / 00,000 MiB"))
            grid.addWidget(cap, 2 * row, column)
            # Aligned, its fixed size (set_value) does not bound the grid: the columns still share the card's width.
            grid.addWidget(value, 2 * row + 1, column, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
            self.values[key] = value
            self._captions.append(cap)
        layout.addLayout(grid)
        self.throttle_label = QLabel("")
        layout.addWidget(self.throttle_label)
        #: Why the power limit is where it is (the laptop's envelope); hidden where there is no limit.
        self.envelope_label = plain(QLabel(""))  # a firmware mode read from sysfs is any bytes
        self.envelope_label.setWordWrap(True)
        self.envelope_label.hide()
        layout.addWidget(self.envelope_label)
        self.apply_theme(theme)

    def update_reading(self, reading: GpuReading) -> None:
        self.info = reading.info
        texts = reading_texts(reading.info, reading)
        # Set only what changed: a tooltip or badge set each second costs an event each; values go through set_value.
        for key, label in self.values.items():
            set_value(label, texts[key])
        tip = texts["utilization_tip"]
        if self.values["utilization"].toolTip() != tip:
            self.values["utilization"].setToolTip(tip)
        if self.throttle_label.text() != texts["throttle"]:
            self.throttle_label.setText(texts["throttle"])
        if reading.state is not self.state:
            self.state = reading.state
            self._paint_badge()
        tip = reading.state_detail or ""
        if self.badge.toolTip() != tip:
            self.badge.setToolTip(tip)

    def update_envelope(self, envelope: PowerEnvelope | None) -> None:
        line, tip = envelope_texts(self.info, envelope)
        if self.envelope_label.text() != line:
            self.envelope_label.setText(line)
            self.envelope_label.setVisible(bool(line))
        if self.envelope_label.toolTip() != tip:
            self.envelope_label.setToolTip(tip)

    def _paint_badge(self) -> None:
        if self.state is DeviceState.LOST:
            text, colour = "LOST", self.theme.bad
        elif self.state is DeviceState.ASLEEP:  # the driver powered it down to save battery: not a fault
            text, colour = "ASLEEP", self.theme.muted
        elif self.info.simulated:
            text, colour = "SIMULATED", self.theme.warn
        else:
            text, colour = "OK", self.theme.ok
        self.badge.setText(text)
        self.badge.setStyleSheet(f"#badge {{ color: {colour}; border: 1px solid {colour}; border-radius: 3px;"
                                 f" padding: 1px 6px; font-weight: bold; }}")

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        self.set_fill(theme.base)
        for cap in (*self._captions, self.driver_label, self.envelope_label):
            tint(cap, theme.muted)
        tint(self.throttle_label, theme.muted, fill=theme.base)
        for value in self.values.values():  # these change every second: opaque, they repaint alone
            tint(value, fill=theme.base)
        self._paint_badge()


class HostStrip(_Panel):
    """CPU, RAM and power source of the machine, one line."""

    def __init__(self, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 4, 10, 4)
        layout.setSpacing(24)
        self.labels: dict[str, QLabel] = {}
        for key in ("cpu", "ram", "load", "power"):
            label = QLabel("n/a")
            layout.addWidget(label)
            self.labels[key] = label
        layout.addStretch(1)
        self.theme = theme
        self.apply_theme(theme)
        self.update_host(None)

    def update_host(self, host: HostSample | None) -> None:
        if host is None:
            texts = {"cpu": "CPU n/a", "ram": "RAM n/a", "load": "", "power": ""}
        else:
            cpu = "n/a" if host.cpu_pct is None else f"{host.cpu_pct:.0f} %"
            if host.cpu_freq_mhz is not None:
                cpu += f" at {host.cpu_freq_mhz:,.0f} MHz"
            if host.cpu_temp_c is not None:
                cpu += f", {host.cpu_temp_c:.0f} °C"
            ram = "n/a"
            if host.ram_used_mib is not None and host.ram_total_mib:
                ram = (f"{host.ram_used_mib / 1024:.1f} / {host.ram_total_mib / 1024:.1f} GiB"
                       f" ({100 * host.ram_used_mib / host.ram_total_mib:.0f} %)")
            load = ""
            if host.load_1m is not None:
                load = f"Load {host.load_1m:.2f} / {host.load_5m or 0:.2f} / {host.load_15m or 0:.2f}"
            power = ""
            if host.on_ac_power is not None:
                power = "On AC power" if host.on_ac_power else "On battery"
                if host.battery_pct is not None:
                    power += f" ({host.battery_pct:.0f} %)"
            texts = {"cpu": f"CPU {cpu}", "ram": f"RAM {ram}", "load": load, "power": power}
        for key, label in self.labels.items():
            set_value(label, texts[key])
            if label.isVisibleTo(self) != bool(texts[key]):
                label.setVisible(bool(texts[key]))

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        self.set_fill(theme.base)
        for label in self.labels.values():
            tint(label, fill=theme.base)
