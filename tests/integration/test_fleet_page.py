"""The Fleet page against a real Prometheus scraping two real `rigscope record --simulate --prometheus` processes
and a dcgm-exporter text target (test_fleet.py's ``scraped``): the cards, a machine's query_range plots and
lanes, and the 7-day advice's queries, all accepted and answered by the real server."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from desktop.config import FleetSettings, Settings
from desktop.fleet.advice import QUERIES, advise
from desktop.fleet.reader import GPU_QUERIES, HOST_QUERIES
from desktop.ui.pages.fleet_page import FleetPage
from desktop.ui.theme import resolve
from tests.integration.test_fleet import DCGM_HOST, RIGS, _count, fleet, scraped  # noqa: F401 - the fixture
from tests.waits import until

#: The offscreen platform's harmless warning (as tests/unit/ui/conftest.py ignores it).
pytestmark = [pytest.mark.integration, pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")]


def _page(qtbot: Any, url: str) -> FleetPage:
    settings = FleetSettings(url=url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIGSCOPE_FLEET_")}
    page = FleetPage(lambda: settings, lambda: 85.0, resolve("dark"), environ=env,
                     advise=lambda client, fleet: advise(client, fleet, Settings()))
    qtbot.addWidget(page)
    page.resize(1400, 900)
    page.show()
    return page


def test_the_page_shows_the_real_fleet_its_plots_lanes_and_advice(qtbot: Any, scraped: dict[str, Any]) -> None:  # noqa: F811
    # The 7-day counts step by whole minutes: a server up for seconds may have no step with data yet.
    until(lambda: _count(scraped["url"], QUERIES["recorded_s"]) >= 4, 150.0)
    page = _page(qtbot, scraped["url"])
    page.page_shown()
    qtbot.waitUntil(lambda: page.fleet is not None and {*RIGS, DCGM_HOST} <= set(page.cards), timeout=60_000)
    assert not page.error, page.error
    assert "DCGM only" in page.cards[DCGM_HOST].header.text()
    assert "recorder up" in page.cards["rig-two"].header.text()
    assert page.cards["rig-two"].gpus_label.text().count("H100") == 2

    page.select("rig-two")
    qtbot.waitUntil(lambda: page.history is not None or "failed" in page.detail_title.text(), timeout=60_000)
    assert page.history is not None, page.detail_title.text()
    history = page.history
    assert history.requests == 6 and not history.violation_lanes
    assert len(history.series) == 2  # both GPUs, by UUID
    for plots in history.series.values():
        assert plots["temp"] and all(15.0 <= v <= 110.0 for _t, v in plots["temp"])
    gpu = next(iter(history.series))
    assert page.plots.plot("temp").data(gpu)[1].size == len(history.series[gpu]["temp"])

    page.history = None
    page.select(DCGM_HOST)
    qtbot.waitUntil(lambda: page.history is not None or "failed" in page.detail_title.text(), timeout=60_000)
    assert page.history is not None, page.detail_title.text()
    assert page.history.violation_lanes and page.history.requests == 7  # 5 plots and 2 violation counters
    assert [v for _t, v in page.history.series["GPU-dcgm-0000"]["power"]][-1] == 312.5

    qtbot.waitUntil(lambda: page.fleet_advice is not None or page.advice.text().startswith("Fleet advice"),
                    timeout=60_000)
    advice = page.fleet_advice
    assert advice is not None, page.advice.text()
    assert advice.requests == 5 and {"rig-one", "rig-two", DCGM_HOST} <= set(advice.by_machine)
    assert all(recorded > 0 for _busy, recorded in advice.by_machine.values())
    page.page_hidden()
    assert page.loader.wait(30.0) and page.history_loader.wait(30.0) and page.advice_loader.wait(30.0)


def test_rigscope_fleet_advice_json_is_the_pages_advice(scraped: dict[str, Any]) -> None:  # noqa: F811
    until(lambda: _count(scraped["url"], QUERIES["recorded_s"]) >= 4, 150.0)
    result = fleet(scraped["url"], "--advice", "--json", env=scraped["env"])
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    advice = doc["advice"]
    assert doc["requests"] == len(GPU_QUERIES) + len(HOST_QUERIES)  # one per metric
    assert advice["requests"] == 5 and advice["window_s"] == 7 * 86400
    assert {"rig-one", "rig-two", DCGM_HOST} <= set(advice["busy_gpu_hours_by_machine"])
    assert all(row["recorded_h"] > 0 for row in advice["busy_gpu_hours_by_machine"].values())
    assert {g["uuid"] for g in advice["gpus"]} >= {"GPU-dcgm-0000"}
    table = fleet(scraped["url"], "--advice", env=scraped["env"])
    assert table.returncode == 0, table.stderr
    assert "Over the last 7 days:" in table.stdout
