"""The window's History page opens on the week `rigscope report` writes by default (issue 32).

Before, the page opened the newest week in its list (the current, partly recorded one) while `report`
wrote the last full week: the same history gave two "default weeks" with their own figures.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from desktop import cli, config
from desktop.history.demo import write_demo
from desktop.reporting import HistorySource
from desktop.telemetry.simulated import parse_profile_list
from desktop.ui.pages.advisor_history import HistoryPage
from tests.unit.advisor.demo_frame import DEMO_WEEK_START_S

#: Wednesday noon of the week after the demo's week: this week is partial, last week holds half a day.
NOW_S = DEMO_WEEK_START_S + 7 * 86400.0 + 2.5 * 86400.0


def test_the_window_opens_the_week_report_writes(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")  # both read weeks in local time
    time.tzset()
    try:
        db = tmp_path / "h.sqlite"
        write_demo(db, parse_profile_list("rtx4090-laptop"), days=3, now_s=NOW_S)
        out = tmp_path / "week.json"
        assert cli.main(["report", "--db", str(db), "-o", str(out)], now_s=NOW_S) == 0
        written = json.loads(out.read_text())["week"]
        source = HistorySource(db, config.Settings())
        page = HistoryPage(source.weeks, source.report, default_week=lambda: source.default_week(NOW_S))
        qtbot.addWidget(page)
        page.refresh()
        assert page.week_combo.count() == 2  # this week is listed first, and picked only by hand
        assert page.week_combo.currentText() == written
        qtbot.waitUntil(lambda: not page.loading and page.data is not None, timeout=30_000)
        assert page.data.week_label == written
    finally:
        monkeypatch.undo()
        time.tzset()
