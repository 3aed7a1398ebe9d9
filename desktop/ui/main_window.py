"""The main window: a sidebar of pages, and a status bar with the alerts, the source and the recording state.

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
from PySide6.QtGui import QCloseEvent, QIcon, QKeySequence, QResizeEvent, QShortcut
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
from desktop.ui.alert_area import BUTTON_WINDOW_SHARE, MAX_BANNERS, AlertButton, AlertPanel, Banner, BannerStack
from desktop.ui.pages.base import PageWidget
from desktop.ui.theme import Theme
from desktop.ui.widgets.elided_label import ElidedLabel

if TYPE_CHECKING:
    from desktop.ui.widgets.compare_dialog import CompareDialog

__all__ = ["MAX_BANNERS", "Banner", "BannerStack", "MainWindow", "PageEntry"]

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

        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(6, 6, 6, 0)
        right_layout.setSpacing(6)
        right_layout.addWidget(self.stack, 1)
        central = QWidget()
        layout = QHBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.sidebar)
        layout.addWidget(right, 1)
        self.setCentralWidget(central)

        self._build_alerts(theme)
        # The source names the driver and GPUs, the recording line the database path: shown verbatim, shortened
        # at a word with the whole line as tooltip when the row is too narrow.
        self.source_label = ElidedLabel("Source: starting", min_width_px=240)
        self.recording_label = ElidedLabel("Recording: starting", min_width_px=160)
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

    def _build_alerts(self, theme: Theme) -> None:
        # Alerts live in the status bar (a row of fixed height) and a panel over the page opened from it: a new
        # alert never pushes the page's buttons down while the user clicks (they used to stack above every page).
        self.banners = BannerStack(theme)
        self.alert_panel = AlertPanel(self.banners, theme, self)
        self.alert_button = AlertButton()
        self.alert_button.clicked.connect(self.toggle_alerts)
        self.banners.changed.connect(self._alerts_changed)
        self.statusBar().addWidget(self.alert_button)

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
        self.source_label.set_full_text(text, source.detail)

    def set_recording(self, text: str, tooltip: str = "") -> None:
        self.recording_label.set_full_text(text, tooltip)

    def set_demo_shown(self, shown: bool) -> None:
        """Label every page (the status bar) while the history shown is demo data."""
        self.demo_label.setVisible(shown)
        self._paint_demo_label()

    def _paint_demo_label(self) -> None:
        colour = self.theme.warn
        self.demo_label.setStyleSheet(f"color: {colour}; border: 1px solid {colour}; border-radius: 3px;"
                                      " padding: 0 6px; font-weight: bold;")

    def show_banner(self, text: str, level: str = "warning", key: str | None = None) -> None:
        """Add ``text`` to the alerts (``level``: error, warning or info) without hiding the others; one with the
        same ``key`` (default: the same text) is replaced instead of repeated. The status bar shows the most
        important; its button opens them all."""
        self.banners.show_message(text, level, key)

    @property
    def banner(self) -> Banner | None:
        """The top alert: the most important, the newest among equals (None when there is none)."""
        banners = self.banners.banners()
        return banners[0] if banners else None

    def toggle_alerts(self) -> None:
        """Open the alert panel over the bottom of the page (or close it)."""
        if self.alert_panel.isVisible():
            self.alert_panel.hide()
        elif self.banners.banners():
            self.alert_panel.open_at(self.statusBar().geometry())

    def _alerts_changed(self) -> None:
        top = self.banner
        count = len(self.banners.banners())
        self.alert_button.show_summary(top.label.text() if top else "", top.level if top else "info", count,
                                       self.theme)
        if count == 0:
            self.alert_panel.hide()
        elif self.alert_panel.isVisible():  # one more or one fewer: the panel fits its alerts again
            self.alert_panel.place(self.statusBar().geometry())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.alert_button.fit(round(self.width() * BUTTON_WINDOW_SHARE))
        if self.alert_panel.isVisible():
            self.alert_panel.place(self.statusBar().geometry())

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
        self.alert_panel.paint(theme)
        self.alert_button.paint(theme)
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
