"""The window on the simulated GPU: starts, plots fill, a lost GPU shows its badge, pages and shortcuts."""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel, QVBoxLayout, QWidget

from desktop.telemetry.model import DeviceState
from desktop.ui.pages.base import PageWidget
from tests.unit.ui.conftest import FakeClock


def activate(window: QWidget, qtbot) -> None:
    """Shortcuts need the active window; offscreen, activation arrives through the event loop."""
    window.show()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)


def test_window_starts_on_the_simulated_gpu_and_plots_hold_data_within_a_few_ticks(make_app, qtbot):
    h = make_app(clock=FakeClock(auto=True))
    h.backend.manual.set(0, 0.8, 4000.0)
    h.app.sampling.set_interval(0.02)
    h.app.start()
    qtbot.waitExposed(h.app.window)
    panel = None

    def plotted() -> bool:
        nonlocal panel
        h.app.dashboard.repaint_plots()
        panel = h.app.dashboard.panels.get(0)
        return panel is not None and panel.plots.plot("util").data("utilization_gpu_pct")[0].size >= 3

    qtbot.waitUntil(plotted, timeout=5000)
    assert h.app.sampling.ticks >= 3
    times, util = panel.plots.plot("util").data("utilization_gpu_pct")
    assert np.all(np.diff(times) > 0)
    assert np.nanmax(util) > 50  # the load we set shows up
    temp = panel.plots.plot("temp").data("temperature_c")[1]
    assert np.isfinite(temp).all()
    assert h.app.window.page_keys() == ["dashboard", "processes", "stress", "advisor", "costs", "history", "jobs",
                                         "fleet", "settings"]
    assert h.app.stress.device == "sim"  # the stress test runs on the GPU the window shows
    assert "simulated" in h.app.window.source_label.text()
    assert "Recording" in h.app.window.recording_label.text()
    assert panel.card.badge.text() == "SIMULATED"
    h.app.shutdown()
    assert not h.app.sampling.isRunning()


def test_a_lost_gpu_shows_its_badge_while_the_other_keeps_updating(make_app):
    h = make_app("rtx4090-laptop,rtx4090")
    h.app.window.show()
    h.backend.manual.set(0, 0.9, 2000.0)
    h.backend.manual.set(1, 0.5, 3000.0)
    h.tick(3)
    dash = h.app.dashboard
    assert set(dash.panels) == {0, 1}
    h.backend.model.set_lost(1, True)
    h.tick(3)
    dash.repaint_plots()
    lost, ok = dash.panels[1], dash.panels[0]
    assert lost.card.badge.text() == "LOST"
    assert lost.card.state is DeviceState.LOST
    assert ok.card.badge.text() == "SIMULATED"
    assert len(ok.ring) == 6 and np.isfinite(ok.ring.view("temperature_c")).all()
    lost_temps = lost.ring.view("temperature_c")
    assert np.isfinite(lost_temps[:3]).all() and np.isnan(lost_temps[3:]).all()  # a gap, not a fake value
    assert lost.card.values["temperature"].text() == "n/a"
    assert ok.card.values["temperature"].text().endswith("°C")
    assert any(a.kind == "lost" and a.gpu_index == 1 for a in h.app.fired)


def test_cards_show_units_on_every_number(make_app):
    h = make_app()
    h.app.window.show()
    h.backend.manual.set(0, 1.0, 8000.0)
    h.tick(5)
    card = h.app.dashboard.panels[0].card
    units = {"utilization": "%", "vram": "MiB", "temperature": "°C", "power": "W", "clock": "MHz"}
    for key, unit in units.items():
        assert unit in card.values[key].text(), (key, card.values[key].text())
    assert " / " in card.values["power"].text()  # against the enforced limit


def test_limit_lines_come_from_the_device(make_app):
    h = make_app()
    h.app.window.show()
    h.tick()
    panel = h.app.dashboard.panels[0]
    info = panel.info
    line, _ = panel.plots.plot("power")._limits["limit"]
    assert line.value() == info.power_limit_enforced_w
    line, _ = panel.plots.plot("temp")._limits["slowdown"]
    assert line.value() == info.temp_slowdown_c
    line, _ = panel.plots.plot("clock")._limits["max"]
    assert line.value() == info.sm_clock_max_mhz


def test_pause_freezes_the_plots_and_resume_catches_up(make_app, qtbot):
    h = make_app()
    activate(h.app.window, qtbot)
    h.tick(3)
    dash = h.app.dashboard
    dash.repaint_plots()
    plot = dash.panels[0].plots.plot("util")
    assert plot.data("utilization_gpu_pct")[0].size == 3
    qtbot.keyClick(h.app.window, Qt.Key.Key_Space)
    assert dash.paused and dash.pause_button.text() == "Resume"
    h.tick(2)
    dash.repaint_plots()
    assert plot.data("utilization_gpu_pct")[0].size == 3
    assert len(dash.panels[0].ring) == 5  # sampling went on
    qtbot.keyClick(h.app.window, Qt.Key.Key_Space)
    assert not dash.paused
    assert plot.data("utilization_gpu_pct")[0].size == 5


def test_repaint_is_skipped_when_nothing_changed(make_app):
    h = make_app()
    h.app.window.show()
    h.tick(2)
    dash = h.app.dashboard
    dash.repaint_plots()
    before = dash.repaints
    dash.repaint_plots()
    assert dash.repaints == before
    h.tick()
    dash.repaint_plots()
    assert dash.repaints == before + 1


def test_time_window_buttons_set_the_x_range(make_app):
    h = make_app()
    h.app.window.show()
    h.tick(120)
    dash = h.app.dashboard
    dash.set_window("1 min")
    plot = dash.panels[0].plots.plot("util")
    times = plot.data("utilization_gpu_pct")[0]
    assert times.size == 61 and times[-1] - times[0] == 60.0
    (x0, x1), _ = plot.item.viewRange()
    assert math.isclose(x1 - x0, 60.0, rel_tol=0.05)
    assert x1 >= times[-1]  # the newest sample is on screen, the lead ahead of it


def test_time_axis_jumps_once_per_lead_instead_of_every_sample(make_app):
    h = make_app()
    h.app.window.show()
    h.tick(30)
    dash = h.app.dashboard
    dash.set_window("10 min")  # lead: 2 % of 600 s = 12 s
    plot = dash.panels[0].plots.plot("util")
    ranges = []
    for _ in range(30):
        h.tick()
        dash.repaint_plots()
        ranges.append(plot.item.viewRange()[0])
        assert ranges[-1][1] >= plot.data("utilization_gpu_pct")[0][-1]
    assert 2 <= len(set(map(tuple, ranges))) <= 4  # 30 samples, a move every ~12


def test_hover_crosshair_shows_the_values_at_that_instant(make_app):
    h = make_app()
    h.app.window.show()
    h.backend.manual.set(0, 0.7, 1000.0)
    h.tick(10)
    dash = h.app.dashboard
    dash.repaint_plots()
    column = dash.panels[0].plots
    times, temps = column.plot("temp").data("temperature_c")
    column.hover_at(float(times[4]))
    assert all(p.crosshair.isVisible() for p in column.plots())
    html = column.plot("temp").readout.textItem.toHtml()
    assert f"{temps[4]:,.0f} °C" in html
    column.hover_at(None)
    assert not any(p.crosshair.isVisible() for p in column.plots())


def test_pages_switch_with_ctrl_number_and_the_sidebar(make_app, qtbot):
    h = make_app()
    w = h.app.window
    activate(w, qtbot)
    qtbot.keyClick(w, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    assert w.current_page() == "processes"
    assert w.stack.currentWidget() is h.app.processes
    w.sidebar.setCurrentRow(0)
    assert w.current_page() == "dashboard"


def _label_page(text: str) -> PageWidget:
    page = PageWidget()
    QVBoxLayout(page).addWidget(QLabel(text))
    return page


def test_add_page_registers_a_page_once(make_app):
    h = make_app()
    w = h.app.window
    page = _label_page("extra")
    w.add_page("extra", "Extra", page)
    assert w.page_keys()[-1] == "extra"
    assert w.sidebar.item(w.sidebar.count() - 1).text() == "Extra"
    w.show_page("extra")
    assert w.stack.currentWidget() is page
    try:
        w.add_page("extra", "Again", _label_page("again"))
    except ValueError as exc:
        assert "already" in str(exc)
    else:
        raise AssertionError("a duplicate page key was accepted")


def test_the_dashboard_says_it_is_waiting_before_the_first_reading(make_app):
    h = make_app()
    h.app.window.show()
    assert h.app.dashboard.empty.isVisible()
    assert "Waiting" in h.app.dashboard.empty.text()
    h.tick()
    assert not h.app.dashboard.empty.isVisible()


def test_gpu_selector_shows_one_gpu_or_all(make_app):
    h = make_app("rtx4090-laptop,rtx4090")
    h.app.window.show()
    h.tick()
    dash = h.app.dashboard
    assert dash.gpu_choice.count() == 3
    dash.gpu_choice.setCurrentIndex(2)
    assert not dash.panels[0].isVisible() and dash.panels[1].isVisible()
    dash.gpu_choice.setCurrentIndex(0)
    assert dash.panels[0].isVisible() and dash.panels[1].isVisible()


def test_four_gpus_fit_side_by_side_at_1600_px(make_app, qtbot):
    h = make_app("rtx4090-laptop,rtx4090,rtx4090-laptop,rtx4090")
    h.app.window.show()
    h.tick()
    qtbot.waitUntil(lambda: all(p.isVisible() for p in h.app.dashboard.panels.values()))
    assert h.app.window.minimumSizeHint().width() <= 1600
    assert h.app.window.width() <= 1600


def test_a_page_given_as_a_factory_is_built_on_first_show(make_app):
    h = make_app()
    w = h.app.window
    built: list[PageWidget] = []

    def build() -> PageWidget:
        built.append(_label_page("lazy"))
        return built[-1]

    w.add_page("lazy", "Lazy", build)
    assert not built and not w.is_built("lazy") and "lazy" in w.page_keys()
    w.show_page("lazy")
    assert len(built) == 1 and w.is_built("lazy")
    assert w.stack.currentWidget() is built[0] and w.page("lazy") is built[0]
    w.show_page("dashboard")
    w.show_page("lazy")
    assert len(built) == 1  # built once
