"""The Stress page says, under the verdict, why the GPU's power limit was where it was."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from desktop.stress.verdict import Verdict
from desktop.ui.stress_page import StressPage
from desktop.ui.stress_verdict_card import VerdictCard
from desktop.ui.theme import LIGHT, resolve
from tests.unit.ui.test_stress_page import sim_runners


def _verdict() -> Verdict:
    return Verdict(status="passed", throttled=False, onset_s=None, peak=70.0, sustained=70.0, sustained_ratio=1.0,
                   unit="TFLOP/s", basis="throughput", clock_ratio=None, cause=None, cause_family=None,
                   onset_temperature_c=None, sentence="Passed.", comparison="")


def test_verdict_card_shows_the_line_escaped(qtbot: QtBot) -> None:
    card = VerdictCard(LIGHT)
    qtbot.addWidget(card)
    card.show_verdict(_verdict(), "capped at 80 W of 175 W: firmware mode Eco\x1b[31m")
    assert card.text.text().startswith("Passed.\nPower limit: capped at 80 W of 175 W: firmware mode Eco")
    assert "\x1b" not in card.text.text()
    card.show_verdict(_verdict())
    assert card.text.text() == "Passed."


def test_quick_run_on_the_simulated_laptop_names_its_limit(qtbot: QtBot) -> None:
    page = StressPage(resolve("light"), sim_runners(), db_path=None, device="sim")
    qtbot.addWidget(page)
    page.presets.button(0).setChecked(True)  # Quick 2 min
    page.start()
    with qtbot.waitSignal(page.finished, timeout=60_000):
        pass
    assert page.verdict_text.text().endswith("\nPower limit: capped at 150 W of 175 W: firmware mode Balanced.")
