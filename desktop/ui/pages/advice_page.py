"""The shared base of the Advisor and Costs pages: a page drawn from the advice, read on a worker thread.

Each page gets its advice from a callable passed in (``HistorySource.advice`` reads the history
database; tests pass advice built in memory), so no page opens a database or reads settings by
itself. The read (history and rules, ~0.4 s for weeks, more on a slow disk) runs through a
``background.Loader``; the page says it is reading meanwhile and says a failure on the page.
Text that comes from the machine (process names) is shown as plain text, never as rich text.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from desktop.advice import Advice
from desktop.ui.background import Loader
from desktop.ui.pages.base import PageWidget

AdviceSource = Callable[[], Advice | None]


def plain_label(text: str, *, wrap: bool = True, bold: bool = False) -> QLabel:
    """A selectable label that shows ``text`` verbatim (wrapped, optionally bold)."""
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)  # a process may be named "<b>..."
    label.setWordWrap(wrap)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if bold:
        font = label.font()
        font.setBold(True)
        label.setFont(font)
    return label


class AdvicePage(PageWidget):
    """A page drawn from the advice, read on a worker thread when first shown or refreshed."""

    LOADING_TEXT = "Reading the history..."

    def __init__(self, source: AdviceSource) -> None:
        super().__init__()
        self.source = source
        self.advice: Advice | None = None
        self.loader = Loader(self, name="advice")

    @property
    def loading(self) -> bool:
        return self.loader.busy

    def page_shown(self) -> None:
        if self.advice is None and not self.loading:
            self.refresh()

    def refresh(self) -> None:
        """Read the history and compute the advice on a worker thread; ``set_advice`` follows here."""
        self.loading_changed(True)
        self.show_status(self.LOADING_TEXT)
        self.loader.run(self.source, self._loaded, self._failed)

    def _loaded(self, advice: Advice | None) -> None:
        self.loading_changed(False)
        self.set_advice(advice)

    def _failed(self, error: str) -> None:
        self.loading_changed(False)
        self.show_status(f"Could not read the history: {error}")

    def loading_changed(self, loading: bool) -> None:
        """Called as a read starts and ends (e.g. to disable a Refresh button meanwhile)."""

    def show_status(self, text: str) -> None:
        raise NotImplementedError

    def set_advice(self, advice: Advice | None) -> None:
        raise NotImplementedError
