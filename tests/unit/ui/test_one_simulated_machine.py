"""One simulated machine in the window: the Stress page, Dashboard, Processes page and alerts see the same GPU.

And the Dashboard's bar on a simulated GPU: why the graphs are flat, a simulated workload to
start and stop, and the demo week written into a separate demo database.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QMessageBox

from desktop.history.store import HistoryStore
from desktop.telemetry.simulated import WORKLOADS
from desktop.ui.theme import apply_theme, resolve
from desktop.ui.widgets.simulated_bar import IDLE_TEXT

T0 = 1_790_000_000.0


class HoldClock:
    """The stress run's accelerated clock: each sleep passes at once, until ``hold_at_s``; there it
    waits for ``release`` (or the run's cancel), so a test can look at the window mid-run."""

    def __init__(self, start_s: float, hold_at_s: float) -> None:
        self.time_s = start_s
        self.hold_at_s = hold_at_s
        self.holding = threading.Event()
        self.release = threading.Event()

    def now(self) -> float:
        return self.time_s

    def sleep(self, seconds: float, cancel: threading.Event) -> None:
        if self.time_s >= self.hold_at_s and not self.release.is_set():
            self.holding.set()
            while not (self.release.is_set() or cancel.is_set()):
                self.release.wait(0.01)
        if not cancel.is_set():
            self.time_s += seconds


def _shots(tmp_path: Path) -> Path:
    # RIGSCOPE_SCREENSHOTS=<folder> keeps the pictures for a look.
    return Path(os.environ.get("RIGSCOPE_SCREENSHOTS", str(tmp_path)))


def _grab(qtbot: Any, app: Any, path: Path) -> None:
    """The window as the user sees it: panels added to a shown page appear on the next event-loop turn."""
    qtbot.wait(20)
    app.dashboard.repaint_plots()
    qtbot.wait(20)
    assert app.window.grab().save(str(path))


def test_a_stress_run_on_the_stress_page_heats_the_dashboards_gpu_and_fires_the_alert(
        make_app: Any, qtbot: Any, tmp_path: Path) -> None:
    h = make_app()
    app = h.app
    app.window.show()
    idle = h.tick()
    cold = idle.gpus[0].sample
    assert cold is not None and cold.temperature_c is not None and cold.temperature_c < 50
    assert app.processes.model.rows == [] and not app.fired
    clock = HoldClock(h.clock.now_s, hold_at_s=h.clock.now_s + 300.0)
    app.stress_clock = clock
    page = app.stress  # built now, on the window's simulated machine and the accelerated clock
    page.controls.one_click.click()
    assert page.running
    assert clock.holding.wait(30.0), "the run did not reach five simulated minutes"
    # Five simulated minutes into the ten-minute test: the window's own sampler reads the same GPU.
    h.clock.now_s = clock.time_s - h.clock.step_s
    snap = h.tick()
    hot = snap.gpus[0].sample
    assert hot is not None and hot.temperature_c is not None and hot.power_w is not None
    assert hot.temperature_c >= 85.0 and hot.power_w >= 100.0
    assert hot.utilization_gpu_pct is not None and hot.utilization_gpu_pct >= 95.0
    assert app.last_snapshot is snap
    ring = app.dashboard.panels[0].ring
    assert ring.view("temperature_c")[-1] == hot.temperature_c and ring.view("power_w")[-1] == hot.power_w
    # The stress test's process holds memory on the Processes page, with its share of the GPU.
    rows = {p.name: p for p in app.processes.model.rows}
    assert set(rows) == {"rigscope-stress"}
    stress = rows["rigscope-stress"]
    assert stress.pid == os.getpid() and stress.vram_mib == pytest.approx(0.8 * 16376)
    assert stress.sm_util_pct == pytest.approx(hot.utilization_gpu_pct)
    assert stress.command is not None and stress.command.startswith("rigscope stress --device sim")
    assert app.processes.stack.currentWidget() is not app.processes.empty
    # The 85 °C alert fired on the shared GPU, in the window's banner.
    temperature = [a for a in app.fired if a.kind == "temperature"]
    assert len(temperature) == 1 and "alert at 85 °C" in temperature[0].message
    assert temperature[0].message in [b.label.text() for b in app.window.banners.banners()]
    assert "rigscope stress --device sim" in app.dashboard.simulated_bar.text.text()
    app.window.show_page("processes")
    _grab(qtbot, app, _shots(tmp_path) / "processes-simulated-stress.png")

    with qtbot.waitSignal(page.finished, timeout=60_000) as blocker:
        clock.release.set()
    assert blocker.args[0].throttled  # the run itself: thermally throttled, as before
    # Once the window's clock passes the run's end the load is gone from every page.
    h.clock.now_s = clock.time_s
    h.tick()
    assert app.processes.model.rows == []
    qtbot.waitUntil(lambda: not page.running, timeout=10_000)


def test_the_empty_dashboard_says_why_and_starts_and_stops_a_simulated_workload(make_app: Any, qtbot: Any,
                                                                               tmp_path: Path) -> None:
    h = make_app()
    app = h.app
    app.window.show()
    h.tick()
    bar = app.dashboard.simulated_bar
    assert bar.isVisible() and bar.text.text() == IDLE_TEXT
    assert not bar.stop_action.isEnabled()
    _grab(qtbot, app, _shots(tmp_path) / "dashboard-simulated-idle.png")

    bar.workload_actions["training"].trigger()
    assert "python train.py --cfg llama.yaml" in bar.text.text()  # said at once, before the next poll
    training = WORKLOADS["training"]
    h.clock.now_s += training.quiet_s  # past the evaluation pause the period starts with
    snap = h.tick(120)
    reading = snap.gpus[0].sample
    assert reading is not None and reading.utilization_gpu_pct is not None
    assert reading.utilization_gpu_pct >= 90.0
    (proc,) = app.processes.model.rows
    assert (proc.pid, proc.command, proc.container) == (training.pid, training.command, None)
    assert proc.sm_util_pct == pytest.approx(reading.utilization_gpu_pct)
    assert bar.stop_action.isEnabled() and "python train.py" in bar.text.text()
    _grab(qtbot, app, _shots(tmp_path) / "dashboard-simulated-training.png")

    bar.workload_actions["notebook"].trigger()
    h.tick()
    assert {p.pid for p in app.processes.model.rows} == {training.pid, WORKLOADS["notebook"].pid}
    bar.stop_action.trigger()
    h.tick()
    assert app.processes.model.rows == [] and bar.text.text() == IDLE_TEXT


def test_ending_a_simulated_process_stops_its_workload(make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    h = make_app()
    app = h.app
    app.start_workload("notebook")
    h.tick()
    page = app.processes
    page.table.selectRow(0)
    assert page.selected() is not None and page.end_button.isEnabled()
    monkeypatch.setattr(QMessageBox, "exec", lambda self: QMessageBox.StandardButton.Yes)
    page.end_selected()
    assert page.message.text() == "Asked python (pid 5120) to end."
    h.tick()
    assert page.model.rows == [] and app.machine is not None and app.machine.workloads() == []


def test_load_demo_week_writes_a_separate_demo_database_and_shows_it(make_app: Any, qtbot: Any,
                                                                      tmp_path: Path) -> None:
    h = make_app()
    app = h.app
    app.window.show()
    h.tick()
    app.demo_path = tmp_path / "demo-history.sqlite"
    app.demo_days = 0.05  # a little over an hour: the same writer as the week, in a fraction of the time
    steps: list[tuple[float, str]] = []
    app.demo_progress.connect(lambda fraction, step: steps.append((fraction, step)))
    bar = app.dashboard.simulated_bar
    bar.demo_button.click()
    assert not bar.demo_button.isEnabled() and bar.progress.isVisible()
    qtbot.waitUntil(lambda: not app.demo_loader.busy and bar.demo_button.isEnabled(), timeout=60_000)
    assert steps[0][1].startswith("Simulating day 1 of ") and steps[-1] == (1.0, "Done")
    assert [f for f, _ in steps] == sorted(f for f, _ in steps)
    with HistoryStore.open(app.demo_path, readonly=True) as store:
        assert store.is_demo and store.counts()["gpu_samples"] >= 0.05 * 86400 - 2
    # Shown in this window; the recorded history is left alone.
    assert app.history_path == app.demo_path and app.db_path != app.demo_path
    assert not app.db_path.exists()
    assert app.dashboard.window_s == 7 * 86400.0 and app.dashboard.fill.history is not None
    assert any("Showing the demo week" in b.label.text() for b in app.window.banners.banners())
    qtbot.waitUntil(lambda: not app.dashboard.loading, timeout=30_000)
    assert app.history_source.db_path == app.demo_path
    _grab(qtbot, app, _shots(tmp_path) / "dashboard-demo-week.png")


def test_load_demo_week_never_overwrites_real_history(make_app: Any, qtbot: Any, tmp_path: Path) -> None:
    h = make_app()
    app = h.app
    h.tick()
    real = tmp_path / "history.sqlite"
    with HistoryStore.open(real) as store:
        store.set_meta("created_by", "test")  # a real (not demo) history file
    app.demo_path = real
    app.demo_days = 0.05
    app.load_demo_week()
    qtbot.waitUntil(lambda: not app.demo_loader.busy, timeout=30_000)
    texts = [b.label.text() for b in app.window.banners.banners()]
    assert any("Could not write the demo week" in t and "real history" in t for t in texts), texts
    assert app.history_path == app.db_path
    with HistoryStore.open(real, readonly=True) as store:
        assert not store.is_demo


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_the_simulated_bar_in_both_themes(make_app: Any, qtbot: Any, tmp_path: Path, theme: str) -> None:
    h = make_app()
    app = h.app
    apply_theme(app.qt_app, resolve(theme))
    app.window.apply_theme(resolve(theme))
    app.dashboard.apply_theme(resolve(theme))
    app.window.show()
    h.tick()
    bar = app.dashboard.simulated_bar
    assert resolve(theme).accent in bar.styleSheet()
    app.start_workload("inference")
    h.tick()
    _grab(qtbot, app, _shots(tmp_path) / f"dashboard-simulated-{theme}.png")
