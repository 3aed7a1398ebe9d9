"""The Stress page: one click runs a sustained-load test, with live charts, a verdict card and earlier runs.

The runner runs on a worker QThread (it blocks); its progress callback crosses to the GUI
by a queued signal. The torch work happens in the runner's child process: nothing here
imports torch or the workloads. The history database is read and written off the GUI thread
too (``background.Loader``): the table of earlier runs, and judging a finished run against
them and storing it (``StressSession.finish``, as `rigscope stress` does). Start builds a ``StressSession``
(desktop/sessions/stress.py) from the controls; it owns the run's sequence, from the device to the outcome.
Dependencies come in explicitly: ``make_runner(config)`` builds a ``StressRunner`` for the session's checked
config (the app gives the session's ``window_runners`` over its backend; tests an accelerated simulated clock),
``device`` is the session's ``device_for`` that backend, ``settings`` are the stress settings the session puts
in that config (the guard), ``regression_pct`` the advisor's threshold the session judges with, and ``db_path``
is where runs are saved and earlier runs come from.

One button starts the test, with the preset shown selected beside it (Ctrl+Enter; Escape
cancels). Before the first run of the session the chart area explains itself instead of
showing four empty plots. With several GPUs (``gpus``: NVML index and name, as the app lists
them) a picker chooses which one; the config carries its index.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt, QTimer, Signal
from PySide6.QtGui import QHideEvent, QKeySequence, QShortcut, QShowEvent
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from advisor.baseline import QUICK_S, SUSTAINED_S
from advisor.frame import StressResult
from advisor.thresholds import Thresholds
from advisor.verdict import Verdict
from advisor.verdict_text import format_duration
from desktop.config import StressSettings
from desktop.errors import UserError
from desktop.sessions.stress import StressRequest, StressSession, list_runs, stress_config
from desktop.sessions.stress_device import resolve_device
from desktop.stress.portable import record_from_stress, write_record
from desktop.stress.report import run_html
from desktop.stress.run_model import Progress, RunResult, StressConfig
from desktop.stress.runner import StressRunner
from desktop.telemetry.model import GpuInfo
from desktop.ui.background import Loader
from desktop.ui.pages.base import PageWidget
from desktop.ui.stress_work import FinishedRun, StressWorker, finish_on_worker
from desktop.ui.theme import Theme
from desktop.ui.widgets.plot_column import PlotColumn
from desktop.ui.widgets.ring_buffer import RingBuffer
from desktop.ui.widgets.stress_runs import RunsTable
from desktop.ui.widgets.stress_verdict_card import VerdictCard

log = logging.getLogger(__name__)

PRESETS: tuple[tuple[str, float], ...] = (("Quick 2 min", QUICK_S), ("Sustained 10 min", SUSTAINED_S),
                                          ("Soak 30 min", 1800.0))
WORKLOADS = ("gemm", "bandwidth", "train", "infer")
PRECISIONS = ("default", "bf16", "fp16", "tf32", "fp32")
_LIVE = ("throughput", "sm_clock_mhz", "temperature_c", "power_w")
#: The least y span of each live chart (absolute, and as a share of the value): sensor noise of a
#: degree or a few MHz stays a flat line instead of filling the plot.
MIN_SPANS: dict[str, tuple[float, float]] = {"throughput": (0.0, 0.2), "sm_clock_mhz": (300.0, 0.0),
                                             "temperature_c": (10.0, 0.0), "power_w": (20.0, 0.0)}
DEFAULT_PRESET = 1
START_SHORTCUT = "Ctrl+Return"
#: How long quitting waits for a run being stored.
SHUTDOWN_WAIT_S = 5.0
#: While the page is shown, how often it reads the stored runs again: a run that `rigscope stress` (or
#: another window) saved meanwhile appears in "Earlier runs" without a restart.
RUNS_RELOAD_S = 5.0


class StressPage(PageWidget):
    """Presets, workload and precision, Start/Cancel, live charts, the verdict and the history of runs."""

    finished = Signal(object)  # the Verdict, once judged and saved
    judged = Signal(object)  # the FinishedRun (verdict, stored id, why not stored), just before ``finished``
    cancelled = Signal()  # Cancel pressed (or Escape), with or without a run under way

    def __init__(self, theme: Theme, make_runner: Callable[[StressConfig], StressRunner], *,
                 db_path: Path | None = None, device: str = "sim", parent: QWidget | None = None,
                 read_runs: Callable[[Path | None], list[StressResult]] = list_runs,
                 gpus: Sequence[tuple[int, str]] = (), settings: StressSettings | None = None,
                 regression_pct: float = Thresholds.stress_regression_pct) -> None:
        super().__init__(parent)
        #: Settings' [stress] section: the session's guard offset and absolute guard temperature (None: defaults).
        self.settings = settings
        #: The advisor's stress-regression threshold the session judges with (the app keeps it as Settings say).
        self.regression_pct = regression_pct
        #: The session of the run under way or being judged (None before the first run).
        self.session: StressSession | None = None
        #: The GPUs to choose from (NVML index, name); the picker shows only with more than one.
        self.gpus = tuple(gpus)
        self.theme = theme
        self.make_runner = make_runner
        self.db_path = db_path
        #: The database side, called on worker threads (tests pass slow or failing ones).
        self.read_runs = read_runs
        self.device = device
        self.worker: StressWorker | None = None
        #: Why Start is held off between runs (``hold``); None: it is not.
        self._held: str | None = None
        self.result: RunResult | None = None
        self.verdict: Verdict | None = None
        self.run_id: int | None = None
        self.earlier: list[StressResult] = []
        self.runs: list[StressResult] = []
        self._buffer = RingBuffer(4000, _LIVE)
        #: Reads the table of earlier runs; ``judging`` judges and stores a finished run.
        self.runs_loader = Loader(self, name="stress-runs")
        self.judging = Loader(self, name="stress-judge")
        #: Reads the stored runs again while the page is shown (other processes store runs too).
        self.runs_timer = QTimer(self)
        self.runs_timer.setInterval(round(RUNS_RELOAD_S * 1000))
        self.runs_timer.timeout.connect(self.reload_runs)
        self._build()
        self._set_running(False)
        if device == "sim":
            self.workload.setToolTip("The simulated GPU models GEMM throughput only")
        self.refresh_table()

    # --- layout -------------------------------------------------------------------------
    def _build(self) -> None:
        layout = QVBoxLayout(self)
        controls = QHBoxLayout()
        controls.addWidget(QLabel("Test"))
        self.presets = QButtonGroup(self)
        for i, (label, _seconds) in enumerate(PRESETS):
            button = QPushButton(label)
            button.setObjectName("preset")
            button.setCheckable(True)
            button.setChecked(i == DEFAULT_PRESET)
            self.presets.addButton(button, i)
            controls.addWidget(button)
        self.presets.idToggled.connect(lambda _id, _on: self._label_start())
        self.workload = QComboBox()
        self.workload.addItems(list(WORKLOADS))
        self.precision = QComboBox()
        self.precision.addItems(list(PRECISIONS))
        for label, box in (("Workload", self.workload), ("Precision", self.precision)):
            controls.addWidget(QLabel(label))
            controls.addWidget(box)
        self.gpu_label = QLabel("GPU")
        self.gpu_combo = QComboBox()
        for index, name in self.gpus:
            self.gpu_combo.addItem(f"GPU {index}: {name}", index)
        for widget in (self.gpu_label, self.gpu_combo):
            controls.addWidget(widget)
            widget.setVisible(len(self.gpus) > 1)
        controls.addStretch(1)
        # The one way to start: it runs the preset shown selected to its left.
        self.one_click = QPushButton()
        self.one_click.setObjectName("oneClick")
        self.one_click.clicked.connect(self.start)
        self.start_button = self.one_click
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        controls.addWidget(self.one_click)
        controls.addWidget(self.cancel_button)
        self._controls = controls
        layout.addLayout(controls)
        for sequence, slot in ((START_SHORTCUT, self.start), ("Esc", self.cancel)):
            shortcut = QShortcut(QKeySequence(sequence), self)
            shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(slot)

        status = QHBoxLayout()
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 1000)
        self.progress_bar.setFormat("Ready")
        self.progress_bar.hide()  # until the first run: an empty bar says nothing
        self.live_label = QLabel("")
        self.live_label.setTextFormat(Qt.TextFormat.PlainText)  # it may show a database path
        status.addWidget(self.progress_bar, 2)
        status.addWidget(self.live_label, 3)
        layout.addLayout(status)

        self.charts = PlotColumn(self.theme)
        for key, title, unit in (("throughput", "Throughput", ""), ("sm_clock_mhz", "SM clock", "MHz"),
                                 ("temperature_c", "Temperature", "°C"), ("power_w", "Power", "W")):
            plot = self.charts.add_plot(key, title, unit)
            plot.add_series(key, title)
            plot.set_min_span(*MIN_SPANS[key])
        # Before the first run: what the charts will show, not four empty 0-1 plots.
        self.empty_state = QLabel()
        self.empty_state.setObjectName("stressEmpty")
        self.empty_state.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_state.setWordWrap(True)
        self.chart_area = QStackedWidget()
        self.chart_area.addWidget(self.empty_state)
        self.chart_area.addWidget(self.charts)
        self._label_start()
        layout.addWidget(self.chart_area, 3)

        self.verdict_card = VerdictCard(self.theme)
        self.verdict_card.export_requested.connect(self._export_dialog)
        #: The card's title and sentence (what the window and the tests read).
        self.verdict_title, self.verdict_text = self.verdict_card.title, self.verdict_card.text
        layout.addWidget(self.verdict_card)

        self.runs_title = QLabel("Earlier runs")
        self.runs_title.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(self.runs_title)
        self.table = RunsTable()
        layout.addWidget(self.table, 1)
        self.verdict_card.show_idle(None)
        self._style_controls()

    def add_control(self, widget: QWidget) -> None:
        """Another control before the start button (the "Compare modes" menu: desktop/ui/pages/stress_modes.py)."""
        self._controls.insertWidget(self._controls.indexOf(self.one_click), widget)

    @property
    def charts_shown(self) -> bool:
        """The live charts are in view (from the first run of the session on); else the empty state."""
        return self.chart_area.currentWidget() is self.charts

    def _preset(self) -> tuple[str, float]:
        return PRESETS[max(0, self.presets.checkedId())]

    def _label_start(self) -> None:
        label = self._preset()[0]
        self.one_click.setText(f"Start {label} test")
        shortcut = QKeySequence(START_SHORTCUT).toString(QKeySequence.SequenceFormat.NativeText)
        self.one_click.setToolTip(f"Run the {label} test now ({shortcut}); Esc cancels it")
        self.empty_state.setText(
            f"No test has run in this session.\n\nPress “Start {label} test” ({shortcut}) to load the GPU and "
            "watch its throughput, SM clock, temperature and power here as it runs; a verdict follows at the end.")

    def _style_controls(self) -> None:
        """The selected preset and the start button stand out in either theme."""
        t = self.theme
        on_accent = "#000000" if t.dark else "#ffffff"
        self.setStyleSheet(
            f"QPushButton#preset {{ padding: 3px 10px; border: 1px solid {t.border}; border-radius: 3px; }}"
            f"QPushButton#preset:checked {{ background: {t.accent}; color: {on_accent};"
            f" border: 1px solid {t.accent}; }}"
            f"QPushButton#oneClick {{ background: {t.accent}; color: {on_accent}; font-weight: bold;"
            f" padding: 4px 14px; border: 1px solid {t.accent}; border-radius: 3px; }}"
            f"QPushButton#oneClick:disabled {{ background: {t.window}; color: {t.muted};"
            f" border: 1px solid {t.border}; }}"
            f"QLabel#stressEmpty {{ color: {t.muted}; font-size: 12pt; border: 1px dashed {t.border};"
            f" border-radius: 4px; padding: 24px; }}")

    # --- running ------------------------------------------------------------------------
    def selected_gpu(self) -> int:
        """The NVML index of the GPU to test: the picker's choice, the only GPU listed, or 0."""
        data = self.gpu_combo.currentData()
        if data is not None:
            return int(data)
        return self.gpus[0][0] if self.gpus else 0

    def selected_request(self, duration_s: float | None = None) -> StressRequest:
        """What the controls ask for; the session resolves the device and the GPU index from it, once."""
        precision = self.precision.currentText()
        return StressRequest(workload=self.workload.currentText(), device=self.device, gpu_index=self.selected_gpu(),
                             dtype=None if precision == "default" else precision,
                             duration_s=duration_s if duration_s is not None else self._preset()[1],
                             db_path=self.db_path)

    def selected_config(self, duration_s: float | None = None) -> StressConfig:
        """The config the session runs for the controls' request."""
        request = self.selected_request(duration_s)
        return stress_config(request, resolve_device(request.device, request.gpu_index), self.settings)

    def start_sustained(self) -> None:
        """The one-click test from elsewhere (the tray): Sustained 10 min with the chosen workload and precision."""
        self.presets.button(DEFAULT_PRESET).setChecked(True)
        self.start()

    def start(self) -> None:
        if self.running or self._held is not None:
            return
        # No device lock on the window's simulated GPU: loads other processes put on it add up (shared.py).
        session = StressSession(self.selected_request(), make_runner=self.make_runner, settings=self.settings,
                                lock_simulated=False, regression_pct=self.regression_pct)
        try:
            config = session.config
            session.prepare()
        except (UserError, ValueError) as exc:  # a request the device cannot run, or no backend to run it on
            self.verdict_card.show_message("Cannot start", str(exc))
            return
        self._buffer.clear()
        self.result = self.verdict = None
        self.run_id = None
        self.session = session
        self.worker = StressWorker(session, self)
        self.worker.progress.connect(self._on_progress)
        self.worker.started_on.connect(self._on_started)
        self.worker.done.connect(self._on_done)
        self.worker.failed.connect(self._on_failed)
        self.worker.refused.connect(self._on_refused)
        self._set_running(True)
        self.chart_area.setCurrentWidget(self.charts)
        self.progress_bar.show()
        self.verdict_card.show_running(f"{config.workload} on {self._gpu_name(config)}, "
                                       f"{format_duration(config.duration_s)}")
        self.live_label.setText("")
        self.worker.start()

    def _gpu_name(self, config: StressConfig) -> str:
        names = dict(self.gpus)
        if len(self.gpus) > 1 and config.gpu_index in names:
            return f"GPU {config.gpu_index} ({names[config.gpu_index]})"
        return config.device

    @property
    def running(self) -> bool:
        """A test runs, or the last one is being judged and stored."""
        return (self.worker is not None and self.worker.isRunning()) or self.judging.busy

    def cancel(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
        self.cancelled.emit()

    def hold(self, reason: str | None) -> None:
        """Keep Start off (Cancel on) while something prepares the next run on the page ("Compare modes" cooling
        the GPU down), saying ``reason`` in the progress bar; None lets go."""
        if reason is None and self._held is None:
            return  # nothing held: leave the controls as they are (a page set unavailable stays so)
        self._held = reason
        self._set_running(self.running)
        if reason is not None:
            self.progress_bar.setFormat(reason)

    def set_unavailable(self, message: str) -> None:
        """Explain why no test can run here (e.g. PyTorch is missing) and disable starting one."""
        self.verdict_card.show_unavailable(message)
        for button in (self.one_click, self.start_button):
            button.setEnabled(False)
            button.setToolTip(message)

    def shutdown(self) -> None:
        """Stop a running test and wait for it, and for a run being stored (the app calls this on quit)."""
        self.runs_timer.stop()
        if self.worker is not None:
            self.worker.cancel()
            self.worker.wait(5000)
        self.judging.wait(SHUTDOWN_WAIT_S)

    def _set_running(self, running: bool) -> None:
        busy = running or self._held is not None
        for widget in (self.one_click, self.precision, self.gpu_combo, *self.presets.buttons()):
            widget.setEnabled(not busy)
        # The simulated GPU models GEMM throughput only.
        self.workload.setEnabled(not busy and self.device != "sim")
        self.cancel_button.setEnabled(busy)

    def _on_started(self, info: GpuInfo | None, guard_c: float | None) -> None:
        """Draw the device's own limits: max clock, slowdown and guard temperature, power limit."""
        clock, temp, power = (self.charts.plot(k) for k in ("sm_clock_mhz", "temperature_c", "power_w"))
        clock.set_limit("max", info.sm_clock_max_mhz if info else None, "max")
        temp.set_limit("slowdown", info.temp_slowdown_c if info else None, "slowdown")
        temp.set_limit("guard", guard_c, "guard")
        power.set_limit("limit", info.power_limit_enforced_w if info else None, "power limit")

    def _on_progress(self, p: Progress) -> None:
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
        self.live_label.setText("   ".join(parts))
        if p.phase != "running":
            return
        self._buffer.append(p.time_s, {"throughput": p.throughput, "sm_clock_mhz": p.sm_clock_mhz,
                                       "temperature_c": p.temperature_c, "power_w": p.power_w})
        times = self._buffer.times()
        for key in _LIVE:
            self.charts.plot(key).set_data(key, times, self._buffer.view(key))
        throughput_plot = self.charts.plot("throughput")
        if p.unit and throughput_plot.unit != p.unit:
            throughput_plot.unit = p.unit
            throughput_plot.show_readout(None)
        start = float(times[0]) if times.size else p.time_s
        self.charts.set_x_range(start, max(start + p.duration_s, p.time_s))

    def _on_done(self, result: RunResult) -> None:
        self._finish_worker(idle=False)  # busy until judged and stored
        self.result = result
        self.progress_bar.setFormat("Judging and saving the run…")
        session, read_runs = self.session, self.read_runs
        assert session is not None
        self.judging.run(lambda: finish_on_worker(session, result, read_runs), self._on_judged,
                         self._on_judge_failed)

    def _on_judged(self, done: FinishedRun) -> None:
        result = self.result
        assert result is not None
        self.earlier = done.earlier
        self.verdict = done.verdict
        self.run_id = done.run_id
        self._set_running(False)
        self.progress_bar.setValue(1000 if not result.aborted else self.progress_bar.value())
        self.progress_bar.setFormat("Done" if not result.aborted else f"Stopped: {result.message}")
        line = result.extra.get("power_limit_line")
        self.verdict_card.show_verdict(done.verdict, line if isinstance(line, str) else None, result.gpu)
        if done.save_error:  # the verdict stays; the page says it is not in the history
            self.live_label.setText(done.save_error)
        if done.runs_error:
            self._runs_failed(done.runs_error)
        else:
            self._show_runs(done.runs)
        self.judged.emit(done)
        self.finished.emit(done.verdict)

    def _on_judge_failed(self, message: str) -> None:
        self._set_running(False)
        self.progress_bar.setFormat("Not judged")
        self.verdict_card.show_message("The run could not be judged", message)

    def _on_failed(self, message: str) -> None:
        self._finish_worker()
        self.verdict_card.show_message("The test failed", message)

    def _on_refused(self, message: str) -> None:
        self._finish_worker()
        self.progress_bar.setFormat("Not started")
        self.verdict_card.show_message("Cannot run the test", message[:1].upper() + message[1:])

    def _finish_worker(self, idle: bool = True) -> None:
        if self.worker is not None:
            self.worker.wait(5000)
            self.worker.deleteLater()
            self.worker = None
        if idle:
            self._set_running(False)

    # --- history -------------------------------------------------------------------------
    def refresh_table(self) -> None:
        """Read the stored runs on a worker thread; the table shows them when they arrive."""
        if self.db_path is None:
            self._show_runs([])
            return
        self.runs_title.setText("Earlier runs: reading…")
        db_path, read_runs = self.db_path, self.read_runs
        self.runs_loader.run(lambda: read_runs(db_path), self._show_runs, self._runs_failed)

    def reload_runs(self) -> None:
        """Read the stored runs again (the page shown, or its timer while shown); the table changes only when the
        stored runs did, and a run under way or being stored is left alone (it refreshes the table itself)."""
        if self.db_path is None or self.runs_loader.busy or self.running:
            return
        db_path, read_runs = self.db_path, self.read_runs
        self.runs_loader.run(lambda: read_runs(db_path), self._runs_reloaded,
                             lambda error: log.warning("cannot list stress runs: %s", error))

    def _runs_reloaded(self, runs: Sequence[StressResult]) -> None:
        if [r.run_id for r in runs] != [r.run_id for r in self.runs]:
            self._show_runs(runs)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.reload_runs()
        self.runs_timer.start()

    def hideEvent(self, event: QHideEvent) -> None:
        # Another page, the window closed or hidden in the tray: nobody looks at the table.
        self.runs_timer.stop()
        super().hideEvent(event)

    @property
    def loading(self) -> bool:
        """The table of earlier runs is being read."""
        return self.runs_loader.busy

    def _runs_failed(self, error: str) -> None:
        # The table is a convenience; never let it break the page.
        log.warning("cannot list stress runs: %s", error)
        self.runs_title.setText(f"Earlier runs: could not be read ({error})")

    def _show_runs(self, runs: Sequence[StressResult]) -> None:
        self.runs = list(runs)
        self.runs_title.setText("Earlier runs" if runs else "Earlier runs: none stored yet")
        self.table.show_runs(runs)
        self.verdict_card.show_idle(self.runs[0] if self.runs else None)

    # --- export -------------------------------------------------------------------------
    def _export_dialog(self, kind: str) -> None:
        caption = ("Export the run record (for rigscope compare; an HTML page is written beside it)" if kind == "json"
                   else f"Export the run as {kind.upper()}")
        path, _filter = QFileDialog.getSaveFileName(self, caption, f"rigscope-stress.{kind}",
                                                    f"{kind.upper()} (*.{kind})")
        if path:
            (self.export_html if kind == "html" else self.export_json)(Path(path))

    def export_json(self, path: Path) -> Path:
        """The portable run record ``rigscope stress -o FILE`` writes (``rigscope compare`` and the Compare dialog read
        it), and the HTML page beside it (same name, .html); returns the page's path."""
        if self.result is None or self.verdict is None:
            raise ValueError("no finished run to export")
        write_record(path, record_from_stress(self.result, self.verdict))
        page = path.with_suffix(".html") if path.suffix.lower() != ".html" else path.with_name(path.name + ".html")
        self.export_html(page)
        return page

    def export_html(self, path: Path) -> None:
        if self.result is None or self.verdict is None:
            raise ValueError("no finished run to export")
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        self.charts.grab().save(buffer, "PNG")
        path.write_text(run_html(self.result, self.verdict, bytes(data.data())), encoding="utf-8")

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        self.charts.apply_theme(theme)
        self.verdict_card.apply_theme(theme, self.verdict)
        self._style_controls()

