"""Advisor, Costs and History pages on the demo week (built in memory), with pytest-qt."""

from __future__ import annotations

import dataclasses
import json
import threading
from datetime import UTC
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel

from advisor.rules import Recommendation
from desktop import config
from desktop.advice import Advice, compute_advice
from desktop.config import CostSettings
from desktop.reporting import build_report
from desktop.ui.background import running_jobs
from desktop.ui.pages.advisor_history import HistoryPage
from desktop.ui.pages.advisor_page import AdviceState, AdvisorPage
from desktop.ui.pages.costs_page import CostsPage
from tests.unit.advisor.demo_frame import DEMO_WEEK_START_S, TWO_GPUS, demo_week_frame
from tests.unit.advisor.test_demo_week import EXPECTED, EXPECTED_DESKTOP

#: Both demo GPUs' advice: the laptop's six and the desktop's power cap.
ALL = sorted([*EXPECTED, *EXPECTED_DESKTOP])

EVIL = "<b>evil</b>"


@pytest.fixture(scope="module")
def advice() -> Advice:
    return compute_advice(demo_week_frame(TWO_GPUS), config.Settings())


class Clock:
    def __init__(self) -> None:
        self.now_s = 1_000_000.0

    def __call__(self) -> float:
        return self.now_s


def _loaded(qtbot, page) -> None:
    """The page reads on a worker thread: wait for its answer to arrive on the GUI thread."""
    qtbot.waitUntil(lambda: not page.loading, timeout=20_000)


def _titles(page: AdvisorPage) -> list[str]:
    return [card.rec.rule_id for card in page.cards]


def test_advisor_cards_by_severity_with_evidence_chart_and_action(qtbot, advice: Advice, tmp_path: Path) -> None:
    page = AdvisorPage(lambda: advice, AdviceState(tmp_path / "state.json"))
    qtbot.addWidget(page)
    page.refresh()
    _loaded(qtbot, page)
    assert sorted(_titles(page)) == ALL
    severities = [card.rec.severity for card in page.cards]
    assert severities == sorted(severities, key=["critical", "warning", "info"].index)
    card = page.cards[0]
    assert card.chart is not None and "Action:" in card.action.text()
    assert card.evidence.text().startswith("• ")
    assert len(ALL) > 1 and f"{len(ALL)} recommendations" in page.header.text() and "demo data" in page.header.text()


def test_dismiss_and_snooze_are_remembered(qtbot, advice: Advice, tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "state.json"
    page = AdvisorPage(lambda: advice, AdviceState(path, clock))
    qtbot.addWidget(page)
    page.refresh()
    _loaded(qtbot, page)
    battery = next(c for c in page.cards if c.rec.rule_id == "battery_heavy")
    battery.dismiss_button.click()
    thermal = next(c for c in page.cards if c.rec.rule_id == "thermal_throttling")
    thermal.snooze_button.click()
    assert "battery_heavy" not in _titles(page) and "thermal_throttling" not in _titles(page)
    assert "2 dismissed or snoozed" in page.header.text()
    saved = json.loads(path.read_text())
    assert list(saved["dismissed"]) == ["battery_heavy:GPU-SIM00-rtx4090-laptop"]
    # a new page (the next start) remembers both
    again = AdvisorPage(lambda: advice, AdviceState(path, clock))
    qtbot.addWidget(again)
    again.refresh()
    _loaded(qtbot, again)
    assert len(again.cards) == len(ALL) - 2
    # a week later the snooze is over; the dismissal is not
    clock.now_s += 7 * 86400 + 1
    again.refresh()
    _loaded(qtbot, again)
    assert "thermal_throttling" in _titles(again) and "battery_heavy" not in _titles(again)
    # hidden ones can be shown and restored
    again.show_hidden.setChecked(True)
    hidden = next(c for c in again.cards if c.rec.rule_id == "battery_heavy")
    assert hidden.dismiss_button.text() == "Restore"
    hidden.dismiss_button.click()
    again.show_hidden.setChecked(False)
    assert "battery_heavy" in _titles(again)


def test_a_damaged_state_file_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("{not json")
    assert not AdviceState(path).hidden("x:y")


def test_machine_text_is_shown_as_plain_text(qtbot, advice: Advice, tmp_path: Path) -> None:
    rec = Recommendation("idle_memory", "warning", f"GPU 0: {EVIL} holds 6 GiB", (), f"kill {EVIL}", (), 0)
    evil = dataclasses.replace(advice, recommendations=(rec,))
    page = AdvisorPage(lambda: evil, AdviceState(tmp_path / "s.json"))
    qtbot.addWidget(page)
    page.refresh()
    _loaded(qtbot, page)
    (card,) = page.cards
    assert card.title.text() == f"GPU 0: {EVIL} holds 6 GiB"
    assert card.title.textFormat().name == "PlainText"


def test_no_history_is_said_plainly(qtbot, tmp_path: Path) -> None:
    page = AdvisorPage(lambda: None, AdviceState(tmp_path / "s.json"))
    qtbot.addWidget(page)
    page.page_shown()
    _loaded(qtbot, page)
    assert "No history" in page.header.text() and page.cards == []


def test_costs_page_recomputes_from_its_inputs(qtbot, advice: Advice) -> None:
    page = CostsPage(lambda: advice, CostSettings(purchase_price=3000.0, amortisation_months=36))
    qtbot.addWidget(page)
    page.refresh()
    _loaded(qtbot, page)
    c = page.comparison
    assert c is not None and c.owned_fixed_month == pytest.approx(3000 / 36)
    assert page.table.rowCount() == len(c.options) > 0
    cheapest = c.options[0]
    assert page.table.item(0, 0).text() == cheapest.offer.gpu_model
    with qtbot.waitSignal(page.costs_changed) as signal:
        page.price.setValue(6000.0)
    assert signal.args[0].purchase_price == 6000.0
    assert page.comparison.owned_fixed_month == pytest.approx(6000 / 36)
    # a higher purchase price moves the break-even point out
    assert page.comparison.options[0].break_even_busy_hours_month > cheapest.break_even_busy_hours_month
    assert "busy hours/month" in page.summary.text()


def test_history_page_shows_weeks_and_exports(qtbot, advice: Advice, tmp_path: Path) -> None:
    frame = demo_week_frame(TWO_GPUS)
    data = build_report(frame, None, config.Settings(), UTC, "2026-W47", now_s=DEMO_WEEK_START_S + 8 * 86400)
    asked: list[str] = []

    def report(label: str):
        asked.append(label)
        return dataclasses.replace(data, week_label=label)

    page = HistoryPage(lambda: ["2026-W47", "2026-W46"], report)
    qtbot.addWidget(page)
    page.page_shown()
    _loaded(qtbot, page)
    assert asked == ["2026-W47"]
    text = page.view.toPlainText()
    assert "Rigscope weekly report, 2026-W47" in text and "Top recommendations" in text
    assert not page.next_button.isEnabled() and page.previous_button.isEnabled()
    page.previous_button.click()
    _loaded(qtbot, page)
    assert asked[-1] == "2026-W46"
    for suffix in (".html", ".pdf", ".json", ".csv"):
        out = tmp_path / f"week{suffix}"
        page.export(out)
        assert out.stat().st_size > 1000
    assert (tmp_path / "week.pdf").read_bytes().startswith(b"%PDF")


def test_history_page_without_history(qtbot) -> None:
    page = HistoryPage(lambda: [], lambda label: None)
    qtbot.addWidget(page)
    page.page_shown()
    _loaded(qtbot, page)
    assert "No history yet" in page.view.toPlainText()


def test_a_failing_read_is_said_on_the_page_and_refresh_works_again(qtbot, advice: Advice, tmp_path: Path) -> None:
    answers: list[object] = [OSError("disk I/O error"), advice]

    def source() -> Advice:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, Advice)
        return answer

    page = AdvisorPage(source, AdviceState(tmp_path / "s.json"))
    qtbot.addWidget(page)
    page.refresh()
    assert page.loading and not page.refresh_button.isEnabled()
    _loaded(qtbot, page)
    assert page.header.text() == "Could not read the history: OSError: disk I/O error"
    assert page.refresh_button.isEnabled() and page.cards == []
    page.refresh_button.click()
    _loaded(qtbot, page)
    assert sorted(_titles(page)) == ALL


def test_the_history_page_shows_the_newest_pick_when_an_older_load_ends_later(qtbot, advice: Advice) -> None:
    frame = demo_week_frame(TWO_GPUS)
    data = build_report(frame, None, config.Settings(), UTC, "2026-W47", now_s=DEMO_WEEK_START_S + 8 * 86400)
    release = threading.Event()

    def report(label: str):
        if label == "2026-W47":
            release.wait(20)  # a slow read of the first week
        return dataclasses.replace(data, week_label=label)

    page = HistoryPage(lambda: ["2026-W47", "2026-W46"], report)
    qtbot.addWidget(page)
    page.page_shown()
    assert "Reading 2026-W47" in page.view.toPlainText() and not page.export_button.isEnabled()
    page.week_combo.setCurrentIndex(1)  # picked before the first one arrived
    qtbot.waitUntil(lambda: "2026-W46" in page.view.toPlainText() and "weekly report" in page.view.toPlainText(),
                    timeout=20_000)
    release.set()
    # The first week's answer arrives now, and is dropped: its read ends (not a fixed 300 ms, in which a busy
    # machine may not have run it, so the check would pass without having been made), then its queued answer.
    qtbot.waitUntil(lambda: not running_jobs(), timeout=60_000)
    qtbot.wait(20)
    assert "weekly report, 2026-W46" in page.view.toPlainText() and page.data.week_label == "2026-W46"
    assert page.export_button.isEnabled()


def test_cards_show_no_rule_ids_and_no_backticks(qtbot, advice: Advice, tmp_path: Path) -> None:
    """The rule id is for the CLI and the reports: a card reads as sentences, `code` as plain text."""
    page = AdvisorPage(lambda: advice, AdviceState(tmp_path / "state.json"))
    qtbot.addWidget(page)
    page.refresh()
    _loaded(qtbot, page)
    assert any("`" in card.rec.action for card in page.cards)  # the advice itself marks code
    for card in page.cards:
        shown = [label.text() for label in card.findChildren(QLabel)]
        assert not any(card.rec.rule_id in text for text in shown), shown
        assert not any("`" in text for text in shown), shown
        assert card.rec.rule_id in card.toolTip()  # still there for whoever reports an issue
