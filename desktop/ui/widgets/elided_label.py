"""A one-line label that never cuts a word in half: too long for its width, it ends at a word with "…" and the
full text is its tooltip.

The status bar's labels (the source, the recording) share one row with buttons; a plain QLabel there is
clipped by Qt wherever the row ends, mid-word ("Reading history (not recordi"). ``elide_words`` is the one
place that shortens such a line.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QFontMetrics, QResizeEvent, QShowEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from desktop.ui.text import plain_tooltip

ELLIPSIS = "…"


def elide_words(text: str, metrics: QFontMetrics, width_px: int) -> str:
    """``text`` whole when it fits ``width_px``, else its longest run of whole words that fits with "…" after it.

    One word too long to keep (a path: "/home/me/.local/share/rigscope/history.sqlite") would leave most of the
    room empty, or nothing at all when it comes first: that word alone is shortened in its middle
    ("/home/me/…/history.sqlite"), which keeps both of its ends; no other word is ever cut.
    """
    if metrics.horizontalAdvance(text) <= width_px:
        return text
    words = text.split(" ")
    low, high = 0, len(words) - 1  # the most words (low) whose prefix fits, found by bisection
    while low < high:
        middle = (low + high + 1) // 2
        if metrics.horizontalAdvance(_cut(words[:middle]) + ELLIPSIS) <= width_px:
            low = middle
        else:
            high = middle - 1
    kept = _cut(words[:low])
    if metrics.horizontalAdvance(kept) < width_px / 2:  # the next word is too long to keep whole
        lead = " ".join(words[:low]) + " " if low else ""
        tail = f" {ELLIPSIS}" if low + 1 < len(words) else ""
        room = width_px - metrics.horizontalAdvance(lead + tail)
        word = metrics.elidedText(words[low], Qt.TextElideMode.ElideMiddle, room)
        if len(word) > len(ELLIPSIS):
            return lead + word + tail
    if low == 0:
        return metrics.elidedText(text, Qt.TextElideMode.ElideRight, width_px)
    return kept + ELLIPSIS


def _cut(words: list[str]) -> str:
    """Words joined, without a dangling separator before the "…"."""
    return " ".join(words).rstrip(" ,;:·—-")


class ElidedLabel(QLabel):
    """Shows ``full_text`` on one line, shortened at a word boundary to its width; the tooltip holds the whole
    text (and ``extra_tooltip`` below it). Plain text always: what it shows may come from outside."""

    def __init__(self, text: str = "", parent: QWidget | None = None, *, min_width_px: int = 80) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.full_text = ""
        self.extra_tooltip = ""
        self._min_width_px = min_width_px
        self.set_full_text(text)

    def set_full_text(self, text: str, tooltip: str = "") -> None:
        self.full_text = text
        self.extra_tooltip = tooltip
        self.updateGeometry()
        self._elide()

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        return QSize(self.fontMetrics().horizontalAdvance(self.full_text) + 2 * self.margin() + 4, hint.height())

    def minimumSizeHint(self) -> QSize:
        # At least ``min_width_px`` (or the whole text, when shorter): a squeezed row shortens the others first.
        whole = self.fontMetrics().horizontalAdvance(self.full_text) + 4
        return QSize(min(self._min_width_px, whole), super().minimumSizeHint().height())

    @property
    def elided(self) -> bool:
        return self.text() != self.full_text

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._elide()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        # Never laid out yet (a window not shown): its width means nothing; shortened when it is shown and sized.
        width = self.contentsRect().width() - 2
        shown = elide_words(self.full_text, self.fontMetrics(), width) if self.isVisible() else self.full_text
        super().setText(shown)
        parts = [p for p in ((self.full_text if shown != self.full_text else ""), self.extra_tooltip) if p]
        self.setToolTip(plain_tooltip("\n".join(parts)))
