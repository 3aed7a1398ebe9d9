"""What the Dashboard's simulated bar does on the window's one simulated machine: start and stop simulated
workloads on the GPU the Dashboard shows, and "Load demo week" (the demo database written on a worker
thread, then shown in the window).

``RigscopeApp`` builds one ``SimulatedActions`` and passes it what it needs: the machine (None on a real
GPU, where every action does nothing), the window's clock and how to show another history.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal

from desktop.telemetry.simulated import SimulatedMachine
from desktop.ui.background import Loader
from desktop.ui.main_window import MainWindow
from desktop.ui.pages.dashboard import DashboardPage


class SimulatedActions(QObject):
    """The simulated bar's workloads and demo week, connected to the bar when built.

    ``db_path``: the history this window records into (the demo week never goes there);
    ``demo_path``: where "Load demo week" writes; ``now_s``: the window's clock (the newest reading's
    time); ``show_history(path)``: shows the history at ``path`` on the pages that read one, raising
    when it cannot be read.
    """

    #: The demo week's writer says how far it is (from its worker thread): fraction, step.
    demo_progress = Signal(float, str)

    def __init__(self, machine: SimulatedMachine | None, dashboard: DashboardPage, window: MainWindow, *,
                 db_path: Path, demo_path: Path, now_s: Callable[[], float],
                 show_history: Callable[[Path], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.machine = machine
        self.dashboard = dashboard
        self.window = window
        self.db_path = db_path
        self.demo_path = demo_path
        #: How much simulated history "Load demo week" writes (a week; tests ask for less).
        self.demo_days = 7.0
        self._now_s = now_s
        self._show_history = show_history
        self.demo_loader = Loader(self, name="demo-week")
        bar = dashboard.simulated_bar
        bar.workload_requested.connect(self.start_workload)
        bar.stop_requested.connect(self.stop_workloads)
        bar.demo_requested.connect(self.load_demo_week)
        bar.leave_demo_requested.connect(self.leave_demo)
        bar.envelope_requested.connect(self.set_envelope)
        bar.envelope_button.setVisible(machine is not None and machine.laptop)
        self.demo_progress.connect(bar.demo_progress, Qt.ConnectionType.QueuedConnection)

    def start_workload(self, key: str) -> None:
        """Run a simulated workload on the GPU the Dashboard shows (the first when all are shown)."""
        if self.machine is None:
            return
        gpu = self.dashboard.chosen_gpu or 0
        try:
            workload = self.machine.start_workload(key, gpu, now_s=self._now_s())
        except ValueError as exc:
            self.window.show_banner(f"Could not start the simulated workload: {exc}", "warning")
            return
        # The process list is polled every few seconds; say at once that it started.
        self.dashboard.simulated_bar.text.setText(f"Starting {workload.command} on simulated GPU {gpu}…")

    def set_envelope(self, what: str, value: str) -> None:
        """The simulated laptop unplugged or plugged in, nvidia-powerd stopped or started, its mode switched."""
        if self.machine is None:
            return
        try:
            if what == "on_ac":
                self.machine.set_envelope(on_ac=value == "1")
            elif what == "powerd":
                self.machine.set_envelope(powerd_running=value == "1")
            elif what == "mode":
                self.machine.set_envelope(shift_mode=value)
        except ValueError as exc:
            self.window.show_banner(f"Could not change the simulated laptop: {exc}", "warning")

    def stop_workloads(self) -> None:
        if self.machine is not None and self.machine.stop_workloads():
            self.dashboard.simulated_bar.text.setText("Stopping the simulated workloads…")

    def load_demo_week(self) -> None:
        """Write a simulated week into the demo database on a worker thread, then show it."""
        if self.machine is None or self.demo_loader.busy:
            return
        path = self.demo_path
        if path.resolve() == self.db_path.resolve():
            self.window.show_banner(f"This window records into {path}: the demo week goes into a separate "
                                    "database. Start Rigscope with another --db to load it.", "warning")
            return
        from desktop.jobs.demo_jobs import write_demo_week  # the week with its jobs, as `rigscope demo` writes it

        profiles = list(self.machine.profiles)
        end_s, days = self._now_s(), self.demo_days
        self.dashboard.simulated_bar.demo_started()
        progress = self.demo_progress.emit
        self.demo_loader.run(lambda: write_demo_week(path, profiles, days=days, now_s=end_s, progress=progress),
                             lambda _summary: self._demo_written(path), self._demo_failed)

    def _demo_written(self, path: Path) -> None:
        self.dashboard.simulated_bar.demo_finished(f"The demo week was written to {path}")
        try:
            self._show_history(path)
        except Exception as exc:  # a file that vanished or cannot be read: said, not raised
            self.window.show_banner(f"The demo week was written to {path} but cannot be read: {exc}", "error")
            return
        self.dashboard.set_window("7 d")
        self.dashboard.simulated_bar.set_demo_shown(True)
        self.window.set_demo_shown(True)
        self.window.show_banner(
            f"Showing the demo week from {path}: a simulated week, not your own history, on the Dashboard's "
            f"24 h and 7 d windows and on the Advisor, Costs, History and Jobs pages. Recording goes on into "
            f"{self.db_path}; Leave demo (on the simulated bar) shows your own history again.", "info",
            key="demo-week")

    def leave_demo(self) -> None:
        """Back to this machine's own history on every page that showed the demo week (no restart)."""
        try:
            self._show_history(self.db_path)
        except Exception as exc:  # the own database unreadable now: said; the demo stays shown
            self.window.show_banner(f"Cannot show {self.db_path}: {exc}", "error", key="demo-week")
            return
        self.dashboard.simulated_bar.set_demo_shown(False)
        self.window.set_demo_shown(False)
        self.window.banners.clear_key("demo-week")

    def _demo_failed(self, error: str) -> None:
        self.dashboard.simulated_bar.demo_finished(f"The demo week could not be written: {error}")
        self.window.show_banner(f"Could not write the demo week: {error}", "error", key="demo-week")

    def shutdown(self) -> None:
        """Drop a demo week still being written and wait for its worker (2 s at most): the next one replaces it."""
        self.demo_loader.discard()
        self.demo_loader.wait(2.0)
