"""The main window: a sidebar of pages, an alert banner, and a status bar with source and recording state.

Pages are registered, not hard-coded, so a feature adds itself with one line in app.py::

    window.add_page("stress", "Stress test", StressPage(...), icon=None, shortcut=None)

A page is a ``PageWidget`` (``desktop/ui/pages/base.py``: the ``Page`` protocol's theme,
shown/hidden and refresh, each a no-op until the page overrides it); pages are listed in the
order they were added and get Ctrl+1..9 in that order unless they bring their own shortcut.
``page_shown()`` and ``page_hidden()`` are called when a page becomes (in)visible, so it can
stop repainting while nobody looks at it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QCloseEvent, QIcon, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from desktop.telemetry.model import SourceInfo
from desktop.ui.pages.base import PageWidget
from desktop.ui.text import plain, plain_tooltip
from desktop.ui.theme import Theme

if TYPE_CHECKING:
    from desktop.ui.widgets.compare_dialog import CompareDialog

SIDEBAR_WIDTH_PX = 150


@dataclass
class PageEntry:
    key: str
    title: str
    widget: PageWidget
    item: QListWidgetItem
    shortcut: QShortcut | None
    #: Builds the page on first use (``widget`` is an empty placeholder until then).
    factory: Callable[[], PageWidget] | None = None


#: How each banner level ranks: a more important banner is shown above, and stays when the stack is full.
BANNER_RANK = {"error": 0, "warning": 1, "info": 2}
#: The most banners shown at once; past it the least important (the oldest of them) goes.
MAX_BANNERS = 4


class Banner(QFrame):
    """A dismissible one-line message above the pages (an alert, a recovered database, invalid settings)."""

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
        colour = {"error": theme.bad, "warning": theme.warn}.get(self.level, theme.accent)
        self.setStyleSheet(f"#banner {{ border: 1px solid {colour}; border-left: 6px solid {colour};"
                           f" border-radius: 3px; }}")


class BannerStack(QWidget):
    """The banners above the pages: one row each, the most important first, so none hides another.

    A banner with the key of one already shown replaces it in place (a repeated alert does not
    pile up); past ``MAX_BANNERS`` the least important, oldest first, goes. Each row has its own
    Dismiss button.
    """

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
        """The banners shown, top to bottom."""
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

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        for banner in self._banners:
            banner.paint(theme)


class MainWindow(QMainWindow):
    """The window. Pages come from ``add_page``; what closing does is decided by the app."""

    #: Ctrl+Q or Quit: the app shuts everything down (sampler, recording, tray).
    quit_requested = Signal()
    #: The window was closed while no tray can keep the app: the app should quit too.
    closed = Signal()
    #: The window was hidden into the tray (the app keeps sampling and recording).
    hidden_to_tray = Signal()
    page_changed = Signal(str)

    def __init__(self, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        self.setWindowTitle("Rigscope")
        self.resize(1400, 900)
        #: Set by the app when a tray icon exists: closing then hides the window instead.
        self.close_to_tray = False
        self._pages: dict[str, PageEntry] = {}
        self._current: str | None = None

        self.sidebar = QListWidget()
        self.sidebar.setObjectName("sidebar")
        self.sidebar.setFixedWidth(SIDEBAR_WIDTH_PX)
        self.sidebar.setIconSize(QSize(18, 18))
        self.sidebar.setFrameShape(QFrame.Shape.NoFrame)
        self.sidebar.currentRowChanged.connect(self._row_changed)
        self.stack = QStackedWidget()
        self.banners = BannerStack(theme)

        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(6, 6, 6, 0)
        right_layout.setSpacing(6)
        right_layout.addWidget(self.banners)
        right_layout.addWidget(self.stack, 1)
        central = QWidget()
        layout = QHBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.sidebar)
        layout.addWidget(right, 1)
        self.setCentralWidget(central)

        # The source names the driver and GPUs, the recording line the database path: shown verbatim.
        self.source_label = plain(QLabel("Source: starting"))
        self.recording_label = plain(QLabel("Recording: starting"))
        self.statusBar().addWidget(self.source_label, 1)
        #: Shown while the pages show demo data (the demo week, or a demo database opened with --db).
        self.demo_label = QLabel("DEMO DATA")
        self.demo_label.setToolTip("The history shown is simulated (rigscope demo), not this machine's")
        self.demo_label.hide()
        self.statusBar().addPermanentWidget(self.demo_label)
        self.statusBar().addPermanentWidget(self.recording_label)

        self._shortcut("Ctrl+Q", self.quit_requested.emit)
        self._shortcut("Ctrl+W", self.close)
        self._shortcut("F11", self.toggle_fullscreen)
        # issue 15: the Compare dialog (desktop/ui/widgets/compare_dialog.py), Ctrl+K or the status-bar button.
        self.compare_button = QPushButton("Compare runs…")
        self.compare_button.setFlat(True)
        self.compare_button.setToolTip("Compare run records from different machines side by side (Ctrl+K)")
        self.compare_button.clicked.connect(self.open_compare)
        self.statusBar().addPermanentWidget(self.compare_button)
        self._shortcut("Ctrl+K", self.open_compare)
        self.compare_dialog: CompareDialog | None = None
        self.apply_theme(theme)

    # --- pages ----------------------------------------------------------------------
    def add_page(self, key: str, title: str, widget: PageWidget | Callable[[], PageWidget],
                 icon: QIcon | None = None, shortcut: str | None = None) -> None:
        """Register a page; it appears in the sidebar at the end, with Ctrl+<position> by default.

        ``widget`` may be a factory: the page is then built when first shown or asked for
        (``page(key)``), so pages nobody opens cost nothing before the first frame. A widget that
        is no ``PageWidget`` is refused (a factory's when it is built): the window calls every
        ``Page`` method on it.
        """
        if key in self._pages:
            raise ValueError(f"page {key!r} is already registered")
        if isinstance(widget, QWidget):
            factory = None
            _check_page(key, widget)
        else:
            factory = widget
            widget = PageWidget()  # its placeholder until built
        item = QListWidgetItem(icon or QIcon(), title)
        item.setData(Qt.ItemDataRole.UserRole, key)
        self.sidebar.addItem(item)
        self.stack.addWidget(widget)
        position = len(self._pages) + 1
        sequence = shortcut or (f"Ctrl+{position}" if position <= 9 else None)
        action = self._shortcut(sequence, lambda k=key: self.show_page(k)) if sequence else None
        if sequence:
            item.setToolTip(f"{title} ({QKeySequence(sequence).toString(QKeySequence.SequenceFormat.NativeText)})")
        self._pages[key] = PageEntry(key, title, widget, item, action, factory)
        if self._current is None:
            self.show_page(key)

    def page_keys(self) -> list[str]:
        return list(self._pages)

    def page(self, key: str) -> PageWidget:
        return self._built(self._pages[key]).widget

    def is_built(self, key: str) -> bool:
        return self._pages[key].factory is None

    def _built(self, entry: PageEntry) -> PageEntry:
        """Build a lazy page in its placeholder's place in the stack."""
        if entry.factory is not None:
            factory, entry.factory = entry.factory, None
            placeholder, entry.widget = entry.widget, _check_page(entry.key, factory())
            index = self.stack.indexOf(placeholder)
            current = self.stack.currentWidget() is placeholder
            self.stack.insertWidget(index, entry.widget)
            self.stack.removeWidget(placeholder)
            placeholder.deleteLater()
            if current:
                self.stack.setCurrentWidget(entry.widget)
            entry.widget.apply_theme(self.theme)
        return entry

    def current_page(self) -> str | None:
        return self._current

    def show_page(self, key: str) -> None:
        entry = self._pages[key]
        self.sidebar.setCurrentItem(entry.item)  # -> _row_changed

    def _row_changed(self, row: int) -> None:
        if row < 0:
            return
        key = self.sidebar.item(row).data(Qt.ItemDataRole.UserRole)
        if key == self._current:
            return
        previous = self._pages.get(self._current) if self._current else None
        if previous is not None:
            previous.widget.page_hidden()
        entry = self._built(self._pages[key])
        self.stack.setCurrentWidget(entry.widget)
        self._current = key
        entry.widget.page_shown()
        self.page_changed.emit(key)

    # --- status ---------------------------------------------------------------------
    def set_source(self, source: SourceInfo) -> None:
        if source.simulated:
            why = f": {source.fallback_reason}" if source.fallback_reason else " (--simulate)"
            text = f"Source: simulated GPU{why}"
        else:
            text = f"Source: NVIDIA driver (NVML) — {source.detail}"
        self.source_label.setText(text)
        self.source_label.setToolTip(plain_tooltip(source.detail))

    def set_recording(self, text: str, tooltip: str = "") -> None:
        self.recording_label.setText(text)
        self.recording_label.setToolTip(plain_tooltip(tooltip))

    def set_demo_shown(self, shown: bool) -> None:
        """Label every page (the status bar) while the history shown is demo data."""
        self.demo_label.setVisible(shown)
        self._paint_demo_label()

    def _paint_demo_label(self) -> None:
        colour = self.theme.warn
        self.demo_label.setStyleSheet(f"color: {colour}; border: 1px solid {colour}; border-radius: 3px;"
                                      " padding: 0 6px; font-weight: bold;")

    def show_banner(self, text: str, level: str = "warning", key: str | None = None) -> None:
        """Show ``text`` in a banner of its own (``level``: error, warning or info) without hiding the others;
        a banner with the same ``key`` (default: the same text) is replaced instead of repeated."""
        self.banners.show_message(text, level, key)

    @property
    def banner(self) -> Banner | None:
        """The top banner: the most important, the newest among equals (None when none is shown)."""
        banners = self.banners.banners()
        return banners[0] if banners else None

    # --- window behaviour -----------------------------------------------------------
    def open_compare(self) -> None:
        """Show the Compare dialog (one, kept while the window lives, with the files last picked)."""
        from desktop.ui.widgets.compare_dialog import CompareDialog

        if self.compare_dialog is None:
            self.compare_dialog = CompareDialog(self.theme, self)
        self.compare_dialog.show()
        self.compare_dialog.raise_()
        self.compare_dialog.activateWindow()

    def toggle_fullscreen(self) -> None:
        self.showNormal() if self.isFullScreen() else self.showFullScreen()

    def bring_to_front(self) -> None:
        self.show()
        self.setWindowState(self.windowState() & ~Qt.WindowState.WindowMinimized)
        self.raise_()
        self.activateWindow()

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.close_to_tray:
            event.ignore()
            self.hide()
            self.hidden_to_tray.emit()
            return
        event.accept()
        self.closed.emit()

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        self._paint_demo_label()
        self.sidebar.setStyleSheet(
            f"#sidebar {{ background: {theme.base}; padding-top: 8px; }}"
            f"#sidebar::item {{ padding: 8px 10px; border-radius: 3px; margin: 1px 6px; }}"
            f"#sidebar::item:selected {{ background: {theme.accent}; color: {'#000' if theme.dark else '#fff'}; }}"
        )
        self.banners.apply_theme(theme)
        for entry in self._pages.values():
            if entry.factory is None:  # a lazy page is themed when built
                entry.widget.apply_theme(theme)
        if self.compare_dialog is not None:  # None until Ctrl+K
            self.compare_dialog.apply_theme(theme)

    def _shortcut(self, sequence: str, slot: object) -> QShortcut:
        shortcut = QShortcut(QKeySequence(sequence), self)
        shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
        shortcut.activated.connect(slot)
        return shortcut


def _check_page(key: str, widget: object) -> PageWidget:
    if not isinstance(widget, PageWidget):
        raise TypeError(f"page {key!r} is a {type(widget).__name__}, not a PageWidget (desktop/ui/pages/base.py)")
    return widget
