"""Issue 37 item 6: alerts in one place that never moves the page (the status bar and a panel over the page),
and status-bar lines shortened at a word boundary with the whole line as tooltip, never cut mid-word."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from desktop.ui.alert_area import BUTTON_WINDOW_SHARE
from desktop.ui.main_window import MainWindow
from desktop.ui.pages.base import PageWidget
from desktop.ui.theme import DARK, LIGHT
from desktop.ui.widgets.elided_label import ELLIPSIS, elide_words

ALERTS = (("GPU 0 is at 87 °C, its slowdown temperature: the clocks are being cut.", "error"),
          ("VRAM 97 % full on GPU 0: the next allocation may fail.", "warning"),
          ("Showing the demo week from /tmp/demo.sqlite: a simulated week, not your own history.", "info"))


def _window(qtbot: QtBot, width: int = 1400) -> tuple[MainWindow, QPushButton]:
    window = MainWindow(DARK)
    page = PageWidget()
    button = QPushButton("Start", page)
    button.move(20, 10)
    window.add_page("stress", "Stress test", page)
    qtbot.addWidget(window)
    window.resize(width, 800)
    window.show()
    qtbot.waitExposed(window)
    return window, button


def _where(window: MainWindow, button: QPushButton) -> QPoint:
    return button.mapTo(window, QPoint(0, 0))


def test_alerts_arriving_leave_the_pages_buttons_where_they_were(qtbot: QtBot) -> None:
    window, button = _window(qtbot)
    before = _where(window, button)
    page_height, bar_height = window.stack.height(), window.statusBar().height()
    for text, level in ALERTS:
        window.show_banner(text, level)
        qtbot.wait(1)  # the layout settles, as it would under the user's pointer
        assert _where(window, button) == before  # used to move down ~31 px per banner
        # The status bar keeps its height: the page's bottom edge does not move either.
        assert (window.stack.height(), window.statusBar().height()) == (page_height, bar_height)
    assert window.alert_button.isVisible()
    window.alert_button.click()  # reading them all opens a panel over the page: still nothing moves
    assert window.alert_panel.isVisible()
    assert _where(window, button) == before
    window.banners.clear()
    qtbot.wait(1)
    assert _where(window, button) == before and not window.alert_button.isVisible()


def test_the_status_bar_names_the_most_important_alert_and_the_panel_lists_all_whole(qtbot: QtBot) -> None:
    window, _button = _window(qtbot)
    for text, level in ALERTS:
        window.show_banner(text, level)
    summary = window.alert_button.summary
    assert "87 °C" in summary and summary.endswith("(+2 more)")
    assert window.statusBar().height() < 40  # one row: the alert did not grow it
    window.alert_button.click()
    panel = window.alert_panel
    assert panel.isVisible()
    assert [b.label.text() for b in window.banners.banners()] == [t for t, _ in ALERTS]  # whole, most important first
    assert all(b.isVisibleTo(window) for b in window.banners.banners())
    # Above the status bar, inside the window, over the page (not in its layout).
    assert panel.geometry().bottom() < window.statusBar().geometry().top()
    assert panel.geometry().top() > 0 and panel.geometry().right() < window.width()
    window.banners.banners()[0].close_button.click()
    assert window.alert_button.summary.startswith("⚠ VRAM 97 % full") and "(+1 more)" in window.alert_button.summary
    qtbot.keyClick(panel, Qt.Key.Key_Escape)
    assert not panel.isVisible() and window.alert_button.isVisible()
    window.alert_button.click()
    panel.dismiss_all.click()
    assert window.banners.texts() == [] and not panel.isVisible() and not window.alert_button.isVisible()


def test_alerts_are_readable_in_both_themes(qtbot: QtBot) -> None:
    window, _button = _window(qtbot)
    window.show_banner(*ALERTS[1])
    window.alert_button.click()
    for theme in (DARK, LIGHT):
        window.apply_theme(theme)
        banner = window.banners.banners()[0]
        assert f"color: {theme.text}" in banner.styleSheet() and f"background: {theme.base}" in banner.styleSheet()
        assert f"color: {theme.text}" in window.alert_button.styleSheet()
        assert theme.warn in window.alert_button.styleSheet()


def _font_metrics() -> QFontMetrics:
    return QFontMetrics(QFont())


def test_elide_words_ends_at_a_word() -> None:
    metrics = _font_metrics()
    text = "Reading history (not recording): the window records into /home/me/.local/share/rigscope/history.sqlite"
    assert elide_words(text, metrics, 10_000) == text
    width = metrics.horizontalAdvance(text) // 2
    shown = elide_words(text, metrics, width)
    assert shown.endswith(ELLIPSIS) and metrics.horizontalAdvance(shown) <= width
    kept = shown[: -len(ELLIPSIS)]
    assert text.startswith(kept) and text[len(kept)] in " :"  # a whole word, never half of one
    one_word = "x" * 200
    assert metrics.horizontalAdvance(elide_words(one_word, metrics, 50)) <= 50  # one word: only it can be shortened


def test_a_path_too_long_to_keep_is_shortened_in_its_middle_not_dropped() -> None:
    metrics = _font_metrics()
    text = "Recording to /home/somebody/.local/share/rigscope/history.sqlite every 1 s, rollups hourly"
    lead = metrics.horizontalAdvance("Recording to ")
    width = lead + metrics.horizontalAdvance("/home/somebody/.local/share/rigscope/history.sqlite") * 2 // 3
    shown = elide_words(text, metrics, width)
    assert metrics.horizontalAdvance(shown) <= width
    # "Recording to…" would leave most of the room empty: the path is kept, shortened between its two ends.
    assert shown.startswith("Recording to /home/") and shown.endswith(" …"), shown
    path = shown.split(" ")[2]
    assert ELLIPSIS in path and path.endswith("sqlite"), path


def test_status_bar_lines_are_shortened_at_a_word_with_the_whole_line_as_tooltip(qtbot: QtBot) -> None:
    window, _button = _window(qtbot, width=700)
    text = ("Reading history (not recording): another Rigscope process records into "
            "/home/somebody/.local/share/rigscope/history.sqlite; this window shows what it writes")
    window.set_recording(text, "the recorder service (pid 1234)")
    window.show_banner(*ALERTS[2])
    qtbot.wait(1)
    label = window.recording_label
    assert label.width() < label.fontMetrics().horizontalAdvance(text)  # it does not fit: shortened
    shown = label.text()
    assert shown != text and shown.endswith(ELLIPSIS)
    kept = shown[: -len(ELLIPSIS)]
    assert text.startswith(kept) and text[len(kept)] in " :;"
    assert label.fontMetrics().horizontalAdvance(shown) <= label.contentsRect().width()
    assert "history.sqlite" in label.toolTip() and "pid 1234" in label.toolTip()
    summary = window.alert_button.summary
    assert summary.startswith("ℹ Showing the demo week")
    # In a narrow window the alert takes at most its share of the row: the status lines keep room too.
    assert window.alert_button.width() <= round(window.width() * BUTTON_WINDOW_SHARE)
    assert window.source_label.width() >= window.source_label.minimumSizeHint().width()
    window.banners.clear()
    window.resize(1600, 800)  # room again: the whole line
    qtbot.waitUntil(lambda: label.text() == text)
