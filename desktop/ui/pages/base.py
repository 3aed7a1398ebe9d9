"""What the window asks of a page: the ``Page`` protocol, and ``PageWidget``, the base every page is built on.

The window calls the four methods directly (``desktop/ui/main_window.py``, ``desktop/ui/app.py``):
``apply_theme`` when the theme changes or a lazy page is built, ``page_shown`` / ``page_hidden``
when the page becomes (in)visible, so it can read its data then or stop repainting while nobody
looks, and ``refresh`` when the history behind it changed (the demo week shown or left).
``PageWidget`` does nothing in each, so a page overrides only what it needs.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from PySide6.QtWidgets import QWidget

from desktop.ui.theme import Theme


@runtime_checkable
class Page(Protocol):
    """The methods the window calls on every page it shows."""

    def apply_theme(self, theme: Theme) -> None: ...

    def page_shown(self) -> None: ...

    def page_hidden(self) -> None: ...

    def refresh(self) -> None: ...


class PageWidget(QWidget):
    """A page's widget: every ``Page`` method, each doing nothing until the page overrides it."""

    def apply_theme(self, theme: Theme) -> None:
        """Repaint what the application palette does not reach (colours set by hand)."""

    def page_shown(self) -> None:
        """The page became the visible one."""

    def page_hidden(self) -> None:
        """Another page took its place."""

    def refresh(self) -> None:
        """Read the data behind the page again (its history source changed)."""


def as_page(widget: PageWidget) -> Page:
    """``widget`` as the protocol: mypy checks here that ``PageWidget`` (so every page) implements ``Page``."""
    return widget
