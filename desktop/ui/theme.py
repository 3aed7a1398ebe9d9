"""Colours: the system/dark/light themes and a colour-blind-safe (Okabe-Ito) series palette.

Every colour the window uses comes from a ``Theme``; ``apply_theme`` sets the Qt palette
and tells pyqtgraph the defaults, and widgets that draw their own colours (charts, cards)
take the ``Theme`` in their ``apply_theme`` method, so a theme switch needs no restart.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from desktop.telemetry.model import ClockEventReason

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
    bad=OKABE_ITO["vermillion"],
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
    ok=OKABE_ITO["green"],
    warn="#b07800",  # Okabe-Ito orange darkened for contrast on white text backgrounds
    bad=OKABE_ITO["vermillion"],
    series=(OKABE_ITO["blue"], OKABE_ITO["orange"], OKABE_ITO["green"], OKABE_ITO["purple"],
            OKABE_ITO["vermillion"], OKABE_ITO["sky"]),
)

#: Throttle-cause lane colours: thermal causes warm, power causes cool, the rest neutral.
REASON_COLOURS: dict[ClockEventReason, str] = {
    ClockEventReason.SW_POWER_CAP: OKABE_ITO["sky"],
    ClockEventReason.HW_POWER_BRAKE_SLOWDOWN: OKABE_ITO["blue"],
    ClockEventReason.SW_THERMAL_SLOWDOWN: OKABE_ITO["orange"],
    ClockEventReason.HW_THERMAL_SLOWDOWN: OKABE_ITO["vermillion"],
    ClockEventReason.HW_SLOWDOWN: OKABE_ITO["purple"],
}


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


def apply_theme(app: QApplication, theme: Theme) -> None:
    """Set the Qt palette (Fusion draws it faithfully on every platform) and pyqtgraph defaults."""
    import pyqtgraph as pg

    app.setStyle("Fusion")
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
        (QPalette.ColorRole.HighlightedText, QColor("#000000" if theme.dark else "#ffffff")),
        (QPalette.ColorRole.Link, QColor(theme.accent)),
    ):
        palette.setColor(role, colour)
    palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, muted)
    palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, muted)
    palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText, muted)
    app.setPalette(palette)
    pg.setConfigOptions(background=theme.plot_background, foreground=theme.muted, antialias=False)
