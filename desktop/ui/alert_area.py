"""The window's alerts in one place that never moves the page: a button in the status bar and a panel over it.

Alerts (a GPU at its slowdown temperature, a recovered database, invalid settings, the demo week shown) used to
stack as banners above every page and push its buttons down ~31 px each while the user clicked. Now:

- ``AlertButton`` sits at the left of the status bar (a row of fixed height): the most important alert,
  shortened at a word boundary, with how many there are, in the colour of its level; empty, it is hidden.
- ``AlertPanel`` floats over the bottom of the page when the button is clicked (Escape or the button again
  closes it): every alert, word-wrapped whole, each with its own Dismiss. It is a child of the window outside
  every layout, so opening it moves nothing either.
- ``BannerStack`` (inside the panel) keeps the alerts: one row per key, the most important first, at most
  ``MAX_BANNERS``.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from desktop.ui.text import heading
from desktop.ui.theme import Theme
from desktop.ui.widgets.elided_label import elide_words

#: How each banner level ranks: a more important banner is shown above, and stays when the stack is full.
BANNER_RANK = {"error": 0, "warning": 1, "info": 2}
#: The most banners kept at once; past it the least important (the oldest of them) goes.
MAX_BANNERS = 4
#: The status-bar button's widest text (px), and its share of a narrower window's width: the source and
#: recording lines keep the rest of the row.
BUTTON_MAX_WIDTH_PX = 560
BUTTON_WINDOW_SHARE = 0.4
#: The open panel's width (px) at most, and its gap to the window's edges.
PANEL_WIDTH_PX = 760
PANEL_MARGIN_PX = 8
#: What the level looks like on the button (a symbol as well as a colour: colour alone says nothing to some).
LEVEL_MARKS = {"error": "✖", "warning": "⚠", "info": "ℹ"}  # glyphs DejaVu Sans has (⛔ was a box)


class Banner(QFrame):
    """One alert in the panel: its whole text, word-wrapped, and its Dismiss button."""

    dismissed = Signal(object)  # this banner

    def __init__(self, key: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        #: Banners with the same key replace each other (by default the text itself).
        self.key = key
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 4, 6, 4)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.close_button = QPushButton("Dismiss")
        self.close_button.setFlat(True)
        self.close_button.clicked.connect(lambda: self.dismissed.emit(self))
        layout.addWidget(self.label, 1)
        layout.addWidget(self.close_button)
        self.level = "info"
        #: Order of arrival, for "newest first" within a level.
        self.serial = 0

    def show_message(self, text: str, level: str, theme: Theme) -> None:
        self.level = level if level in BANNER_RANK else "info"
        self.paint(theme)
        self.label.setText(text)

    def paint(self, theme: Theme) -> None:
        colour = theme.severity(self.level)
        self.setStyleSheet(f"#banner {{ border: 1px solid {colour}; border-left: 6px solid {colour};"
                           f" border-radius: 3px; background: {theme.base}; }}"
                           f" #banner QLabel {{ color: {theme.text}; }}")


class BannerStack(QWidget):
    """The alerts: one row each, the most important first, so none hides another.

    A banner with the key of one already shown replaces it in place (a repeated alert does not pile up);
    past ``MAX_BANNERS`` the least important, oldest first, goes. ``changed`` after every change.
    """

    changed = Signal()

    def __init__(self, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(4)
        self._banners: list[Banner] = []
        self._serial = 0
        self.hide()

    def banners(self) -> list[Banner]:
        """The banners kept, most important first."""
        return list(self._banners)

    def texts(self) -> list[str]:
        return [banner.label.text() for banner in self._banners]

    def show_message(self, text: str, level: str = "warning", key: str | None = None) -> Banner:
        key = key if key is not None else text
        banner = next((b for b in self._banners if b.key == key), None)
        if banner is None:
            banner = Banner(key, self)
            banner.dismissed.connect(self.dismiss)
            self._banners.append(banner)
        self._serial += 1
        banner.serial = self._serial
        banner.show_message(text, level, self.theme)
        self._banners.sort(key=lambda b: (BANNER_RANK[b.level], -b.serial))
        while len(self._banners) > MAX_BANNERS:
            # The least important goes; among equals the oldest (a new one only goes when all others outrank it).
            victim = max(self._banners, key=lambda b: (BANNER_RANK[b.level], -b.serial))
            self._remove(victim)
        self._relayout()
        return banner

    def clear_key(self, key: str) -> None:
        """Take down the banner shown under ``key`` (its condition ended); nothing when none is."""
        for banner in [b for b in self._banners if b.key == key]:
            self.dismiss(banner)

    def dismiss(self, banner: Banner) -> None:
        if banner in self._banners:
            self._remove(banner)
            self._relayout()

    def clear(self) -> None:
        for banner in list(self._banners):
            self._remove(banner)
        self._relayout()

    def _remove(self, banner: Banner) -> None:
        self._banners.remove(banner)
        self._layout.removeWidget(banner)
        banner.hide()
        banner.deleteLater()

    def _relayout(self) -> None:
        for banner in self._banners:
            self._layout.removeWidget(banner)
        for banner in self._banners:
            self._layout.addWidget(banner)
            banner.show()
        self.setVisible(bool(self._banners))
        self.changed.emit()

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        for banner in self._banners:
            banner.paint(theme)


class AlertButton(QPushButton):
    """The status bar's word on the alerts: the most important one, shortened at a word, and how many."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("alertButton")
        self.setFlat(True)
        self.summary = ""
        self.level = "info"
        #: The widest the button may be (px): ``BUTTON_MAX_WIDTH_PX``, less in a narrow window (``fit``).
        self.max_width_px = BUTTON_MAX_WIDTH_PX
        self._shown: tuple[str, int] = ("", 0)
        self.hide()

    def show_summary(self, top_text: str, level: str, count: int, theme: Theme) -> None:
        """``top_text`` of ``count`` alerts (0: the button goes)."""
        self.level = level
        self._shown = (top_text, count)
        if count == 0:
            self.summary = ""
            self.hide()
            return
        self._write()
        self.setToolTip(f"{count} alert{'s' if count != 1 else ''}: click to read {'them' if count > 1 else 'it'} "
                        "whole and dismiss")
        self.paint(theme)
        self.show()

    def fit(self, max_width_px: int) -> None:
        """The window was resized: shorten (or lengthen) the summary to at most ``max_width_px``."""
        self.max_width_px = max(120, min(BUTTON_MAX_WIDTH_PX, max_width_px))
        if self._shown[1]:
            self._write()

    def _write(self) -> None:
        top_text, count = self._shown
        more = f" (+{count - 1} more)" if count > 1 else ""
        mark = LEVEL_MARKS.get(self.level, LEVEL_MARKS["info"])
        room = self.max_width_px - self.fontMetrics().horizontalAdvance(f"{mark}  {more}") - 24
        self.summary = f"{mark} {elide_words(top_text, self.fontMetrics(), room)}{more}"
        self.setText(self.summary.replace("&", "&&"))  # a button reads "&" as a mnemonic

    def paint(self, theme: Theme) -> None:
        colour = theme.severity(self.level)
        self.setStyleSheet(f"#alertButton {{ color: {theme.text}; border: 1px solid {colour};"
                           f" border-left: 5px solid {colour}; border-radius: 3px; padding: 1px 8px;"
                           f" text-align: left; }}")


class AlertPanel(QFrame):
    """Every alert whole, over the bottom of the page, opened from the status-bar button (in no layout).

    Esc closes it.
    """

    def __init__(self, stack: BannerStack, theme: Theme, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("alertPanel")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.stack = stack
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 8)
        top = QHBoxLayout()
        self.title = QLabel("Alerts")
        heading(self.title)
        self.dismiss_all = QPushButton("Dismiss all")
        self.dismiss_all.setFlat(True)
        self.dismiss_all.clicked.connect(stack.clear)
        self.close_button = QPushButton("Close")
        self.close_button.setFlat(True)
        self.close_button.setToolTip("Close the list (Esc); the alerts stay in the status bar")
        self.close_button.clicked.connect(self.hide)
        top.addWidget(self.title, 1)
        top.addWidget(self.dismiss_all)
        top.addWidget(self.close_button)
        layout.addLayout(top)
        layout.addWidget(stack)
        self.paint(theme)
        self.hide()

    def paint(self, theme: Theme) -> None:
        self.setStyleSheet(f"#alertPanel {{ background: {theme.window}; border: 1px solid {theme.border};"
                           f" border-radius: 4px; }} #alertPanel QLabel {{ color: {theme.text}; }}")

    def place(self, anchor: QRect) -> None:
        """Above ``anchor`` (the status bar, in the window's coordinates), from its left, as tall as its alerts."""
        parent = self.parentWidget()
        room = parent.width() if parent is not None else PANEL_WIDTH_PX
        width = min(PANEL_WIDTH_PX, room - 2 * PANEL_MARGIN_PX)
        self.setFixedWidth(width)
        self.adjustSize()
        height = min(self.sizeHint().height(), anchor.top() - 2 * PANEL_MARGIN_PX)
        self.setGeometry(anchor.left() + PANEL_MARGIN_PX, anchor.top() - height - PANEL_MARGIN_PX, width, height)
        self.raise_()

    def open_at(self, anchor: QRect) -> None:
        """Shown above ``anchor`` with the focus, so Esc closes it (only it: the Stress page's Esc cancels a run)."""
        self.show()
        self.place(anchor)
        self.setFocus(Qt.FocusReason.PopupFocusReason)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.hide()
            event.accept()
            return
        super().keyPressEvent(event)
