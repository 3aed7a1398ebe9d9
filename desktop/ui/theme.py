"""Colours: the system/dark/light themes and a colour-blind-safe (Okabe-Ito) series palette.

Every text colour of a theme (text, muted, accent, ok, warn, bad) has a WCAG contrast ratio
of at least ``TEXT_CONTRAST`` (4.5:1) against the theme's window, base and plot backgrounds,
and every series colour at least ``GRAPHIC_CONTRAST`` (3:1) against the plot background
(tests/unit/ui/test_theme_contrast.py); the light theme uses darker shades of the Okabe-Ito
hues for that. Series colours are for lines and swatches, not for text.
Every colour the window uses comes from a ``Theme``; ``apply_theme`` sets the Qt palette
and tells pyqtgraph the defaults, and widgets that draw their own colours (charts, cards)
take the ``Theme`` in their ``apply_theme`` method, so a theme switch needs no restart.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QGuiApplication, QPainter, QPalette, QPen
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleOption, QWidget

from advisor.clock_events import REASON_TABLE, ClockEventReason

#: Okabe & Ito (2008), "Color Universal Design": distinguishable with the common colour
#: vision deficiencies. Yellow is kept for the light-on-dark case only.
OKABE_ITO = {
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
}


#: WCAG 2.x AA: normal text against its background, and graphics (lines, marks, control borders).
TEXT_CONTRAST = 4.5
GRAPHIC_CONTRAST = 3.0


def relative_luminance(colour: str) -> float:
    """WCAG relative luminance of an sRGB ``#rrggbb`` colour."""
    value = QColor(colour)

    def linear(channel: int) -> float:
        c = channel / 255.0
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(value.red()) + 0.7152 * linear(value.green()) + 0.0722 * linear(value.blue())


def contrast_ratio(foreground: str, background: str) -> float:
    """WCAG contrast ratio of two colours, 1 (same) to 21 (black on white)."""
    high, low = sorted((relative_luminance(foreground), relative_luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@dataclass(frozen=True)
class Theme:
    """A resolved theme (``"system"`` is resolved to dark or light before it gets here)."""

    name: str
    window: str
    base: str
    text: str
    muted: str
    grid_alpha: float
    plot_background: str
    accent: str
    #: Plot frames and separators.
    border: str
    ok: str
    warn: str
    bad: str
    #: Series colours in order: first series of every plot gets the first colour, etc.
    series: tuple[str, ...]

    @property
    def dark(self) -> bool:
        return self.name == "dark"

    @property
    def on_accent(self) -> str:
        """Text drawn on an accent-filled background (a selected item, a checked button)."""
        return "#000000" if self.dark else "#ffffff"

    def severity(self, level: str) -> str:
        """The text and border colour of a severity: "critical", "warning", else info."""
        return {"critical": self.bad, "error": self.bad, "warning": self.warn}.get(level, self.accent)


DARK = Theme(
    name="dark",
    window="#1e1f22",
    base="#17181a",
    text="#e6e6e6",
    muted="#a0a4ab",
    grid_alpha=0.18,
    plot_background="#17181a",
    accent=OKABE_ITO["sky"],
    border="#3a3d42",
    ok=OKABE_ITO["green"],
    warn=OKABE_ITO["orange"],
    bad="#DF6300",  # Okabe-Ito vermillion lightened to 4.5:1 on the window background
    series=(OKABE_ITO["sky"], OKABE_ITO["orange"], OKABE_ITO["green"], OKABE_ITO["purple"],
            OKABE_ITO["yellow"], OKABE_ITO["vermillion"]),
)

LIGHT = Theme(
    name="light",
    window="#f4f4f5",
    base="#ffffff",
    text="#1b1b1f",
    muted="#5c6068",
    grid_alpha=0.22,
    plot_background="#ffffff",
    accent=OKABE_ITO["blue"],
    border="#d4d6da",
    # Okabe-Ito green, orange and vermillion darkened to 4.5:1 as text on the window background.
    ok="#007D5B",
    warn="#926500",
    bad="#B65000",
    # Orange, purple and sky darkened to 3:1 as lines on white.
    series=(OKABE_ITO["blue"], "#C28600", OKABE_ITO["green"], "#B8588D", OKABE_ITO["vermillion"], "#1D8FD0"),
)

#: Throttle-cause lane colours: thermal causes warm, power causes cool, the rest neutral.
REASON_COLOURS: dict[ClockEventReason, str] = {
    row.reason: OKABE_ITO[row.colour] for row in REASON_TABLE if row.colour is not None}


def resolve(name: str) -> Theme:
    """``"dark"``/``"light"``, or ``"system"``: follow the desktop's colour scheme (light if unknown)."""
    if name == "dark":
        return DARK
    if name == "light":
        return LIGHT
    app = QGuiApplication.instance()
    if isinstance(app, QGuiApplication) and app.styleHints().colorScheme() == Qt.ColorScheme.Dark:
        return DARK
    return LIGHT


_INDICATORS = (QStyle.PrimitiveElement.PE_IndicatorCheckBox, QStyle.PrimitiveElement.PE_IndicatorItemViewItemCheck)


class VisibleIndicatorStyle(QProxyStyle):
    """Fusion with a check box frame in the theme's muted colour: Fusion outlines the box in the window
    colour darkened by 40 %, which on the dark theme's window is nearly invisible (about 1.2:1)."""

    def __init__(self, theme: Theme) -> None:
        super().__init__("Fusion")
        self.frame_colour = QColor(theme.muted)

    def drawPrimitive(self, element: QStyle.PrimitiveElement, option: QStyleOption, painter: QPainter,
                      widget: QWidget | None = None) -> None:
        super().drawPrimitive(element, option, painter, widget)
        if element in _INDICATORS:
            painter.save()
            painter.setPen(QPen(self.frame_colour, 1))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            rect: QRect = option.rect.adjusted(0, 0, -1, -1)
            painter.drawRect(rect)
            painter.restore()


def apply_theme(app: QApplication, theme: Theme) -> None:
    """Set the Qt palette (Fusion draws it faithfully on every platform) and pyqtgraph defaults."""
    import pyqtgraph as pg

    app.setStyle(VisibleIndicatorStyle(theme))
    palette = QPalette()
    window, base, text = QColor(theme.window), QColor(theme.base), QColor(theme.text)
    muted = QColor(theme.muted)
    for role, colour in (
        (QPalette.ColorRole.Window, window),
        (QPalette.ColorRole.WindowText, text),
        (QPalette.ColorRole.Base, base),
        (QPalette.ColorRole.AlternateBase, window),
        (QPalette.ColorRole.Text, text),
        (QPalette.ColorRole.Button, window),
        (QPalette.ColorRole.ButtonText, text),
        (QPalette.ColorRole.ToolTipBase, base),
        (QPalette.ColorRole.ToolTipText, text),
        (QPalette.ColorRole.PlaceholderText, muted),
        (QPalette.ColorRole.Highlight, QColor(theme.accent)),
        (QPalette.ColorRole.HighlightedText, QColor(theme.on_accent)),
        (QPalette.ColorRole.Link, QColor(theme.accent)),
    ):
        palette.setColor(role, colour)
    palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, muted)
    palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, muted)
    palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText, muted)
    app.setPalette(palette)
    pg.setConfigOptions(background=theme.plot_background, foreground=theme.muted, antialias=False)
