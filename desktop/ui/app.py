"""Wiring of the window: creates the sampler thread, recording, pages, alerts and tray, and connects them.

Nothing here is global: ``RigscopeApp`` receives the objects it wires (tests and the
screenshot script pass a simulated sampler, a temporary database, an injected tray). To add
a page, add one line to ``AppPages.add_to`` (desktop/ui/app_pages.py: how each page is made from the app's
parts, and when)::

    window.add_page("stress", "Stress test", self.stress)

On the simulated GPU there is one simulated machine (``SimulatedMachine``): the sampler thread
reads it, a stress run reads it through a second backend (``SimulatedBackend.view``), the
Dashboard's simulated workloads load it (``simulated_actions.py``), and "End process" ends its
simulated processes, so every page, alert and the recording see the same load, heat and processes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QApplication

from advisor.safetext import printable
from desktop import config
from desktop.config import Settings
from desktop.paths import default_db_path, demo_db_path
from desktop.telemetry.model import Snapshot
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend
from desktop.ui.alerts import Alert, AlertMonitor
from desktop.ui.app_pages import AppPages
from desktop.ui.main_window import MainWindow
from desktop.ui.pages.dashboard import DashboardPage
from desktop.ui.simulated_actions import SimulatedActions
from desktop.ui.theme import apply_theme, resolve
from desktop.ui.tray import Tray, app_icon
from desktop.ui.worker import SamplerThread

if TYPE_CHECKING:
    from desktop.reporting import HistorySource
    from desktop.sessions.recording import RecordingSession
    from desktop.stress.run_model import Clock
    from desktop.ui.pages.advisor_history import HistoryPage
    from desktop.ui.pages.jobs_page import JobsPage
    from desktop.ui.pages.processes import ProcessesPage
    from desktop.ui.pages.settings_page import SettingsPage
    from desktop.ui.pages.stress_modes import ModeCompare
    from desktop.ui.pages.stress_page import StressPage

log = logging.getLogger(__name__)


class RigscopeApp(QObject):
    """Owns the window and everything that feeds it; ``start()`` begins sampling, ``shutdown()`` ends all.

    ``stress_clock``: the Stress page's runs take time from it (tests pass an accelerated one);
    ``demo_path``: where "Load demo week" writes (default: the demo database of `rigscope demo`).
    """

    #: What the recording's tick reports (a write problem and its end, the database file replaced, the GPU gone
    #: and back), emitted on the sampler thread: shown in a banner on the GUI thread.
    recording_said = Signal(str)

    def __init__(self, qt_app: QApplication, sampler: Sampler, settings: Settings, recording: RecordingSession, *,
                 settings_path: Path | None = None, tray_available: bool | None = None,
                 end_process: Callable[[int, float | None], str | None] | None = None,
                 service: Callable[[bool], None] | None = None, db_path: Path | None = None,
                 stress_clock: Clock | None = None, demo_path: Path | None = None) -> None:
        super().__init__()
        self.qt_app = qt_app
        self.sampler = sampler
        self.settings = settings
        self.recording = recording
        gpu = sampler.gpu
        #: The simulated machine every page shares (None on real GPUs).
        self.machine = gpu.machine if isinstance(gpu, SimulatedBackend) else None
        if end_process is None and self.machine is not None:
            end_process = self.machine.end_process  # a simulated process is ended in the simulator
        self.theme = resolve(settings.appearance.theme)
        apply_theme(qt_app, self.theme)
        self.window = MainWindow(self.theme)
        self.window.setWindowIcon(app_icon())
        self.dashboard = DashboardPage(self.theme, settings.sampling.interval_s, history=recording.store)
        self.settings_path = settings_path
        self.db_path = db_path or default_db_path()
        #: The history the Advisor, Costs, History and Jobs pages read: the recorded one, or the demo week.
        self.history_path = self.db_path
        #: Where the Stress page's runs take time from (read when the page is built).
        self.stress_clock = stress_clock
        self._shown_store: Any | None = None
        self._history_source: HistorySource | None = None
        self.last_snapshot: Snapshot | None = None
        #: The window's pages, each made from this app's parts when first shown.
        self.pages = AppPages(self, end_process=end_process, service=service)
        self.pages.add_to(self.window, self.dashboard)
        #: The simulated bar's workloads and demo week (nothing on a real GPU).
        self.simulated = SimulatedActions(self.machine, self.dashboard, self.window, db_path=self.db_path,
                                          demo_path=demo_path or demo_db_path(), now_s=self._now_s,
                                          show_history=self.show_history, parent=self)
        self.demo_loader = self.simulated.demo_loader
        self.demo_progress = self.simulated.demo_progress
        self.alerts = AlertMonitor(settings.alerts)
        self.tray = Tray(tray_available)
        self.window.close_to_tray = self.tray.available
        # The one recording tick (desktop/recorder.py, as `rigscope record` runs it): sample, write, rollups and
        # retention, the stress-run calibrations; what it reports comes to the GUI thread as a banner.
        recording.start(sampler, report=self.recording_said.emit)
        self.recording_said.connect(self._say_recording, Qt.ConnectionType.AutoConnection)
        self.sampling = SamplerThread(recording.tick, settings.sampling.interval_s)
        self.fired: list[Alert] = []
        self._shut_down = False
        self.signal_timer: QTimer | None = None

        self.sampling.snapshot.connect(self.on_snapshot, Qt.ConnectionType.QueuedConnection)
        self.sampling.failed.connect(lambda text: self.window.show_banner(f"Sampling failed: {text}", "error"))
        self.window.quit_requested.connect(self.quit)
        self.window.closed.connect(self.quit)
        self.tray.quit_requested.connect(self.quit)
        self.tray.show_requested.connect(self.window.bring_to_front)
        self.window.set_source(sampler.gpu.source)
        self._recording_text = ""
        self.update_recording_status()
        if getattr(recording.store, "is_demo", False) is True:  # --db demo.sqlite: labelled on every page
            self.window.set_demo_shown(True)
        recovered = getattr(recording.writer, "recovered_from", None)
        if recovered is not None:  # said in the window, not only in a log the user never sees
            self.window.show_banner(f"The history database was damaged and was moved aside to {recovered}; "
                                    "recording continues in a fresh one.", "warning")

    # --- pages (made in app_pages.py) ----------------------------------------------
    @property
    def processes(self) -> ProcessesPage:
        return cast("ProcessesPage", self.window.page("processes"))

    @property
    def stress(self) -> StressPage:
        return cast("StressPage", self.window.page("stress"))

    @property
    def settings_page(self) -> SettingsPage:
        return cast("SettingsPage", self.window.page("settings"))

    @property
    def history_page(self) -> HistoryPage:
        return cast("HistoryPage", self.window.page("history"))

    @property
    def mode_compare(self) -> ModeCompare | None:
        """The Stress page's "Compare modes" (None before the page is built, or with fewer than two modes)."""
        return self.pages.mode_compare

    @property
    def history_source(self) -> HistorySource:
        """The history reader behind the Advisor, Costs and History pages (one, shared)."""
        if self._history_source is None:
            from desktop.reporting import HistorySource

            self._history_source = HistorySource(self.history_path, self.settings)
        return self._history_source

    def save_costs(self, costs: config.CostSettings) -> None:
        """The Costs page's inputs are settings too: keep them for the next start."""
        self.settings = replace(self.settings, costs=costs)
        self.history_source.settings = self.settings
        try:
            config.save(self.settings, self.settings_path)
        except OSError as exc:
            self.window.show_banner(f"Could not save the cost inputs: {exc.strerror or exc}", "warning")
            return
        if self.window.is_built("settings"):  # the Settings page shows the same price
            self.settings_page.settings = self.settings
            self.settings_page.revert()
        if self.window.is_built("history"):  # its cost part reads the same inputs
            self.history_page.inputs_changed()

    # --- the simulated machine (``SimulatedActions`` does the work) -------------------
    def _now_s(self) -> float:
        return self.last_snapshot.time_s if self.last_snapshot is not None else time.time()

    @property
    def demo_path(self) -> Path:
        """Where "Load demo week" writes (default: the demo database of `rigscope demo`)."""
        return self.simulated.demo_path

    @demo_path.setter
    def demo_path(self, path: Path) -> None:
        self.simulated.demo_path = path

    @property
    def demo_days(self) -> float:
        """How much simulated history "Load demo week" writes (a week; tests ask for less)."""
        return self.simulated.demo_days

    @demo_days.setter
    def demo_days(self, days: float) -> None:
        self.simulated.demo_days = days

    def start_workload(self, key: str) -> None:
        self.simulated.start_workload(key)

    def load_demo_week(self) -> None:
        self.simulated.load_demo_week()

    def show_history(self, path: Path) -> None:
        """Read the history at ``path`` (the demo week) on the Dashboard, Advisor, Costs, History and Jobs pages."""
        from desktop.history.store import HistoryStore

        if path == self.db_path:  # back from the demo: the recording's own reader (None before anything is recorded)
            store, opened = self.recording.store, None
        else:
            store = opened = HistoryStore.open(path, readonly=True)
        old, self._shown_store = self._shown_store, opened
        self.dashboard.set_history(store)
        if old is not None:
            self.dashboard.fill.wait(2.0)  # a read of the old store in flight ends before it closes
            old.close()
        self.history_path = path
        if self._history_source is not None:
            self._history_source.db_path = path
        if self.window.is_built("jobs"):
            cast("JobsPage", self.window.page("jobs")).show_history(path)
        for key in ("advisor", "costs", "history"):
            if self.window.is_built(key):
                self.window.page(key).refresh()

    # --- running --------------------------------------------------------------------
    def start(self, show: bool = True) -> None:
        self.restore_firmware_mode()
        self.sampling.start()
        if show:
            self.window.show()

    def restore_firmware_mode(self) -> None:
        """Put back a firmware mode a killed `stress --per-mode` (or comparison) left switched; say it in a banner."""
        from desktop.stress.mode_restore import restore_left_over

        def say(text: str) -> None:
            self.window.show_banner(printable(text[:1].upper() + text[1:]) + ".",
                                    "info" if text.startswith("restored") else "warning", key="firmware-mode")
        restore_left_over(say)

    def on_snapshot(self, snap: Snapshot) -> None:
        """GUI thread: feed the pages, the tray and the alert rules."""
        if self._shut_down:
            return
        self.last_snapshot = snap
        self.dashboard.add_snapshot(snap)
        self.pages.feed_processes(snap)  # the second snapshot builds the page, after the first frame
        self.tray.update(snap)
        self.update_recording_status()
        for alert in self.alerts.check(snap):
            self.fired.append(alert)
            # One alert per kind and GPU in the status bar's list: a repeat replaces it instead of pushing others out.
            self.window.show_banner(alert.message, alert.level, key=f"alert.{alert.kind}.{alert.gpu_uuid}")
            self.tray.notify("Rigscope alert", alert.message, error=alert.level == "error")
            self.recording.add_event(alert.time_s, f"alert.{alert.kind}", alert.message, alert.gpu_uuid)
        for kind, uuid in self.alerts.ended:  # "VRAM 100 % full" goes once it is not
            self.window.banners.clear_key(f"alert.{kind}.{uuid}")

    def reload_calibrations(self) -> None:
        """A stress run was saved: the recording's next tick reads each GPU's newest calibration (off the GUI
        thread) and the sampler estimates with it from then on."""
        if not self._shut_down:
            self.recording.reload_calibrations()

    def _say_recording(self, text: str) -> None:
        # Built from printable parts where it is made (the writer, the tick).
        self.window.show_banner(text[:1].upper() + text[1:], "warning", key="recording.file")

    def update_recording_status(self, now_s: float | None = None) -> None:
        """Recording / reading (who writes) / not recording (why), plus a write problem if any."""
        text, tip = self.recording.status_text(time.time() if now_s is None else now_s)
        if text != self._recording_text:  # set only on change: a label relayout per tick is waste
            self._recording_text = text
            self.window.set_recording(text, tip)

    def apply_settings(self, settings: Settings) -> None:
        self.settings = settings
        if self._history_source is not None:  # thresholds and prices for the next advice
            self._history_source.settings = settings
        self.alerts.update_settings(settings.alerts)
        # the writer's next rollup/retention pass
        self.recording.set_retention(settings.retention, settings.advisor.busy_util_pct)
        self.sampling.set_interval(settings.sampling.interval_s)
        self.sampler.process_period_s = settings.sampling.process_interval_s
        if self.window.is_built("stress"):  # the next run is judged with the threshold Settings give now
            self.stress.regression_pct = settings.advisor.stress_regression_pct
        theme = resolve(settings.appearance.theme)
        if theme != self.theme:
            self.theme = theme
            apply_theme(self.qt_app, theme)
            self.window.apply_theme(theme)

    def quit(self) -> None:
        self.shutdown()
        self.qt_app.quit()

    def shutdown(self) -> None:
        """Stop sampling, flush and close recording, remove the tray icon; idempotent."""
        if self._shut_down:
            return
        self._shut_down = True
        self.sampling.stop()
        if self.signal_timer is not None:
            self.signal_timer.stop()
        if self.window.is_built("stress"):
            self.stress.shutdown()
        compare = self.mode_compare
        if compare is not None:
            compare.shutdown()  # a comparison cut short by quitting puts the mode it found back
        if self.window.is_built("fleet"):  # no more reads; one in flight is left to its (daemon) thread
            self.window.page("fleet").page_hidden()
        self.dashboard.shutdown()  # stops repainting; a history read ends before the store closes
        self.simulated.shutdown()  # a demo week half written is replaced by the next one
        if self._shown_store is not None:
            self._shown_store.close()
            self._shown_store = None
        self.recording.close()
        self.tray.close()
        self.window.close_to_tray = False
        self.window.hide()
        self.sampler.close()
