"""The Stress page's verdict card on its own: its states, its colour per verdict, and its export buttons."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtWidgets import QFileDialog
from pytestqt.qtbot import QtBot

from advisor.forecast import TemperatureForecast
from advisor.frame import StressResult
from advisor.verdict import Verdict
from desktop.ui.pages.stress_page import StressPage
from desktop.ui.theme import DARK, LIGHT
from desktop.ui.widgets.stress_runs import NO_RUN_TITLE
from desktop.ui.widgets.stress_verdict_card import NO_RUN_TEXT, VerdictCard


def _verdict(status: str, comparison: str = "") -> Verdict:
    return Verdict(status=status, throttled=status == "throttled", onset_s=None, peak=70.0, sustained=60.0,
                   sustained_ratio=60.0 / 70.0, unit="TFLOP/s", basis="throughput", clock_ratio=None, cause=None,
                   cause_family=None, onset_temperature_c=None, sentence=f"The run {status}.",
                   comparison=comparison)


def _stored() -> StressResult:
    return StressResult(run_id=1, started_s=1_790_000_000.0, ended_s=1_790_000_600.0, gpu_uuid="GPU-sim-0",
                        gpu_name="Simulated RTX 4090", workload="gemm", dtype="fp16", unit="TFLOP/s",
                        peak_throughput=72.0, sustained_throughput=64.5, throttled=True, errors=0,
                        driver_version=None, summary="Throttled after 2 min 20 s", device="sim")


def test_idle_shows_the_newest_stored_run_until_a_run_starts(qtbot: QtBot) -> None:
    card = VerdictCard(LIGHT)
    qtbot.addWidget(card)
    assert (card.state, card.title.text(), card.text.text()) == ("idle", NO_RUN_TITLE, "")
    card.show_idle(None)
    assert (card.title.text(), card.text.text()) == (NO_RUN_TITLE, NO_RUN_TEXT)
    card.show_idle(_stored())
    assert card.title.text().startswith("Last run: ") and "Throttled after 2 min 20 s" in card.text.text()
    card.show_running("gemm on sim, 10 min")
    card.show_idle(None)  # the table refreshing mid-run leaves the running card alone
    assert (card.state, card.title.text(), card.text.text()) == ("running", "Running…", "gemm on sim, 10 min")


def test_a_verdict_titles_colours_and_enables_the_exports(qtbot: QtBot) -> None:
    card = VerdictCard(LIGHT)
    qtbot.addWidget(card)
    assert not card.export_html_button.isEnabled() and not card.export_json_button.isEnabled()
    assert LIGHT.muted in card.styleSheet()
    card.show_verdict(_verdict("throttled", "slower than the last 3 runs"))
    assert (card.state, card.title.text(), card.text.text()) == ("verdict", "Throttled", "The run throttled.")
    assert card.comparison.text() == "Slower than the last 3 runs"
    assert LIGHT.warn in card.styleSheet() and card.export_html_button.isEnabled()
    card.apply_theme(DARK, _verdict("passed"))
    assert DARK.ok in card.styleSheet()
    card.show_verdict(_verdict("errors"))
    assert card.title.text() == "Result errors found" and DARK.bad in card.styleSheet()
    card.show_message("The test failed", "the child exited")
    assert (card.state, card.title.text(), card.text.text()) == ("message", "The test failed", "the child exited")


@pytest.mark.parametrize("kind", ["html", "json"])
def test_the_export_buttons_open_the_pages_save_dialog(qtbot: QtBot, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path, kind: str) -> None:
    def refuse(_config: object) -> object:
        raise ValueError("no GPU here")

    page = StressPage(LIGHT, refuse)  # type: ignore[arg-type]
    qtbot.addWidget(page)
    asked: list[str] = []

    def save_name(_parent: object, caption: str, name: str, _filter: str) -> tuple[str, str]:
        asked.append(name)
        return "", ""  # the user cancels: nothing is written

    monkeypatch.setattr(QFileDialog, "getSaveFileName", save_name)
    button = page.verdict_card.export_html_button if kind == "html" else page.verdict_card.export_json_button
    button.setEnabled(True)
    button.click()
    assert asked == [f"rigscope-stress.{kind}"]


def test_a_throttled_verdict_gives_its_action_at_once_with_its_evidence(qtbot: QtBot, tmp_path: Path) -> None:
    """Issue 24: the verdict card suggested no action; a laptop gets the firmware's mode, never `-pl`."""
    from dataclasses import replace

    from desktop.telemetry.simulated import parse_profile_list, profile_info

    card = VerdictCard(DARK)
    qtbot.addWidget(card)
    hot = replace(_verdict("throttled"), cause="sw_thermal", cause_family="thermal", onset_temperature_c=87.0,
                  cause_shares={"sw_thermal": 0.68, "hw_thermal": 0.015}, load_s=600.0)
    laptop = profile_info(parse_profile_list("rtx4090-laptop")[0], 0)
    card.show_verdict(hot, None, laptop)
    text = card.advice.text()
    assert card.advice.isVisibleTo(card)
    assert text.startswith("What to do: Switch to the firmware's performance mode") and "-pl" not in text
    assert "Evidence: SW thermal slowdown 68 %, HW thermal slowdown 2 % of 10 minutes under load; at 87 °C" in text
    card.resize(900, 260)
    card.grab().save(str(tmp_path / "verdict-card.png"))
    card.show_verdict(_verdict("passed"), None, laptop)
    assert not card.advice.isVisibleTo(card)


def _forecast(steady_c: float, interval_c: tuple[float, float], slowdown_c: float | None = 87.0) -> TemperatureForecast:
    return TemperatureForecast(steady_temperature_c=steady_c, interval_c=interval_c, time_constant_s=90.0,
                               start_c=35.0, fitted_s=90.0, rms_c=0.3, slowdown_c=slowdown_c,
                               reaches_slowdown=None if slowdown_c is None else steady_c >= slowdown_c,
                               slowdown_after_s=145.0 if slowdown_c is not None and steady_c >= slowdown_c else None,
                               fit_to_s=120.0)


def test_a_forecast_gives_the_title_and_its_basis_never_as_a_measurement(qtbot: QtBot) -> None:
    """Issue 32 item 8: a run still heating up is titled by its forecast, with what the forecast rests on."""
    card = VerdictCard(DARK)
    qtbot.addWidget(card)
    heating = replace(_verdict("inconclusive"), forecast=_forecast(99.8, (99.3, 101.1)), rising_c_per_min=16.1)
    card.show_verdict(heating)
    assert card.title.text() == "Held its speed so far; forecast: reaches its slowdown temperature"
    assert not card.forecast.isHidden()
    assert card.forecast.text().startswith("Forecast (not a measurement): first-order fit")
    near = replace(heating, forecast=_forecast(88.0, (85.0, 91.0)))
    card.show_verdict(near)
    assert card.title.text() == "Held its speed so far; forecast: near its slowdown temperature"
    warming = replace(_verdict("passed"), forecast=_forecast(74.0, (73.0, 75.0), 86.0), rising_c_per_min=5.0)
    card.show_verdict(warming)
    assert card.title.text() == "Held its speed so far; forecast: stays below its slowdown temperature"
    settled = replace(warming, rising_c_per_min=0.2)  # at its steady temperature: a measurement, no forecast title
    card.show_verdict(settled)
    assert card.title.text() == "Passed: held its speed" and card.forecast.isHidden()
    card.show_verdict(_verdict("inconclusive"))  # no forecast (too short to fit): the plain title
    assert card.title.text() == "Inconclusive: still heating up" and card.forecast.isHidden()
