"""The Stress page: a one-click Sustained test on the simulated laptop GPU, on an accelerated clock."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pytestqt.qtbot import QtBot

from desktop.stress.runner import SimClock, StressConfig, StressRunner, runner_factory
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list
from desktop.ui.stress_page import StressPage
from desktop.ui.theme import resolve

#: 2 ms of real time per simulated second: the 10-minute test takes about a second or two.
REAL_S_PER_S = 0.002
#: The laptop's default guard: its max operating temperature (87 °C, where it is held as it
#: throttles) + 3 °C, so the one-click test runs on into its thermal slowdown.
DEFAULT_GUARD_C = 90.0


class CountingBackend(SimulatedBackend):
    """The simulated laptop GPU, counting how often a run closes it (its NVML session, on real hardware)."""

    opened = 0
    closed = 0

    def __init__(self) -> None:
        super().__init__(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=5)
        CountingBackend.opened += 1

    def close(self) -> None:
        CountingBackend.closed += 1
        super().close()


def sim_runners(guard_c: float | None = None) -> Callable[[StressConfig], StressRunner]:
    """The app's factory over the simulated laptop GPU, on one accelerated clock (later runs start later)."""
    clock = SimClock(real_s_per_s=REAL_S_PER_S)
    make = runner_factory(CountingBackend, clock=clock)
    return lambda config: make(replace(config, guard_c=guard_c))


def _screenshot_dir(tmp_path: Path) -> Path:
    # RIGSCOPE_SCREENSHOTS=resources/screenshots refreshes the shipped screenshots.
    return Path(os.environ.get("RIGSCOPE_SCREENSHOTS", str(tmp_path)))


def test_one_click_sustained_test_ends_in_a_thermal_verdict(qtbot: QtBot, tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    page = StressPage(resolve("light"), sim_runners(), db_path=db, device="sim")
    qtbot.addWidget(page)
    page.resize(1400, 950)
    page.show()
    page.one_click.click()
    assert page.running and page.cancel_button.isEnabled() and not page.start_button.isEnabled()
    assert page.selected_config().duration_s == 600.0
    assert not page.workload.isEnabled()  # the simulated GPU models GEMM only
    shots = _screenshot_dir(tmp_path)
    # Mid-run: past the thermal onset (about 2.5 simulated minutes in), the charts show the drop.
    qtbot.waitUntil(lambda: len(page._buffer) >= 300 or page.verdict is not None, timeout=60_000)
    assert page.progress_bar.value() > 0 and "left" in page.progress_bar.format()
    # The device's own limits are drawn: the laptop's slowdown temperature and the guard.
    limits = page.charts.plot("temperature_c")._limits
    assert limits["slowdown"][0].value() == 87.0 and limits["guard"][0].value() == DEFAULT_GUARD_C
    page.grab().save(str(shots / "stress-running.png"))
    with qtbot.waitSignal(page.finished, timeout=120_000) as blocker:
        pass
    verdict = blocker.args[0]
    assert verdict.throttled and verdict.cause_family == "thermal"
    assert "thermal" in page.verdict_text.text() and page.verdict_title.text() == "Throttled"
    assert not page.running and page.start_button.isEnabled()
    assert page.run_id is not None and page.table.rowCount() == 1
    page.grab().save(str(shots / "stress-verdict.png"))
    assert (shots / "stress-verdict.png").stat().st_size > 10_000
    page.export_json(tmp_path / "run.json")
    exported = json.loads((tmp_path / "run.json").read_text())
    assert exported["verdict"]["cause_family"] == "thermal" and len(exported["points"]["time_s"]) >= 600
    page.export_html(tmp_path / "run.html")
    assert "Throttled after" in (tmp_path / "run.html").read_text()
    # A second run is compared with the first.
    page.start()
    with qtbot.waitSignal(page.finished, timeout=120_000) as blocker:
        pass
    assert "baseline" in blocker.args[0].comparison and page.table.rowCount() == 2


def test_cancel_stops_the_run_and_says_so(qtbot: QtBot) -> None:
    page = StressPage(resolve("dark"), sim_runners(), db_path=None, device="sim")
    qtbot.addWidget(page)
    page.start_sustained()
    qtbot.waitUntil(lambda: len(page._buffer) >= 5, timeout=30_000)
    with qtbot.waitSignal(page.finished, timeout=10_000) as blocker:
        page.cancel_button.click()
    assert blocker.args[0].status == "aborted"
    assert page.verdict_title.text() == "Aborted"
    assert "torch" not in sys.modules  # the GUI process never imports torch


def test_each_run_closes_its_backend_on_completion_cancel_and_refusal(qtbot: QtBot) -> None:
    opened, closed = CountingBackend.opened, CountingBackend.closed
    page = StressPage(resolve("dark"), sim_runners(guard_c=None), db_path=None, device="sim")
    qtbot.addWidget(page)
    page.presets.button(0).setChecked(True)  # Quick 2 min: a fraction of a second here
    with qtbot.waitSignal(page.finished, timeout=60_000):
        page.start()
    qtbot.waitUntil(lambda: not page.running, timeout=10_000)
    assert (CountingBackend.opened - opened, CountingBackend.closed - closed) == (1, 1)

    page.start_sustained()
    qtbot.waitUntil(lambda: len(page._buffer) >= 5, timeout=30_000)
    with qtbot.waitSignal(page.finished, timeout=10_000):
        page.cancel_button.click()
    qtbot.waitUntil(lambda: not page.running, timeout=10_000)
    assert (CountingBackend.opened - opened, CountingBackend.closed - closed) == (2, 2)

    # A guard at the laptop's shutdown temperature is refused before any load; the backend still closes.
    page.make_runner = sim_runners(guard_c=99.0)
    page.start()
    qtbot.waitUntil(lambda: page.worker is None, timeout=10_000)
    assert (CountingBackend.opened - opened, CountingBackend.closed - closed) == (3, 3)
    assert page.verdict_title.text() == "Cannot run the test"
    assert "shutdown temperature" in page.verdict_text.text() and page.start_button.isEnabled()
