"""Screenshots of the running app for the README: `python -m tools.screenshots resources/screenshots`.

Starts the real app objects offscreen on the simulated laptop GPU running the demo week's
Monday training job, writes a day of demo history into a temporary database (so the 1 h
and 24 h windows show history fill), feeds 15 simulated minutes of live ticks, and grabs
each entry of ``SHOTS`` at 1600x1000. Another page adds its screenshot with one ``Shot``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtWidgets import QApplication

from desktop.config import Settings
from desktop.sessions.recording import RecordingSession
from desktop.telemetry.model import GpuProcess, HostSample
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.scenarios import WeekScenario, week_start
from desktop.telemetry.simulated import GpuProfile, SimulatedBackend, parse_profile_list
from desktop.ui.app import RigscopeApp

SIZE = (1600, 1000)
PROFILE = "rtx4090-laptop"
LIVE_TICKS = 900
#: Days of demo history behind the live part: over a week, so the Advisor, Costs and History
#: pages have the whole demo week to show.
HISTORY_DAYS = 8.0
#: The Costs page needs a purchase price for its break-even; a typical RTX 4090 laptop.
PURCHASE_PRICE = 3200.0
#: Monday 11:15 UTC of the demo week: the long training run is hot and held back by now.
LIVE_END_OFFSET_S = 11 * 3600.0 + 900.0


@dataclass(frozen=True)
class Shot:
    page: str
    file_name: str
    theme: str = "dark"
    #: Dashboard time window to show ("" = leave as is).
    window: str = ""
    #: Called with the app before the grab (select a row, open a tab, ...).
    prepare: Callable[[RigscopeApp], None] | None = None


def _select_first_process(app: RigscopeApp) -> None:
    app.processes.table.selectRow(0)


def _select_starved_job(app: RigscopeApp) -> None:
    """The Jobs page on the demo week's data-loader-starved run (the README's caption), once its list is read."""
    from desktop.ui.pages.jobs_page import JobsPage

    page = app.window.page("jobs")
    assert isinstance(page, JobsPage)
    deadline = time.monotonic() + 60.0
    while (page.list_loader.busy or not page.records) and time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.01)
    names = [r.name for r in page.records]
    if "train_dataloader.py" in names:
        page.table.selectRow(names.index("train_dataloader.py"))


def _show_alerts(app: RigscopeApp) -> None:
    """The alert panel open over the Dashboard: the live part's alerts (one per kind, as the window keeps them)."""
    for alert in {a.kind: a for a in app.fired}.values():
        app.window.show_banner(alert.message, alert.level, key=f"alert.{alert.kind}.{alert.gpu_uuid}")
    app.window.toggle_alerts()


def _show_fleet(app: RigscopeApp) -> None:
    """The Fleet page over a canned fleet (tools/fleet_demo.py): two Rigscope machines, one DCGM-only; ws-lab open."""
    from desktop.config import FleetSettings
    from desktop.ui.pages.fleet_page import FleetPage
    from tools.fleet_demo import SERVER, demo_advice, demo_fleet, demo_history

    page = app.window.page("fleet")
    assert isinstance(page, FleetPage)
    now_s = app.last_snapshot.time_s if app.last_snapshot is not None else time.time()
    page.settings_source = lambda: FleetSettings(url=SERVER)  # no read: the canned answers are shown instead
    page.clock = lambda: now_s
    app.window.banners.clear()  # the demo GPU's banner is about this machine, not the fleet
    page.show_state()  # shown before the URL was set: the empty state until now; no timer, no read
    page.apply_fleet(demo_fleet(now_s))
    page.selected = "ws-lab"
    page.cards["ws-lab"].set_selected(True)
    page.show_history(demo_history(now_s))
    page.show_advice(demo_advice())


def _show_week(app: RigscopeApp) -> None:
    """The History page opens on the newest week; the picture shows the last full one."""
    combo = app.history_page.week_combo
    if combo.count() > 1:
        combo.setCurrentIndex(1)


#: What `make screenshots` produces; a page's helper appends its own ``Shot``.
SHOTS: list[Shot] = [
    Shot("dashboard", "dashboard-dark.png", "dark", window="1 h"),
    Shot("dashboard", "dashboard-light.png", "light", window="24 h"),
    # The demo week's Tuesday-evening memory-bound job: utilization ~97 %, effective load ~34 %.
    Shot("dashboard", "dashboard-week.png", "dark", window="7 d"),
    Shot("processes", "processes.png", "dark", prepare=_select_first_process),
    Shot("advisor", "advisor.png", "dark"),
    Shot("costs", "costs.png", "dark"),
    Shot("stress", "stress-empty.png", "dark"),  # before the first run: the empty state, not 0-1 charts
    Shot("history", "history.png", "dark", prepare=_show_week),
    Shot("jobs", "jobs.png", "dark", prepare=_select_starved_job),
    # Alerts in the status bar and, opened from it, the panel over the page (nothing above the page moves).
    Shot("dashboard", "alerts.png", "dark", window="1 h", prepare=_show_alerts),
    Shot("fleet", "fleet.png", "dark", prepare=_show_fleet),
]


class _Clock:
    def __init__(self, now_s: float) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s


class _DemoHost:
    """Host readings of the demo week (the real host's numbers would not match the simulated GPU)."""

    def __init__(self, scenario: WeekScenario, clock: _Clock) -> None:
        self.scenario = scenario
        self.clock = clock

    def sample(self) -> HostSample:
        return self.scenario.host(self.clock.now_s)

    def describe(self, processes: Sequence[GpuProcess]) -> list[GpuProcess]:
        return list(processes)


class _DemoProcesses(SimulatedBackend):
    """The simulated GPU plus the processes a developer's machine shows beside a training job."""

    def __init__(self, profiles: Sequence[GpuProfile], scenario: WeekScenario, clock: _Clock) -> None:
        super().__init__(profiles, scenario=scenario, user="dev")
        self._clock = clock

    def processes(self) -> list[GpuProcess]:
        now = self._clock()
        procs = [dataclasses.replace(p, cpu_pct=97.5, started_s=now - 5400.0) for p in super().processes()]
        procs += [
            GpuProcess(pid=5120, gpu_index=0, name="ipykernel_launcher", user="dev",
                       vram_mib=1536.0, cpu_pct=0.3, started_s=now - 3 * 86400.0, own=True,
                       sm_util_pct=0.0, mem_util_pct=0.0, enc_util_pct=0.0, dec_util_pct=0.0,
                       command="python -m ipykernel_launcher -f kernel-4b1e.json"),
            GpuProcess(pid=1873, gpu_index=0, name="Xorg", user="root", vram_mib=412.0, kind="graphics",
                       cpu_pct=1.2, started_s=now - 6 * 86400.0, own=False,
                       sm_util_pct=1.0, mem_util_pct=1.0, enc_util_pct=0.0, dec_util_pct=0.0,
                       command="Xorg vt2 -displayfd 3"),
            GpuProcess(pid=2990, gpu_index=0, name="firefox", user="dev",
                       vram_mib=238.0, kind="graphics", cpu_pct=4.1, started_s=now - 7200.0, own=True,
                       sm_util_pct=2.0, mem_util_pct=1.0, enc_util_pct=0.0, dec_util_pct=6.0,
                       command="firefox"),
        ]
        # The others hold part of what the GPU reports used, not memory on top of it: the training job's share
        # shrinks by theirs, so the page's total stays within the GPU's used VRAM (it showed more than the card).
        job = next((i for i, p in enumerate(procs) if p.gpu_index == 0 and p.pid not in (5120, 1873, 2990)), None)
        if job is not None and procs[job].vram_mib is not None:
            others = sum(p.vram_mib or 0.0 for i, p in enumerate(procs) if p.gpu_index == 0 and i != job)
            procs[job] = dataclasses.replace(procs[job], vram_mib=max(0.0, (procs[job].vram_mib or 0.0) - others))
        return procs


def build(history_db: Path | None, end_s: float) -> tuple[QApplication, RigscopeApp, _Clock]:
    qt_app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(qt_app, QApplication)
    profiles = parse_profile_list(PROFILE)
    scenario = WeekScenario([p.vram_total_mib for p in profiles])
    clock = _Clock(end_s - LIVE_TICKS)
    backend = _DemoProcesses(profiles, scenario, clock)
    # Warm the simulated GPU through the half hour before the live part, so the live curves
    # continue the history instead of starting from a cold GPU.
    backend.model.advance(clock.now_s - 1800.0)
    backend.model.advance(clock.now_s)
    sampler = Sampler(backend, _DemoHost(scenario, clock), clock=clock, monotonic=clock)
    store = None
    if history_db is not None:
        from desktop.history.store import HistoryStore

        store = HistoryStore.open(history_db, readonly=True)
    recording = RecordingSession("reading" if store else "off",
                                 "demo history (screenshot)" if store else "screenshot", store=store)
    settings = Settings()
    settings = dataclasses.replace(settings, costs=dataclasses.replace(settings.costs, purchase_price=PURCHASE_PRICE))
    app = RigscopeApp(qt_app, sampler, settings, recording, tray_available=False,
                      end_process=lambda pid, started_s: None,  # never clicked: it only enables the button
                      db_path=history_db, settings_path=Path(os.devnull) if history_db is None else
                      history_db.with_name("settings.toml"))
    app.window.resize(*SIZE)
    return qt_app, app, clock


def write_history(path: Path, end_s: float) -> Path | None:
    """A week of demo history, with its jobs, ending where the live ticks begin (None when history is unavailable)."""
    try:
        from desktop.jobs.demo_jobs import write_demo_week
    except ImportError:
        return None
    write_demo_week(path, parse_profile_list(PROFILE), days=HISTORY_DAYS, now_s=end_s - LIVE_TICKS)
    return path


def _wait_loaded(qt_app: QApplication, page: object, timeout_s: float = 120.0) -> None:
    """History pages read on a worker thread: let their answer arrive before the grab."""
    deadline = time.monotonic() + timeout_s
    while getattr(page, "loading", False) and time.monotonic() < deadline:
        qt_app.processEvents()
        time.sleep(0.01)


def take(out_dir: Path, shots: Sequence[Shot] = SHOTS) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    from desktop.ui.theme import apply_theme, resolve

    end_s = week_start(1_795_000_000.0) + LIVE_END_OFFSET_S  # a fixed week: the same pictures every run
    with tempfile.TemporaryDirectory(prefix="rigscope-shots-") as tmp:
        db = write_history(Path(tmp) / "demo-history.sqlite", end_s)
        qt_app, app, clock = build(db, end_s)
        written = []
        try:
            app.window.show()
            for _ in range(LIVE_TICKS):
                clock.now_s += 1.0
                app.on_snapshot(app.sampler.tick())
            app.window.banners.clear()  # the live ticks' alerts; the pictures show the demo note (alerts.png: them)
            app.window.show_banner("Demo: a simulated RTX 4090 Laptop GPU running the demo week's training job.",
                                   "info")
            for shot in shots:
                theme = resolve(shot.theme)
                apply_theme(qt_app, theme)
                app.theme = theme
                app.window.apply_theme(theme)
                app.window.alert_panel.hide()  # opened for one picture only
                app.window.show_page(shot.page)
                if shot.window:
                    app.dashboard.set_window(shot.window)
                if shot.prepare is not None:
                    shot.prepare(app)
                _wait_loaded(qt_app, app.window.page(shot.page))
                for _ in range(3):  # layout and repaint settle over a few event-loop turns
                    qt_app.processEvents()
                app.dashboard.repaint_plots()
                qt_app.processEvents()
                path = out_dir / shot.file_name
                if not app.window.grab().save(str(path), "PNG"):
                    raise OSError(f"could not write {path}")
                written.append(path)
        finally:
            app.shutdown()
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir", type=Path, nargs="?", default=Path("resources/screenshots"))
    args = parser.parse_args(argv)
    for path in take(args.out_dir):
        print(path)  # noqa: T201 - the script's output is the list of files
    return 0


if __name__ == "__main__":
    sys.exit(main())
