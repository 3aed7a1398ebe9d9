"""The demo is a mode: entered and left from the simulated bar without a restart, labelled on every page while
shown, and the window never records live samples into a demo database, even one opened with --db."""

from __future__ import annotations

from pathlib import Path

from desktop.history.store import HistoryStore
from desktop.sessions.recording import RecordingSession


def _demo_db(path: Path) -> Path:
    store = HistoryStore.open(path)
    with store.conn:
        store.set_meta("demo", "1")
    store.close()
    return path


def test_a_demo_database_is_shown_but_never_recorded_into(tmp_path: Path) -> None:
    path = _demo_db(tmp_path / "demo.sqlite")
    recording = RecordingSession.open(path)
    try:
        assert recording.mode == "reading" and recording.writer is None
        assert "demo" in recording.detail and "records nothing" in recording.detail
        assert recording.store is not None  # the demo week is still shown
    finally:
        recording.close()


def test_an_ordinary_database_is_recorded_into(tmp_path: Path) -> None:
    recording = RecordingSession.open(tmp_path / "history.sqlite")
    try:
        assert recording.mode == "recording"
    finally:
        recording.close()


def test_enter_and_leave_the_demo_from_the_bar(make_app, tmp_path: Path) -> None:
    h = make_app()
    app = h.app
    app.window.show()
    app.demo_path = tmp_path / "demo.sqlite"
    app.demo_days = 0.05
    h.tick(3)
    bar = app.dashboard.simulated_bar
    assert bar.demo_button.text().replace("&", "") == "Load demo week"
    app.load_demo_week()
    app.demo_loader.wait(60.0)
    h.app.qt_app.processEvents()
    assert app.history_path == app.demo_path
    assert bar.demo_button.text().replace("&", "") == "Leave demo"  # no longer offers the demo it shows
    assert app.window.demo_label.isVisibleTo(app.window)  # the status bar: on every page
    for key in ("dashboard", "processes", "settings"):
        app.window.show_page(key)
        assert app.window.demo_label.isVisibleTo(app.window)
    bar.demo_button.click()  # leave
    assert app.history_path == app.db_path
    assert not app.window.demo_label.isVisibleTo(app.window)
    assert not any("demo week" in t for t in app.window.banners.texts())
    assert bar.demo_button.text().replace("&", "") == "Load demo week"
