"""The Stress page's view of a run as it goes: the progress bar, the live readout and the four live charts.

Before the first run of the session the chart area explains itself (``empty_state``) instead of showing four
empty plots; ``begin`` switches to the charts, which stay from then on. Each ``Progress`` from the runner moves
the bar and rewrites the readout, and while the workload runs appends one row to the ring buffer the charts
draw from (``show_progress``). The charts draw the device's own limits (``show_limits``): max SM clock,
slowdown and guard temperature, power limit.
"""

from __future__ import annotations

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QStackedWidget, QVBoxLayout, QWidget

from advisor.verdict_text import format_duration
from desktop.stress.run_model import Progress
from desktop.telemetry.model import GpuInfo
from desktop.ui.theme import Theme
from desktop.ui.widgets.plot_column import PlotColumn
from desktop.ui.widgets.ring_buffer import RingBuffer

#: The live charts: key (the ``Progress`` field), title, unit (the throughput's comes with the run).
LIVE: tuple[tuple[str, str, str], ...] = (("throughput", "Throughput", ""), ("sm_clock_mhz", "SM clock", "MHz"),
                                          ("temperature_c", "Temperature", "°C"), ("power_w", "Power", "W"))
#: The least y span of each live chart (absolute, and as a share of the value): sensor noise of a
#: degree or a few MHz stays a flat line instead of filling the plot.
MIN_SPANS: dict[str, tuple[float, float]] = {"throughput": (0.0, 0.2), "sm_clock_mhz": (300.0, 0.0),
                                             "temperature_c": (10.0, 0.0), "power_w": (20.0, 0.0)}


class StressLive(QWidget):
    """Progress bar and readout over the chart area (the empty state until the first run, then the charts)."""

    def __init__(self, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        status = QHBoxLayout()
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 1000)
        self.progress_bar.setFormat("Ready")
        self.progress_bar.hide()  # until the first run: an empty bar says nothing
        #: The newest throughput, temperature, clock, power and error count, in words.
        self.readout = QLabel("")
        self.readout.setTextFormat(Qt.TextFormat.PlainText)  # it may show a database path
        status.addWidget(self.progress_bar, 2)
        status.addWidget(self.readout, 3)
        layout.addLayout(status)

        self.buffer = RingBuffer(4000, tuple(key for key, _title, _unit in LIVE))
        self.charts = PlotColumn(theme)
        for key, title, unit in LIVE:
            plot = self.charts.add_plot(key, title, unit)
            plot.add_series(key, title)
            plot.set_min_span(*MIN_SPANS[key])
        # Before the first run: what the charts will show, not four empty 0-1 plots (the page words it).
        self.empty_state = QLabel()
        self.empty_state.setObjectName("stressEmpty")
        self.empty_state.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_state.setWordWrap(True)
        self.chart_area = QStackedWidget()
        self.chart_area.addWidget(self.empty_state)
        self.chart_area.addWidget(self.charts)
        layout.addWidget(self.chart_area, 1)

    @property
    def charts_shown(self) -> bool:
        """The live charts are in view (from the first run of the session on); else the empty state."""
        return self.chart_area.currentWidget() is self.charts

    def begin(self) -> None:
        """A run starts: empty charts in view, the bar shown, the readout cleared."""
        self.buffer.clear()
        self.chart_area.setCurrentWidget(self.charts)
        self.progress_bar.show()
        self.readout.setText("")

    def show_limits(self, info: GpuInfo | None, guard_c: float | None) -> None:
        """Draw the device's own limits: max clock, slowdown and guard temperature, power limit."""
        clock, temp, power = (self.charts.plot(k) for k in ("sm_clock_mhz", "temperature_c", "power_w"))
        clock.set_limit("max", info.sm_clock_max_mhz if info else None, "max")
        temp.set_limit("slowdown", info.temp_slowdown_c if info else None, "slowdown")
        temp.set_limit("guard", guard_c, "guard")
        power.set_limit("limit", info.power_limit_enforced_w if info else None, "power limit")

    def show_progress(self, p: Progress) -> None:
        """One progress report: the bar and the readout; while the workload runs, a row on the charts."""
        share = p.elapsed_s / p.duration_s if p.duration_s else 0.0
        self.progress_bar.setValue(round(min(1.0, share) * 1000))
        self.progress_bar.setFormat(f"{min(1.0, share) * 100:.0f} % — {format_duration(p.remaining_s)} left"
                                    if p.phase == "running" else "Starting the workload…")
        parts = []
        if p.throughput is not None:
            parts.append(f"{p.throughput:.3g} {p.unit}")
        for value, unit in ((p.temperature_c, "°C"), (p.sm_clock_mhz, "MHz"), (p.power_w, "W")):
            if value is not None:
                parts.append(f"{value:.0f} {unit}")
        if p.errors:
            parts.append(f"{p.errors} errors")
        self.readout.setText("   ".join(parts))
        if p.phase != "running":
            return
        self.buffer.append(p.time_s, {"throughput": p.throughput, "sm_clock_mhz": p.sm_clock_mhz,
                                      "temperature_c": p.temperature_c, "power_w": p.power_w})
        times = self.buffer.times()
        for key, _title, _unit in LIVE:
            self.charts.plot(key).set_data(key, times, self.buffer.view(key))
        throughput_plot = self.charts.plot("throughput")
        if p.unit and throughput_plot.unit != p.unit:
            throughput_plot.unit = p.unit
            throughput_plot.show_readout(None)
        start = float(times[0]) if times.size else p.time_s
        self.charts.set_x_range(start, max(start + p.duration_s, p.time_s))

    def charts_png(self) -> bytes:
        """The charts as they are drawn now, as PNG (the exported run page shows them)."""
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        self.charts.grab().save(buffer, "PNG")
        return bytes(data.data())

    def apply_theme(self, theme: Theme) -> None:
        self.charts.apply_theme(theme)
