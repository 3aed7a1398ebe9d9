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

The page puts together widgets with one job each: ``StressControls`` (desktop/ui/widgets/stress_controls.py:
the presets, workload, precision, the GPU picker with several GPUs, and one button that starts the preset shown
selected beside it; Ctrl+Enter, Escape cancels), ``StressLive`` (widgets/stress_live.py: progress, readout,
live charts, and before the first run of the session an explanation instead of four empty plots),
``VerdictCard`` and ``EarlierRuns`` (widgets/stress_runs.py: the stored runs, read again while shown). Here:
the run's sequence on the GUI side (start, hold, cancel, judged) and the export of a finished run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QFileDialog, QVBoxLayout, QWidget

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
from desktop.stress.run_model import RunResult, StressConfig
from desktop.stress.runner import StressRunner
from desktop.ui.background import Loader
from desktop.ui.pages.base import PageWidget
from desktop.ui.stress_work import FinishedRun, StressWorker, finish_on_worker
from desktop.ui.theme import Theme
from desktop.ui.widgets.stress_controls import DEFAULT_PRESET, StressControls
from desktop.ui.widgets.stress_live import StressLive
from desktop.ui.widgets.stress_runs import EarlierRuns
from desktop.ui.widgets.stress_verdict_card import VerdictCard

START_SHORTCUT = "Ctrl+Return"
#: How long quitting waits for a run being stored.
SHUTDOWN_WAIT_S = 5.0


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
        #: The stored runs the last verdict compared this run with.
        self.earlier: list[StressResult] = []
        #: Judges and stores a finished run.
        self.judging = Loader(self, name="stress-judge")
        self._build()
        self._set_running(False)
        if device == "sim":
            self.controls.workload.setToolTip("The simulated GPU models GEMM throughput only")
        self.earlier_runs.refresh()

    # --- layout -------------------------------------------------------------------------
    def _build(self) -> None:
        layout = QVBoxLayout(self)
        #: Which test (preset, workload, precision, GPU), the start button and Cancel.
        self.controls = StressControls(self.gpus)
        self.controls.preset_changed.connect(self._label_start)
        self.controls.one_click.clicked.connect(self.start)
        self.controls.cancel_button.clicked.connect(self.cancel)
        layout.addWidget(self.controls)
        for sequence, slot in ((START_SHORTCUT, self.start), ("Esc", self.cancel)):
            shortcut = QShortcut(QKeySequence(sequence), self)
            shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(slot)

        #: The run as it goes: progress bar, readout, live charts (before the first run, what they will show).
        self.live = StressLive(self.theme)
        self._label_start()
        layout.addWidget(self.live, 3)

        self.verdict_card = VerdictCard(self.theme)
        self.verdict_card.export_requested.connect(self._export_dialog)
        #: The card's title and sentence (what the window and the tests read).
        self.verdict_title, self.verdict_text = self.verdict_card.title, self.verdict_card.text
        layout.addWidget(self.verdict_card)

        #: The stored runs (read again while shown); before this session's first run the card names the newest.
        self.earlier_runs = EarlierRuns(self.db_path, self.read_runs, lambda: self.running)
        self.earlier_runs.shown.connect(lambda runs: self.verdict_card.show_idle(runs[0] if runs else None))
        layout.addWidget(self.earlier_runs, 1)
        self.verdict_card.show_idle(None)
        self._style_controls()

    def _label_start(self) -> None:
        label = self.controls.preset()[0]
        self.controls.one_click.setText(f"Start {label} test")
        shortcut = QKeySequence(START_SHORTCUT).toString(QKeySequence.SequenceFormat.NativeText)
        self.controls.one_click.setToolTip(f"Run the {label} test now ({shortcut}); Esc cancels it")
        self.live.empty_state.setText(
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
    def selected_request(self, duration_s: float | None = None) -> StressRequest:
        """What the controls ask for; the session resolves the device and the GPU index from it, once."""
        controls = self.controls
        precision = controls.precision.currentText()
        return StressRequest(workload=controls.workload.currentText(), device=self.device,
                             gpu_index=controls.selected_gpu(), dtype=None if precision == "default" else precision,
                             duration_s=duration_s if duration_s is not None else controls.preset()[1],
                             db_path=self.db_path)

    def selected_config(self, duration_s: float | None = None) -> StressConfig:
        """The config the session runs for the controls' request."""
        request = self.selected_request(duration_s)
        return stress_config(request, resolve_device(request.device, request.gpu_index), self.settings)

    def start_sustained(self) -> None:
        """The one-click test from elsewhere (the tray): Sustained 10 min with the chosen workload and precision."""
        self.controls.select_preset(DEFAULT_PRESET)
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
        self.result = self.verdict = None
        self.run_id = None
        self.session = session
        self.worker = StressWorker(session, self)
        self.worker.progress.connect(self.live.show_progress)
        self.worker.started_on.connect(self.live.show_limits)
        self.worker.done.connect(self._on_done)
        self.worker.failed.connect(self._on_failed)
        self.worker.refused.connect(self._on_refused)
        self._set_running(True)
        self.live.begin()
        self.verdict_card.show_running(f"{config.workload} on {self._gpu_name(config)}, "
                                       f"{format_duration(config.duration_s)}")
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
            self.live.progress_bar.setFormat(reason)

    def set_unavailable(self, message: str) -> None:
        """Explain why no test can run here (e.g. PyTorch is missing) and disable starting one."""
        self.verdict_card.show_unavailable(message)
        self.controls.set_unavailable(message)

    def shutdown(self) -> None:
        """Stop a running test and wait for it, and for a run being stored (the app calls this on quit)."""
        self.earlier_runs.timer.stop()
        if self.worker is not None:
            self.worker.cancel()
            self.worker.wait(5000)
        self.judging.wait(SHUTDOWN_WAIT_S)

    def _set_running(self, running: bool) -> None:
        # The simulated GPU models GEMM throughput only.
        self.controls.set_busy(running or self._held is not None, workload_fixed=self.device == "sim")

    def _on_done(self, result: RunResult) -> None:
        self._finish_worker(idle=False)  # busy until judged and stored
        self.result = result
        self.live.progress_bar.setFormat("Judging and saving the run…")
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
        bar = self.live.progress_bar
        bar.setValue(1000 if not result.aborted else bar.value())
        bar.setFormat("Done" if not result.aborted else f"Stopped: {result.message}")
        line = result.extra.get("power_limit_line")
        self.verdict_card.show_verdict(done.verdict, line if isinstance(line, str) else None, result.gpu)
        if done.save_error:  # the verdict stays; the page says it is not in the history
            self.live.readout.setText(done.save_error)
        if done.runs_error:
            self.earlier_runs.failed(done.runs_error)
        else:
            self.earlier_runs.show_runs(done.runs)
        self.judged.emit(done)
        self.finished.emit(done.verdict)

    def _on_judge_failed(self, message: str) -> None:
        self._set_running(False)
        self.live.progress_bar.setFormat("Not judged")
        self.verdict_card.show_message("The run could not be judged", message)

    def _on_failed(self, message: str) -> None:
        self._finish_worker()
        self.verdict_card.show_message("The test failed", message)

    def _on_refused(self, message: str) -> None:
        self._finish_worker()
        self.live.progress_bar.setFormat("Not started")
        self.verdict_card.show_message("Cannot run the test", message[:1].upper() + message[1:])

    def _finish_worker(self, idle: bool = True) -> None:
        if self.worker is not None:
            self.worker.wait(5000)
            self.worker.deleteLater()
            self.worker = None
        if idle:
            self._set_running(False)

    @property
    def loading(self) -> bool:
        """The table of earlier runs is being read."""
        return self.earlier_runs.loading

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
        path.write_text(run_html(self.result, self.verdict, self.live.charts_png()), encoding="utf-8")

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        self.live.apply_theme(theme)
        self.verdict_card.apply_theme(theme, self.verdict)
        self._style_controls()

