"""Issue 37 item 6, the first hour in the window: the demo's progress label inside its bar, the simulated bar's
word after the demo loaded, and the history note over a plot that shows live data."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from desktop.history.store import HistoryStore
from desktop.ui.theme import DARK
from desktop.ui.widgets.charts import _SWATCHES as _SWATCH
from desktop.ui.widgets.simulated_bar import DEMO_IDLE_TEXT, IDLE_TEXT, SimulatedBar
from tests.unit.ui.conftest import FakeClock
from tests.unit.ui.test_window_sees_other_writers import _after_two_finetune_jobs
from tests.waits import DEADLINE_S

#: Every step the demo writer reports (desktop/history/demo.py), the longest first.
STEPS = ("Simulating day 366 of 366…", "Simulating day 1 of 7…", "Rolling up…", "Done")


def test_the_demo_progress_label_fits_its_bar(qtbot: QtBot) -> None:
    bar = SimulatedBar(DARK)
    qtbot.addWidget(bar)
    bar.resize(1400, 60)
    bar.show()
    bar.demo_started()
    for step in STEPS:
        bar.demo_progress(0.8, step)
        progress = bar.progress
        shown = progress.text()
        assert shown.endswith("80 %")
        room = progress.contentsRect().width() - 8
        assert progress.fontMetrics().horizontalAdvance(shown) <= room, (shown, room)  # no overflow
        assert progress.toolTip() == step  # the whole step, where it had to be shortened
    bar.demo_progress(0.8, "Writing samples for a GPU with a very long name indeed, far longer than any bar is")
    shown = bar.progress.text()
    assert "…" in shown and bar.progress.fontMetrics().horizontalAdvance(shown) <= bar.progress.width()


def test_the_simulated_bar_stops_saying_flat_once_the_demo_week_is_shown(make_app, tmp_path) -> None:
    h = make_app(clock=FakeClock(start_s=_after_two_finetune_jobs()))
    app = h.app
    bar = app.dashboard.simulated_bar
    h.tick(3)
    assert bar.text.text() == IDLE_TEXT  # nothing runs, no demo: the graphs do stay flat
    app.demo_path = tmp_path / "demo.sqlite"
    app.demo_days = 0.05
    app.load_demo_week()
    app.demo_loader.wait(DEADLINE_S)
    app.qt_app.processEvents()
    assert bar.text.text() == DEMO_IDLE_TEXT and "stay flat until" not in DEMO_IDLE_TEXT.split(".")[0]
    h.tick(3)  # a fresh process list, still idle: it stays the demo's word
    assert bar.text.text() == DEMO_IDLE_TEXT
    bar.demo_button.click()  # Leave demo
    assert bar.text.text() == IDLE_TEXT


def test_a_window_with_live_minutes_and_no_older_history_says_what_it_shows(make_app, qtbot, tmp_path) -> None:
    db = tmp_path / "history.sqlite"
    HistoryStore.open(db).close()  # a history with nothing in it yet (a fresh install)
    from desktop.sessions.recording import RecordingSession

    store = HistoryStore.open(db, readonly=True)
    h = make_app(recording=RecordingSession("reading", "test", store=store))
    h.app.window.show()
    h.tick(9 * 60)  # 9 minutes of live readings
    dash = h.app.dashboard
    dash.set_window("1 h")
    qtbot.waitUntil(lambda: not dash.loading, timeout=DEADLINE_S * 1000)
    note = dash.history_note.text()
    assert "No history for this window yet" not in note
    assert note == "Showing the live readings of the last 9 min: nothing recorded before them", note
    live_t, _ = dash.panels[0].plots.plot("util").data("utilization_gpu_pct")
    assert live_t.size >= 9 * 60 - 1  # the plot does hold the 9 minutes the note names


def test_every_line_of_the_utilization_plot_is_named_where_it_is_drawn(make_app) -> None:
    h = make_app()
    h.app.window.show()
    h.tick(5)
    util = h.app.dashboard.panels[0].plots.plot("util")
    band = util.readout.textItem.toPlainText().replace("\xa0", " ")
    assert f"{_SWATCH['dot']} Memory" in band, band  # the dotted line, named in the band above it
    # The dotted memory line (orange in the dark theme) and the dashed load line, each after a swatch of its style.
    for key, (label, colour, style) in zip(util.series_keys(), util.legend(), strict=True):
        assert f"{_SWATCH[style]} {label}" in band, (key, band)
        assert colour == util._series[key].colour
    assert [label for label, _c, _s in util.legend()] == ["GPU", "Memory", "Effective load (estimate)"]
    assert dict((label, style) for label, _c, style in util.legend())["Memory"] == "dot"
    # The legend fits the band above the plot, beside the title, not over the data.
    h.app.qt_app.processEvents()
    assert util.readout.sceneBoundingRect().right() <= util.item.sceneBoundingRect().right()
    assert util.readout.sceneBoundingRect().bottom() <= util.item.vb.sceneBoundingRect().top() + 1
    assert h.app.last_snapshot is not None
    util.show_readout(h.app.last_snapshot.time_s)  # hovering: the values instead of the legend
    assert "Memory" in util.readout.textItem.toPlainText()
