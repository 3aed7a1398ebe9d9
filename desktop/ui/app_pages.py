"""How each page of the window is made from the app's parts, and when.

``AppPages`` adds the pages to the window: the Dashboard at once; Processes with the second snapshot (it keeps
each process's utilization from then on, and is fed the first one), or when first shown if that is sooner; the
others (and their imports: the stress runner, the advisor, the report renderer) when first shown, so they cost
nothing before the first frame. To add a page, add one line to ``add_to``::

    window.add_page("stress", "Stress test", self.stress)

A page is made from ``AppParts``, the app's parts read when the page is built (the Fleet page reads the
settings again at each refresh), and is connected back to the app's methods (costs saved, settings applied,
calibrations reloaded after a saved stress run). Nothing here runs a stress test: the Stress page does, through
its session.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from desktop.config import CostSettings, Settings
from desktop.paths import config_dir
from desktop.telemetry.backend import GpuBackend
from desktop.telemetry.model import Snapshot
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend
from desktop.ui.main_window import MainWindow
from desktop.ui.pages.base import PageWidget
from desktop.ui.pages.dashboard import DashboardPage
from desktop.ui.theme import Theme

if TYPE_CHECKING:
    from desktop.reporting import HistorySource
    from desktop.stress.run_model import Clock
    from desktop.ui.pages.advisor_history import HistoryPage
    from desktop.ui.pages.processes import ProcessesPage
    from desktop.ui.pages.settings_page import SettingsPage
    from desktop.ui.pages.stress_modes import ModeCompare
    from desktop.ui.pages.stress_page import StressPage


class AppParts(Protocol):
    """What the pages are made from (``RigscopeApp`` is one): read when a page is built."""

    theme: Theme
    settings: Settings
    settings_path: Path | None
    #: Where the Stress page's runs are saved (the recorded history, never the demo week).
    db_path: Path
    #: The history the Jobs page reads: the recorded one, or the demo week while it is shown.
    history_path: Path
    #: Where the Stress page's runs take time from (tests pass an accelerated one).
    stress_clock: Clock | None
    sampler: Sampler
    last_snapshot: Snapshot | None

    @property
    def history_source(self) -> HistorySource: ...

    def save_costs(self, costs: CostSettings) -> None: ...

    def apply_settings(self, settings: Settings) -> None: ...

    def reload_calibrations(self) -> None: ...


class AppPages:
    """The window's pages, each built from ``app`` when the window first asks for it.

    ``end_process`` ends a process from the Processes page (the simulated machine's on the simulated GPU);
    ``service`` turns the recording service on or off from the Settings page.
    """

    def __init__(self, app: AppParts, *, end_process: Callable[[int, float | None], str | None] | None = None,
                 service: Callable[[bool], None] | None = None) -> None:
        self.app = app
        self.end_process = end_process
        self.service = service
        #: The Stress page's "Compare modes", where the GPU has at least two firmware modes (built with the page).
        self.mode_compare: ModeCompare | None = None
        #: Snapshots that came before the Processes page was built (the first one): it is fed them when built.
        self._unseen_by_processes: list[Snapshot] = []
        self._window: MainWindow | None = None

    def add_to(self, window: MainWindow, dashboard: DashboardPage) -> None:
        self._window = window
        window.add_page("dashboard", "Dashboard", dashboard)
        window.add_page("processes", "Processes", self.processes)
        window.add_page("stress", "Stress test", self.stress)
        window.add_page("advisor", "Advisor", self.advisor)
        window.add_page("costs", "Costs", self.costs)
        window.add_page("history", "History", self.history)
        window.add_page("jobs", "Jobs", self.jobs)
        window.add_page("fleet", "Fleet", self.fleet)
        window.add_page("settings", "Settings", self.settings, shortcut="Ctrl+,")

    def feed_processes(self, snap: Snapshot) -> None:
        """A snapshot for the Processes page: kept until the second one, which builds the page (after the first
        frame) and feeds it both."""
        window = self._window
        assert window is not None
        if window.is_built("processes") or self._unseen_by_processes:
            cast("ProcessesPage", window.page("processes")).add_snapshot(snap)
        else:
            self._unseen_by_processes.append(snap)

    def processes(self) -> ProcessesPage:
        from desktop.ui.pages.processes import ProcessesPage

        page = ProcessesPage(self.app.theme, end_process=self.end_process)
        for snap in self._unseen_by_processes:
            page.add_snapshot(snap)
        self._unseen_by_processes.clear()
        return page

    def stress(self) -> StressPage:
        """The Stress page on the GPU the window shows: the simulated one, or the first real one.

        Each run opens its own backend (the app's sampler thread owns this one). On the simulated
        GPU that is another reader of the window's machine: the test's load, heat and process
        show on the Dashboard, the Processes page and in the alerts too.
        """
        from desktop.sessions.stress_device import device_for, needs_torch, window_runners
        from desktop.ui.pages.stress_page import StressPage

        app = self.app
        gpu = app.sampler.gpu
        device = device_for(gpu)
        # The picker shows when there are several GPUs (the backend's static list, read once here).
        gpus = [(info.index, info.name) for info in gpu.devices()]
        # The session's runners on the window's backend and clock; the guard settings go into its config, and
        # the advisor's regression threshold follows Settings (apply_settings).
        page = StressPage(app.theme, window_runners(gpu, clock=app.stress_clock), db_path=app.db_path,
                          device=device, gpus=gpus, settings=app.settings.stress,
                          regression_pct=app.settings.advisor.stress_regression_pct)
        self._add_mode_compare(page, gpu)
        page.finished.connect(lambda _verdict: app.reload_calibrations())  # saved: a new full-load calibration
        if needs_torch(device) and importlib.util.find_spec("torch") is None:
            page.set_unavailable("The stress test needs PyTorch, which is not installed. Add it with "
                                 "pip install \"rigscope[stress]\" (or pip install torch) and restart Rigscope.")
        return page

    def _add_mode_compare(self, page: StressPage, gpu: GpuBackend) -> None:
        """The Stress page's "Compare modes": the simulated laptop's modes, or msi-ec / platform_profile's."""
        from desktop.stress.per_mode import ModeSwitch, SysfsModes, simulated_switch
        from desktop.ui.pages.stress_modes import ModeCompare

        switch: ModeSwitch
        if isinstance(gpu, SimulatedBackend):
            if not gpu.machine.laptop:
                return
            # The model's modes, or a fake msi-ec tree under RIGSCOPE_SYSFS_ROOT read as a real laptop's.
            switch = simulated_switch(gpu.machine, allow_write=False)
        else:
            switch = SysfsModes()  # reads only: the user switches when asked
        if len(switch.available()) >= 2:
            self.mode_compare = ModeCompare(page, switch, read_temperature=self._temperature_reader(gpu),
                                            clock=self.app.stress_clock)

    def _temperature_reader(self, gpu: GpuBackend) -> Callable[[int], float | None]:
        """A GPU's temperature for the cool-down between compared modes (read on a worker): the simulated machine
        read on the Stress page's clock, as its runs read it; a real GPU's from the window's newest snapshot."""
        view = gpu.view() if isinstance(gpu, SimulatedBackend) else None
        app = self.app
        clock = app.stress_clock

        def read(index: int) -> float | None:
            if view is not None:
                readings = view.sample(clock.now() if clock is not None else time.time())
            else:
                snap = app.last_snapshot
                readings = list(snap.gpus) if snap is not None else []
            for reading in readings:
                if reading.info.index == index and reading.sample is not None:
                    return reading.sample.temperature_c
            return None
        return read

    def advisor(self) -> PageWidget:
        from desktop.ui.pages.advisor_page import AdviceState, AdvisorPage

        state = AdviceState(config_dir() / "advisor-state.json")
        return AdvisorPage(self.app.history_source.advice, state, self.app.theme)

    def costs(self) -> PageWidget:
        from desktop.ui.pages.costs_page import CostsPage

        page = CostsPage(self.app.history_source.advice, self.app.settings.costs, self.app.theme)
        page.costs_changed.connect(self.app.save_costs)
        return page

    def jobs(self) -> PageWidget:
        from desktop.sessions.jobs_reader import JobsHistory
        from desktop.ui.pages.jobs_page import JobsPage

        app = self.app
        # The history shown (the demo week's jobs while it is shown), like the Advisor, Costs and History pages.
        return JobsPage(JobsHistory(app.history_path, lambda: app.settings.costs), app.theme)

    def history(self) -> HistoryPage:
        from desktop.ui.pages.advisor_history import HistoryPage

        source = self.app.history_source
        return HistoryPage(source.weeks, source.report, default_week=source.default_week)

    def fleet(self) -> PageWidget:
        from desktop.fleet.advice import advise
        from desktop.ui.pages.fleet_page import FleetPage

        app = self.app
        # Read through the app at each refresh: a URL saved in Settings takes effect on the next one.
        return FleetPage(lambda: app.settings.fleet, lambda: app.settings.alerts.temperature_c, app.theme,
                         advise=lambda client, fleet: advise(client, fleet, app.settings))

    def settings(self) -> SettingsPage:
        from desktop.ui.pages.settings_page import SettingsPage

        page = SettingsPage(self.app.settings, self.app.theme, path=self.app.settings_path, service=self.service)
        page.applied.connect(self.app.apply_settings)
        return page
