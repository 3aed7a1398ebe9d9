"""The Fleet page over canned Prometheus answers (httpx.MockTransport): off until a URL is set, a card per machine
in the CLI's attention order, DCGM-only said so, errors as one line, reads off the GUI thread, a machine's plots
and throttle lanes from query_range."""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Callable

import httpx
import numpy as np
import pytest

from advisor.costs import CostInputs
from desktop.config import FleetSettings
from desktop.fleet.advice import QUERIES, FleetAdvice, fleet_advice, read_usage
from desktop.fleet.client import Connection, PrometheusClient
from desktop.fleet.history import machine_selector
from desktop.fleet.model import Fleet
from desktop.telemetry import metric_names as names
from desktop.telemetry.metric_names import dcgm_name
from desktop.ui.pages.fleet_page import ADVICE_EVERY_S, EMPTY_TEXT, REFRESH_S, FleetPage
from desktop.ui.theme import resolve
from tests.unit.fleet.test_reader import HOT_C, NOW_S, Canned
from tests.unit.ui.conftest import gui_stays_responsive

DARK = resolve("dark")
URL = "http://prometheus.test:9090"


class CannedRange(Canned):
    """Canned instant answers, plus range answers (PromQL -> [(labels, points)]); the threads it answered on."""

    def __init__(self) -> None:
        super().__init__()
        self.ranges: dict[str, list[tuple[dict[str, str], list[tuple[float, float]]]]] = {}
        self.threads: set[str] = set()
        self.status = 200

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.threads.add(threading.current_thread().name)
        if self.status != 200:
            return httpx.Response(self.status, text="Unauthorized")
        if request.url.path.endswith("/query_range"):
            query = urllib.parse.parse_qs(request.url.query.decode())["query"][0]
            self.asked.append(query)
            result = [{"metric": labels, "values": [[t, repr(v)] for t, v in points]}
                      for labels, points in self.ranges.get(query, [])]
            return httpx.Response(200, json={"status": "success", "data": {"resultType": "matrix", "result": result}})
        return super().handler(request)

    def factory(self) -> Callable[[Connection], PrometheusClient]:
        return lambda connection: PrometheusClient(connection, transport=httpx.MockTransport(self.handler))


def _fleet() -> CannedRange:
    canned = CannedRange()
    canned.host({"Hostname": "ws-fine"}, recorder_up=True)
    canned.gpu({"Hostname": "ws-fine"}, 0, "GPU-a")
    canned.host({"Hostname": "ws-hot"}, recorder_up=True)
    canned.gpu({"Hostname": "ws-hot"}, 0, "GPU-b", reasons=("sw_power_cap",))
    canned.gpu({"Hostname": "ws-hot"}, 1, "GPU-c")
    canned.gpu({"Hostname": "dgx\x1b[31m"}, 0, "GPU-d", rigscope=False)
    return canned


def _page(qtbot, canned: CannedRange, url: str = URL, clock: Callable[[], float] = lambda: NOW_S) -> FleetPage:
    settings = FleetSettings(url=url)
    page = FleetPage(lambda: settings, lambda: HOT_C, DARK, client_factory=canned.factory(), environ={},
                     clock=clock)
    qtbot.addWidget(page)
    page.resize(1400, 900)
    page.show()
    return page


def _shown(qtbot, page: FleetPage) -> None:
    page.page_shown()
    qtbot.waitUntil(lambda: page.fleet is not None or bool(page.error), timeout=30_000)


def _close(page: FleetPage) -> None:
    page.page_hidden()
    assert page.loader.wait(30.0) and page.history_loader.wait(30.0)


def _card_order(page: FleetPage) -> list[str]:
    layout = page.cards_layout
    return [w.name for i in range(layout.count()) if (w := layout.itemAt(i).widget()) is not None]


def test_without_a_url_the_page_says_how_to_set_one_and_asks_nothing(qtbot) -> None:
    canned = _fleet()
    page = _page(qtbot, canned, url="  ")
    page.page_shown()
    assert page.empty.isVisible() and page.empty.text() == EMPTY_TEXT
    assert "Settings" in EMPTY_TEXT and "[fleet]" in EMPTY_TEXT
    assert not page.split.isVisible() and not page.timer.isActive()
    assert canned.asked == [] and not page.loader.busy
    _close(page)


def test_a_card_per_machine_in_the_clis_order_read_off_the_gui_thread(qtbot) -> None:
    canned = _fleet()
    page = _page(qtbot, canned)
    _shown(qtbot, page)
    assert page.timer.isActive()  # live while shown
    # Every request on the page's worker thread (named rigscope-fleet-N), none on the GUI's.
    assert canned.threads and all(name.startswith("rigscope-fleet-") for name in canned.threads)
    # The order is the reader's (rigscope fleet prints the same Fleet): throttled first, then by name.
    assert _card_order(page) == [m.name for m in canned.read().machines] == ["ws-hot", "dgx\x1b[31m", "ws-fine"]
    hot = page.cards["ws-hot"]
    assert "throttled now" in hot.attention.text()
    lines = hot.gpus_label.text().split("\nGPU ")  # a GPU per two lines, the second indented
    assert "throttled: sw_power_cap" in lines[0] and "50 °C" in lines[0] and "300 / 700 W" in lines[0]
    assert "not throttled" in lines[1]
    assert "recorder up" in hot.header.text() and "seen 1 s ago" in hot.header.text()
    dgx = page.cards["dgx\x1b[31m"]
    assert "\x1b" not in dgx.header.text() and "DCGM only" in dgx.header.text()
    assert "no throttle reasons" in dgx.attention.text()
    assert "throttle" not in dgx.gpus_label.text() and "300 W" in dgx.gpus_label.text()
    assert "3 machines, 4 GPUs (1 DCGM only)" in page.status.text()
    _close(page)


def test_a_refresh_keeps_the_cards_and_follows_the_attention_order(qtbot) -> None:
    canned = _fleet()
    page = _page(qtbot, canned)
    _shown(qtbot, page)
    before = dict(page.cards)
    canned.gpu({"Hostname": "a-down"}, 0, "GPU-z", live=False)
    page.read_now()
    qtbot.waitUntil(lambda: "a-down" in page.cards, timeout=30_000)
    assert _card_order(page)[0] == "a-down"  # down outranks throttled
    assert all(page.cards[name] is card for name, card in before.items())  # updated in place, not rebuilt
    assert "down" in page.cards["a-down"].attention.text()
    _close(page)


@pytest.mark.parametrize(("status", "words"), [(401, "401"), (503, "503")])
def test_a_failed_read_is_one_line_and_keeps_the_last_reading(qtbot, status: int, words: str) -> None:
    canned = _fleet()
    page = _page(qtbot, canned)
    _shown(qtbot, page)
    canned.status = status
    page.read_now()
    qtbot.waitUntil(lambda: bool(page.error), timeout=30_000)
    text = page.status.text()
    assert text.startswith("Reading the fleet failed:") and words in text and "\n" not in text
    assert "showing the reading of" in text and len(page.cards) == 3  # the last good reading stays
    canned.status = 200
    page.read_now()
    qtbot.waitUntil(lambda: not page.error, timeout=30_000)
    assert "3 machines" in page.status.text()
    _close(page)


def test_a_dead_server_is_one_line(qtbot) -> None:
    def dead(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    settings = FleetSettings(url=URL)
    page = FleetPage(lambda: settings, lambda: HOT_C, DARK, environ={},
                     client_factory=lambda c: PrometheusClient(c, transport=httpx.MockTransport(dead)))
    qtbot.addWidget(page)
    page.show()
    _shown(qtbot, page)
    assert page.fleet is None and page.status.text().startswith("Reading the fleet failed:")
    assert "prometheus.test" in page.status.text() and "Traceback" not in page.status.text()
    _close(page)


def _points(values: list[float], step_s: float = 60.0) -> list[tuple[float, float]]:
    return [(NOW_S - step_s * (len(values) - i), v) for i, v in enumerate(values)]


def test_clicking_a_machine_shows_its_plots_and_throttle_lanes(qtbot) -> None:
    canned = _fleet()
    hot = {"Hostname": "ws-hot", "gpu": "0", "UUID": "GPU-b"}
    temp = machine_selector(dcgm_name("temperature_c"), "ws-hot")
    canned.ranges[temp] = [(hot, _points([60.0, 70.0, 80.0])),
                           ({"Hostname": "ws-hot", "gpu": "1", "UUID": "GPU-c"}, _points([40.0, 41.0])),
                           # picked by instance, but its Hostname names another machine: not ws-hot's
                           ({"Hostname": "other", "instance": "ws-hot", "UUID": "GPU-x"}, _points([99.0]))]
    # A 1 h window: 15 s steps, the rate over two of them.
    lanes = machine_selector(names.CLOCK_EVENT_SECONDS + "_total", "ws-hot", "rate({}[30s])")
    canned.ranges[lanes] = [({**hot, "reason": "sw_power_cap"}, _points([0.0, 0.5, 1.0])),
                            ({**hot, "reason": "gpu_idle"}, _points([1.0, 1.0, 1.0]))]
    page = _page(qtbot, canned)
    _shown(qtbot, page)
    page.cards["ws-hot"].clicked.emit("ws-hot")
    qtbot.waitUntil(lambda: page.history is not None, timeout=30_000)
    assert page.cards["ws-hot"].selected and not page.cards["ws-fine"].selected
    assert page.history.series.keys() == {"GPU-b", "GPU-c"}  # GPU-x is another machine's
    times, values = page.plots.plot("temp").data("GPU-b")
    assert list(values) == [60.0, 70.0, 80.0] and np.all(np.diff(times) == 60.0)
    lane = page.plots.plot("lane")
    assert lane.categories == ("Power cap",)  # only the causes that held; idle is no throttle cause
    row = 0
    assert list(lane.data("GPU-b/sw_power_cap")[1]) == [row - 0.4, row, row + 0.4]
    # A range query per plot and one for the lanes, not one per GPU; a 1 h window at most 400 points.
    assert page.history.requests == 6 and page.history.step_s == 15.0
    assert page.detail_title.text() == "ws-hot over 1 h"
    _close(page)


def test_a_dcgm_only_machine_shows_its_violation_counters_as_lanes(qtbot) -> None:
    canned = _fleet()
    page = _page(qtbot, canned)
    _shown(qtbot, page)
    page.window_combo.setCurrentText("7 d")
    page.select("dgx\x1b[31m")
    qtbot.waitUntil(lambda: page.history is not None, timeout=30_000)
    assert page.history.violation_lanes and page.plots.plot("lane").categories == ("Power (DCGM)", "Thermal (DCGM)")
    assert page.history.step_s == 7 * 86400 / 400
    assert any("DCGM_FI_DEV_POWER_VIOLATION" in q and "1e+09" in q for q in canned.asked)
    assert "\x1b" not in page.detail_title.text() and "DCGM only" in page.detail_title.text()
    _close(page)


def test_the_7_day_advice_is_shown_under_the_cards_and_not_read_at_every_refresh(qtbot) -> None:
    canned = _fleet()
    for key, value in (("busy_s", 2 * 3600.0), ("recorded_s", 168 * 3600.0)):
        canned.answers[QUERIES[key]] = [({"Hostname": "ws-fine", "gpu": "0", "UUID": "GPU-a"}, value)]
    now = [NOW_S]
    settings = FleetSettings(url=URL)

    def advise(client: PrometheusClient, fleet: Fleet) -> FleetAdvice:
        uses, requests = read_usage(client, fleet)
        return fleet_advice(uses, offers=[], specs=[], inputs=CostInputs(0.0, 36, 0.3), requests=requests)

    page = FleetPage(lambda: settings, lambda: HOT_C, DARK, client_factory=canned.factory(), environ={},
                     clock=lambda: now[0], advise=advise)
    qtbot.addWidget(page)
    page.show()
    _shown(qtbot, page)
    qtbot.waitUntil(lambda: page.fleet_advice is not None, timeout=30_000)
    assert page.advice.isVisible()
    assert "ws-fine sits idle: busy 2 of 168 recorded GPU-hours (1%) in 7 days" in page.advice.text()
    assert page.advice.text().startswith("Over the last 7 days:")
    asked = len([q for q in canned.asked if q in QUERIES.values()])
    assert asked == 5
    now[0] += REFRESH_S  # the next refresh: the fleet is read, the 7 days are not
    page.read_now()
    qtbot.waitUntil(lambda: not page.loading, timeout=30_000)
    assert len([q for q in canned.asked if q in QUERIES.values()]) == asked
    now[0] += ADVICE_EVERY_S
    page.read_now()
    qtbot.waitUntil(lambda: len([q for q in canned.asked if q in QUERIES.values()]) == 2 * asked, timeout=30_000)
    _close(page)


def test_a_url_set_in_settings_takes_effect_at_the_next_read_and_removing_it_turns_the_page_off(qtbot) -> None:
    canned = _fleet()
    current = [FleetSettings()]
    page = FleetPage(lambda: current[0], lambda: HOT_C, DARK, client_factory=canned.factory(), environ={},
                     clock=lambda: NOW_S)
    qtbot.addWidget(page)
    page.show()
    page.page_shown()
    assert page.empty.isVisible() and canned.asked == []
    current[0] = FleetSettings(url=URL)  # saved on the Settings page: the app's settings are read at each refresh
    page.read_now()
    qtbot.waitUntil(lambda: page.fleet is not None, timeout=30_000)
    assert not page.empty.isVisible() and page.split.isVisible() and len(page.cards) == 3
    current[0] = FleetSettings()
    page.read_now()
    assert page.empty.isVisible() and not page.split.isVisible() and not page.loader.busy
    _close(page)


def test_the_settings_pages_prometheus_url_reaches_the_apps_fleet_page(make_app) -> None:
    h = make_app()
    fleet_page = h.app.window.page("fleet")
    assert isinstance(fleet_page, FleetPage) and not fleet_page.configured
    page = h.app.settings_page
    assert page.editors["fleet.url"].width() >= 300  # a URL, not a number's box
    page.editors["fleet.url"].setText("http://prometheus.test:9090")
    page.editors["fleet.timeout_s"].setText("2.5")
    assert page.save() is True
    assert fleet_page.configured and fleet_page.settings_source() == FleetSettings(url="http://prometheus.test:9090",
                                                                                   timeout_s=2.5)
    fleet_page.timer.start()  # as while the page is shown (without a read: nothing answers at that URL)
    h.app.shutdown()
    assert not fleet_page.timer.isActive()  # shut down with the app: no read after it


def test_a_server_that_hangs_never_blocks_the_window_and_is_not_piled_on(qtbot) -> None:
    canned = _fleet()
    release = threading.Event()
    answer = canned.handler
    held: list[str] = []

    def hanging(request: httpx.Request) -> httpx.Response:
        held.append(threading.current_thread().name)
        release.wait(30.0)  # the server holds the request until the test lets it go
        return answer(request)

    canned.handler = hanging  # type: ignore[method-assign]
    page = _page(qtbot, canned)
    page.page_shown()
    qtbot.waitUntil(lambda: bool(held), timeout=30_000)  # the first request is out, and held
    gui_stays_responsive(qtbot)  # the GUI thread runs its event loop meanwhile
    assert page.loader.busy and page.status.text() == "Reading the fleet…"
    for _ in range(3):  # the timer's next ticks while the read hangs: no second read beside it
        page.read_now()
    assert len(held) == 1 and held[0].startswith("rigscope-fleet-")
    release.set()
    qtbot.waitUntil(lambda: page.fleet is not None, timeout=30_000)
    assert len(page.cards) == 3
    _close(page)
