"""The Stress page: a one-click Sustained test on the simulated laptop GPU, on an accelerated clock."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from advisor.frame import StressResult
from desktop.sessions.stress import StressOutcome, StressSession
from desktop.stress.portable import read_record
from desktop.stress.run_model import RunResult, SimClock, StressConfig
from desktop.stress.runner import StressRunner
from desktop.stress.runner_factory import runner_factory
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list
from desktop.ui.pages.stress_page import StressPage
from desktop.ui.theme import resolve
from tests.unit.ui.conftest import gui_stays_responsive

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
    page.controls.one_click.click()
    assert page.running and page.controls.cancel_button.isEnabled() and not page.controls.start_button.isEnabled()
    assert page.selected_config().duration_s == 600.0
    assert not page.controls.workload.isEnabled()  # the simulated GPU models GEMM only
    shots = _screenshot_dir(tmp_path)
    # Mid-run: past the thermal onset (about 2.5 simulated minutes in), the charts show the drop.
    qtbot.waitUntil(lambda: len(page.live.buffer) >= 300 or page.verdict is not None, timeout=60_000)
    assert page.live.progress_bar.value() > 0 and "left" in page.live.progress_bar.format()
    # The device's own limits are drawn: the laptop's slowdown temperature and the guard.
    limits = page.live.charts.plot("temperature_c")._limits
    assert limits["slowdown"][0].value() == 87.0 and limits["guard"][0].value() == DEFAULT_GUARD_C
    page.grab().save(str(shots / "stress-running.png"))
    with qtbot.waitSignal(page.finished, timeout=120_000) as blocker:
        pass
    verdict = blocker.args[0]
    assert verdict.throttled and verdict.cause_family == "thermal"
    assert "thermal" in page.verdict_text.text() and page.verdict_title.text() == "Throttled"
    assert not page.running and page.controls.start_button.isEnabled()
    assert page.run_id is not None and page.earlier_runs.table.rowCount() == 1
    qtbot.wait(100)  # let the card lay out its new, longer text (a grab at once shows it half relaid)
    page.grab().save(str(shots / "stress-verdict.png"))
    assert (shots / "stress-verdict.png").stat().st_size > 10_000
    page.export_json(tmp_path / "run.json")  # the portable record `rigscope compare` reads, and a page beside it
    exported = read_record(tmp_path / "run.json")
    assert exported.kind == "stress" and exported.throttled and exported.verdict_sentence == verdict.sentence
    assert "Throttled after" in (tmp_path / "run.html").read_text()
    page.export_html(tmp_path / "run.html")
    assert "Throttled after" in (tmp_path / "run.html").read_text()
    # A second run is compared with the first.
    page.start()
    with qtbot.waitSignal(page.finished, timeout=120_000) as blocker:
        pass
    assert "baseline" in blocker.args[0].comparison and page.earlier_runs.table.rowCount() == 2


def test_cancel_stops_the_run_and_says_so(qtbot: QtBot) -> None:
    page = StressPage(resolve("dark"), sim_runners(), db_path=None, device="sim")
    qtbot.addWidget(page)
    page.start_sustained()
    qtbot.waitUntil(lambda: len(page.live.buffer) >= 5, timeout=30_000)
    with qtbot.waitSignal(page.finished, timeout=10_000) as blocker:
        page.controls.cancel_button.click()
    assert blocker.args[0].status == "aborted"
    assert page.verdict_title.text() == "Aborted"
    assert "torch" not in sys.modules  # the GUI process never imports torch


def test_each_run_closes_its_backend_on_completion_cancel_and_refusal(qtbot: QtBot) -> None:
    opened, closed = CountingBackend.opened, CountingBackend.closed
    page = StressPage(resolve("dark"), sim_runners(guard_c=None), db_path=None, device="sim")
    qtbot.addWidget(page)
    page.controls.presets.button(0).setChecked(True)  # Quick 2 min: a fraction of a second here
    with qtbot.waitSignal(page.finished, timeout=60_000):
        page.start()
    qtbot.waitUntil(lambda: not page.running, timeout=10_000)
    assert (CountingBackend.opened - opened, CountingBackend.closed - closed) == (1, 1)

    page.start_sustained()
    qtbot.waitUntil(lambda: len(page.live.buffer) >= 5, timeout=30_000)
    with qtbot.waitSignal(page.finished, timeout=10_000):
        page.controls.cancel_button.click()
    qtbot.waitUntil(lambda: not page.running, timeout=10_000)
    assert (CountingBackend.opened - opened, CountingBackend.closed - closed) == (2, 2)

    # A guard at the laptop's shutdown temperature is refused before any load; the backend still closes.
    page.make_runner = sim_runners(guard_c=99.0)
    page.start()
    qtbot.waitUntil(lambda: page.worker is None, timeout=10_000)
    assert (CountingBackend.opened - opened, CountingBackend.closed - closed) == (3, 3)
    assert page.verdict_title.text() == "Cannot run the test"
    assert "shutdown temperature" in page.verdict_text.text() and page.controls.start_button.isEnabled()


def _run(run_id: int) -> StressResult:
    return StressResult(run_id=run_id, started_s=1_790_000_000.0 + run_id, ended_s=1_790_000_600.0 + run_id,
                        gpu_uuid="GPU-x", gpu_name="sim", workload="gemm", dtype="fp32", unit="TFLOP/s",
                        peak_throughput=50.0, sustained_throughput=40.0, throttled=True, errors=0,
                        driver_version=None, summary=f"run {run_id}", device="sim")


def test_the_table_of_earlier_runs_is_read_off_the_gui_thread(qtbot: QtBot, tmp_path: Path) -> None:
    release = threading.Event()

    def slow_runs(db_path: Path | None) -> list[StressResult]:
        assert db_path == tmp_path / "history.sqlite"
        assert release.wait(10)
        return [_run(2), _run(1)]

    page = StressPage(resolve("dark"), sim_runners(), db_path=tmp_path / "history.sqlite", read_runs=slow_runs)
    qtbot.addWidget(page)
    try:
        assert page.loading and page.earlier_runs.title.text() == "Earlier runs: reading…"
        gui_stays_responsive(qtbot)
        assert page.earlier_runs.table.rowCount() == 0
    finally:
        release.set()
    qtbot.waitUntil(lambda: not page.loading)
    assert page.earlier_runs.title.text() == "Earlier runs" and page.earlier_runs.table.rowCount() == 2
    assert page.earlier_runs.table.item(0, 5).text() == "run 2"


def test_a_table_that_cannot_be_read_says_so(qtbot: QtBot, tmp_path: Path) -> None:
    def locked(db_path: Path | None) -> list[StressResult]:
        raise OSError("database is locked")

    page = StressPage(resolve("dark"), sim_runners(), db_path=tmp_path / "history.sqlite", read_runs=locked)
    qtbot.addWidget(page)
    qtbot.waitUntil(lambda: not page.loading)
    assert page.earlier_runs.title.text() == "Earlier runs: could not be read (OSError: database is locked)"
    assert page.controls.start_button.isEnabled()


def test_a_finished_run_is_judged_and_stored_off_the_gui_thread(qtbot: QtBot, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    finish = StressSession.finish

    def slow_judge(session: StressSession, result: RunResult) -> StressOutcome:
        assert release.wait(10)
        return finish(session, result)

    monkeypatch.setattr(StressSession, "finish", slow_judge)  # the session's own judging, held on its worker
    page = StressPage(resolve("dark"), sim_runners(), db_path=tmp_path / "history.sqlite", device="sim")
    qtbot.addWidget(page)
    page.controls.presets.button(0).setChecked(True)  # Quick 2 min: a fraction of a second here
    try:
        page.start()
        qtbot.waitUntil(lambda: page.worker is None, timeout=60_000)  # the run is over, its judging held
        assert page.running and page.judging.busy and not page.controls.start_button.isEnabled()
        assert page.live.progress_bar.format() == "Judging and saving the run…"
        gui_stays_responsive(qtbot)
    finally:
        release.set()
    with qtbot.waitSignal(page.finished, timeout=10_000) as blocker:
        pass
    assert blocker.args[0] is page.verdict and page.run_id is not None
    assert page.earlier_runs.table.rowCount() == 1 and not page.running and page.controls.start_button.isEnabled()
    assert page.live.progress_bar.format() == "Done"


def test_a_run_that_cannot_be_judged_says_so(qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(session: StressSession, result: RunResult) -> StressOutcome:
        raise ValueError("no samples")

    monkeypatch.setattr(StressSession, "finish", broken)
    page = StressPage(resolve("dark"), sim_runners(), db_path=None, device="sim")
    qtbot.addWidget(page)
    page.controls.presets.button(0).setChecked(True)
    with qtbot.assertNotEmitted(page.finished, wait=100):
        page.start()
        qtbot.waitUntil(lambda: page.worker is None and not page.running, timeout=60_000)
    assert page.verdict_title.text() == "The run could not be judged"
    assert page.verdict_text.text() == "ValueError: no samples"
    assert page.controls.start_button.isEnabled() and page.verdict is None


def test_a_run_that_cannot_be_saved_keeps_its_verdict_and_says_so(qtbot: QtBot, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from desktop.history.store import HistoryStore

    def full(*_args: object, **_kwargs: object) -> int:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(HistoryStore, "add_stress_run", full)
    db = tmp_path / "history.sqlite"
    page = StressPage(resolve("dark"), sim_runners(), db_path=db, device="sim")
    qtbot.addWidget(page)
    page.controls.presets.button(0).setChecked(True)
    with qtbot.waitSignal(page.finished, timeout=60_000) as blocker:
        page.start()
    assert blocker.args[0] is page.verdict and page.verdict is not None and page.run_id is None
    # The verdict, then the power-limit line of the run's envelope (issue 25).
    assert page.verdict_text.text().split("\nPower limit: ")[0] == page.verdict.sentence
    assert page.live.readout.text().startswith(f"Not saved to {db}") and "disk is full" in page.live.readout.text()
    qtbot.waitUntil(lambda: not page.running, timeout=10_000)


def test_a_quick_run_still_heating_up_is_called_inconclusive_not_passed(qtbot: QtBot) -> None:
    """The Quick 2 min test on the laptop ends before it reaches its 87 °C limit (it throttles at ~2 min 25 s):
    not passed, but not only "still heating up" either (issue 32): the card names the 150 W limit it held and
    the labelled forecast that the temperature settles above the slowdown temperature."""
    page = StressPage(resolve("dark"), sim_runners(), db_path=None, device="sim")
    qtbot.addWidget(page)
    page.controls.presets.button(0).setChecked(True)  # Quick 2 min
    with qtbot.waitSignal(page.finished, timeout=60_000):
        page.start()
    assert page.verdict is not None and page.verdict.status == "inconclusive"
    assert page.verdict_title.text() == "Held its speed so far; forecast: reaches its slowdown temperature"
    text = page.verdict_text.text()
    assert text.startswith("Inconclusive: not at thermal steady state")
    assert "held its speed at its 150 W power limit" in text and "forecast, not measured: the temperature" in text
    assert "3,105" not in text
    card = page.verdict_card
    assert not card.forecast.isHidden() and card.forecast.text().startswith("Forecast (not a measurement): first-")
    qtbot.waitUntil(lambda: not page.running, timeout=10_000)
