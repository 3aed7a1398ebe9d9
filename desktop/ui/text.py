"""Text from outside (process, GPU and file names) shown in Qt as the text it is, never as markup.

Qt guesses: a QLabel or QMessageBox in its default ``AutoText`` format, and every tooltip,
renders a string that looks like HTML as rich text. Another user on the machine names a
process (``prctl(PR_SET_NAME)``), an imported log names its GPUs: ``<img src="/etc/passwd">``
would load a file and ``<b>`` restyle the window. Labels and message boxes that show such
names are set to plain text; tooltips, which have no such setting, get the text escaped and
wrapped so that Qt's guess is always "rich" and the escaped text comes out as it was.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QLabel, QMessageBox, QWidget

from advisor.wording import CODE_SPAN


def plain(label: QLabel) -> QLabel:
    """``label``, set to show its text verbatim; returned for chaining."""
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


def plain_label(text: str = "", parent: QWidget | None = None) -> QLabel:
    """A QLabel that shows ``text`` (and every later ``setText``) verbatim."""
    return plain(QLabel(text, parent))


def heading(label: QLabel, point_size: float | None = None) -> QLabel:
    """``label`` in bold (at ``point_size`` pt when given), by its font: a style sheet would fix its palette at
    the theme it was first shown in, and after a switch to the dark theme its text stayed the light theme's
    near-black on near-black (the Jobs card's title). Returned for chaining."""
    font = QFont(label.font())
    font.setBold(True)
    if point_size is not None:
        font.setPointSizeF(point_size)
    label.setFont(font)
    return label


def code_as_text(text: str) -> str:
    """Advice text with its `code` marks dropped: the command reads as itself in a plain-text label."""
    return CODE_SPAN.sub(r"\1", text)


def plain_tooltip(text: str) -> str:
    """A tooltip that shows ``text`` verbatim, spaces and line breaks included ("" stays "": no tooltip)."""
    if not text:
        return ""
    return f'<qt><p style="white-space:pre-wrap">{escape(text, quote=False)}</p></qt>'


def plain_message_box(parent: QWidget | None, title: str, text: str, *, icon: QMessageBox.Icon,
                      buttons: QMessageBox.StandardButton, default: QMessageBox.StandardButton) -> QMessageBox:
    """A message box (not yet shown) whose text is shown verbatim; ``exec()`` it for the answer."""
    box = QMessageBox(icon, title, text, buttons, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setDefaultButton(default)
    return box
