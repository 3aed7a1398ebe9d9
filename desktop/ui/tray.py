"""The tray icon: utilization and temperature in its tooltip, Show and Quit in its menu, notifications.

Where no tray host exists (offscreen, a bare X server, some Wayland desktops)
``QSystemTrayIcon.isSystemTrayAvailable()`` is False: then there is no icon, closing the
window quits, and notifications go to the window's alerts (status bar) only. Tests inject ``available``.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from desktop.paths import resource_path
from desktop.telemetry.model import DeviceState, Snapshot


def app_icon() -> QIcon:
    """The app icon (resources/rigscope.svg when present, else a drawn placeholder)."""
    path = resource_path("rigscope.svg")
    if path.exists():
        icon = QIcon(str(path))
        if not icon.isNull():
            return icon
    pixmap = QPixmap(64, 64)
    pixmap.fill(QColor(0, 0, 0, 0))
    painter = QPainter(pixmap)
    painter.setBrush(QColor("#0072B2"))
    painter.setPen(QColor("#56B4E9"))
    painter.drawRoundedRect(4, 4, 56, 56, 10, 10)
    painter.setBrush(QColor("#E69F00"))
    for i, height in enumerate((18, 30, 40)):
        painter.drawRect(14 + 13 * i, 52 - height, 9, height)
    painter.end()
    return QIcon(pixmap)


def tooltip_for(snap: Snapshot) -> str:
    """``"Rigscope — GPU 0: 87 %, 71 °C"`` per GPU."""
    parts = []
    for reading in snap.gpus:
        index = reading.info.index
        if reading.state is DeviceState.ASLEEP:
            parts.append(f"GPU {index}: asleep")
            continue
        if reading.state is DeviceState.LOST or reading.sample is None:
            parts.append(f"GPU {index}: lost")
            continue
        s = reading.sample
        util = "n/a" if s.utilization_gpu_pct is None else f"{s.utilization_gpu_pct:.0f} %"
        temp = "n/a" if s.temperature_c is None else f"{s.temperature_c:.0f} °C"
        parts.append(f"GPU {index}: {util}, {temp}")
    return "Rigscope — " + ("; ".join(parts) if parts else "no GPU")


class Tray(QObject):
    """Owns the QSystemTrayIcon when a tray exists; otherwise every method is a no-op."""

    show_requested = Signal()
    quit_requested = Signal()

    def __init__(self, available: bool | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.available = QSystemTrayIcon.isSystemTrayAvailable() if available is None else available
        self.tooltip = "Rigscope"
        self.notifications: list[tuple[str, str]] = []
        self.icon: QSystemTrayIcon | None = None
        self.menu: QMenu | None = None
        if not self.available:
            return
        self.icon = QSystemTrayIcon(app_icon(), self)
        self.menu = QMenu()
        show = QAction("Show Rigscope", self.menu)
        show.triggered.connect(self.show_requested.emit)
        quit_action = QAction("Quit", self.menu)
        quit_action.triggered.connect(self.quit_requested.emit)
        self.menu.addAction(show)
        self.menu.addSeparator()
        self.menu.addAction(quit_action)
        self.icon.setContextMenu(self.menu)
        self.icon.activated.connect(self._activated)
        self.icon.setToolTip(self.tooltip)
        self.icon.show()

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (QSystemTrayIcon.ActivationReason.Trigger, QSystemTrayIcon.ActivationReason.DoubleClick):
            self.show_requested.emit()

    def update(self, snap: Snapshot) -> None:
        self.tooltip = tooltip_for(snap)
        if self.icon is not None:
            self.icon.setToolTip(self.tooltip)

    def notify(self, title: str, message: str, error: bool = False) -> None:
        self.notifications.append((title, message))
        if self.icon is not None:
            kind = QSystemTrayIcon.MessageIcon.Critical if error else QSystemTrayIcon.MessageIcon.Warning
            self.icon.showMessage(title, message, kind, 10_000)

    def close(self) -> None:
        if self.icon is not None:
            self.icon.hide()
            self.icon.deleteLater()
            self.icon = None
        if self.menu is not None:
            self.menu.deleteLater()
            self.menu = None
