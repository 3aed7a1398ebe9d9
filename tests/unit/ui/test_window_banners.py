"""Alerts do not lose each other: a settings alert after the recovered-database one leaves both listed (the status
bar names the most important, its panel lists them all)."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from desktop.sessions.recording import RecordingSession
from desktop.ui.main_window import MAX_BANNERS, MainWindow
from desktop.ui.theme import DARK, LIGHT

RECOVERED = "The history database was damaged and was moved aside to /x/h.sqlite.damaged; recording continues."
SETTINGS = "Some settings were invalid and defaults are used: sampling.interval_s: must be between 0.1 and 60"


def _window(qtbot: QtBot) -> MainWindow:
    window = MainWindow(LIGHT)
    qtbot.addWidget(window)
    window.show()
    return window


def test_a_settings_banner_does_not_replace_the_recovered_database_banner(qtbot: QtBot) -> None:
    window = _window(qtbot)
    window.show_banner(RECOVERED, "warning")
    window.show_banner(SETTINGS, "warning")
    assert window.banners.texts() == [SETTINGS, RECOVERED]  # newest first among equals
    assert window.alert_button.isVisibleTo(window) and "(+1 more)" in window.alert_button.summary
    window.alert_button.click()  # the panel lists them all
    assert all(b.isVisibleTo(window) for b in window.banners.banners())
    # An error goes on top; an info below the warnings.
    window.show_banner("Sampling failed: NVML lost", "error")
    window.show_banner("Demo data", "info")
    assert window.banners.texts() == ["Sampling failed: NVML lost", SETTINGS, RECOVERED, "Demo data"]
    assert window.banner is not None and window.banner.label.text() == "Sampling failed: NVML lost"


def test_dismiss_removes_only_its_own_banner(qtbot: QtBot) -> None:
    window = _window(qtbot)
    window.show_banner(RECOVERED, "warning")
    window.show_banner(SETTINGS, "warning")
    settings_banner = window.banners.banners()[0]
    settings_banner.close_button.click()
    qtbot.waitUntil(lambda: window.banners.texts() == [RECOVERED])
    window.banners.banners()[0].close_button.click()
    assert window.banners.texts() == [] and not window.banners.isVisibleTo(window) and window.banner is None


def test_a_repeated_banner_is_replaced_in_place_not_stacked(qtbot: QtBot) -> None:
    window = _window(qtbot)
    window.show_banner(RECOVERED, "warning")
    window.show_banner("GPU 0: VRAM 95 % full", "warning", key="alert.vram.0")
    window.show_banner("GPU 0: VRAM 97 % full", "error", key="alert.vram.0")
    window.show_banner(RECOVERED, "warning")  # the same text again: still one row
    assert window.banners.texts() == ["GPU 0: VRAM 97 % full", RECOVERED]


def test_a_full_stack_drops_the_least_important_oldest_first(qtbot: QtBot) -> None:
    window = _window(qtbot)
    window.show_banner(RECOVERED, "error")
    window.show_banner("demo", "info")
    for i in range(MAX_BANNERS):
        window.show_banner(f"alert {i}", "warning")
    texts = window.banners.texts()
    assert len(texts) == MAX_BANNERS
    assert texts[0] == RECOVERED and "demo" not in texts and "alert 0" not in texts
    assert texts[1] == f"alert {MAX_BANNERS - 1}"


def test_banners_follow_the_theme(qtbot: QtBot) -> None:
    window = _window(qtbot)
    window.show_banner(RECOVERED, "warning")
    assert LIGHT.warn in window.banners.banners()[0].styleSheet()
    window.apply_theme(DARK)
    assert DARK.warn in window.banners.banners()[0].styleSheet()


def test_the_app_keeps_the_recovered_database_banner_under_a_settings_banner(make_app, tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    db.write_bytes(b"SQLite format 3\0" + b"garbage" * 1000)  # a damaged Rigscope database
    recording = RecordingSession.open(db)
    h = make_app(recording=recording)
    h.app.window.show_banner(SETTINGS, "warning")  # what run_window does with invalid settings
    texts = h.app.window.banners.texts()
    assert len(texts) == 2 and any("damaged" in t for t in texts) and SETTINGS in texts
    h.app.window.show()
    h.app.window.alert_button.click()
    assert all(b.isVisibleTo(h.app.window) for b in h.app.window.banners.banners())
