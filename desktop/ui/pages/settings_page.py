"""The settings page: every user setting with its unit, refused values explained beside their field.

Saving is all-or-nothing: ``desktop.config.validate`` checks every field first; when one is
wrong nothing is written and each problem shows next to its field. Start at login calls
``desktop.service`` (when that module exists) before the file is written, so a failure
there leaves the old settings untouched as well. That call runs ``systemctl`` (or
``schtasks``), which can take seconds, so it runs on a worker thread (``background.Loader``):
the page says it is changing start at login, its buttons wait, and the file is written when
the service manager has answered.

The check box shows what the service manager says, not only what the settings file says: each
time the page is shown, and after every change, it reads ``desktop.service.status`` (on the
worker thread too) and says it in the words of ``rigscope service status`` ("installed
(systemd: …); starts at login: unknown; running: unknown (systemctl --user is not available
here)"). A unit that was written but could not be enabled is installed, so the setting is saved
as on, with what is left to do; a unit installed from a terminal shows ticked, and unticking
it removes it.

The field table and its editors are in ``settings_fields.py``; the start-at-login calls that run on the worker
thread in ``settings_service.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from desktop import config
from desktop.config import Settings
from desktop.service import ServiceStatus, summary
from desktop.ui.background import Loader
from desktop.ui.pages.base import PageWidget
from desktop.ui.pages.settings_fields import GROUPS, Editor, Field, editor_value, make_editor, setting_value, show_value
from desktop.ui.pages.settings_service import (
    StatusSource,
    change_service,
    default_service,
    read_status,
    with_start_at_login,
)
from desktop.ui.theme import Theme


class SettingsPage(PageWidget):
    """Edits ``Settings``; ``applied`` carries the new settings after a successful save."""

    applied = Signal(object)

    def __init__(self, settings: Settings, theme: Theme, path: Path | None = None,
                 service: Callable[[bool], None] | None = None, parent: QWidget | None = None,
                 *, service_status: StatusSource | None = None) -> None:
        """``service(enable)`` changes start at login; ``service_status()`` reads it (both on a worker thread).
        Without ``service`` both are ``desktop.service``'s; a ``service`` without ``service_status`` is
        trusted to have done what it did not refuse."""
        super().__init__(parent)
        self.settings = settings
        self.theme = theme
        self.path = path
        if service is None:
            from desktop import service as start_at_login

            self._service: Callable[[bool], None] | None = default_service()
            self._status: StatusSource | None = service_status or start_at_login.status
        else:
            self._service, self._status = service, service_status
        #: What the service manager said last (None: not asked, or it could not tell).
        self.service_state: ServiceStatus | None = None
        self.service_loader = Loader(self, name="service")
        self.editors: dict[str, Editor] = {}
        self.errors: dict[str, QLabel] = {}

        body = QWidget()
        body_layout = QVBoxLayout(body)
        for title, fields in GROUPS:
            box = QGroupBox(title)
            form = QFormLayout(box)
            form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.FieldsStayAtSizeHint)
            for f in fields:
                form.addRow(f.label, self._row(f))
            body_layout.addWidget(box)
        body_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(body)

        self.save_button = QPushButton("Save")
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self.save)
        self.revert_button = QPushButton("Revert")
        self.revert_button.clicked.connect(self.revert)
        self.status = QLabel("")
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # paths and systemctl's words are shown as they are
        self.status.setWordWrap(True)  # a long systemctl message wraps instead of adding a scroll bar
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons = QHBoxLayout()
        buttons.addWidget(self.status, 1)
        buttons.addWidget(self.revert_button)
        buttons.addWidget(self.save_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(scroll, 1)
        layout.addLayout(buttons)
        self.revert()

    def _row(self, f: Field) -> QWidget:
        row = QWidget()
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        editor = make_editor(f)
        layout.addWidget(editor)
        if f.unit and f.kind != "spin":  # a spin box carries its unit (and "forever" reads alone)
            layout.addWidget(QLabel(f.unit))
        error = QLabel("")
        error.setTextFormat(Qt.TextFormat.PlainText)
        error.setWordWrap(True)
        error.setObjectName(f"{f.key}.error")
        error.hide()
        layout.addWidget(error, 1)
        self.editors[f.key] = editor
        self.errors[f.key] = error
        return row

    def revert(self) -> None:
        """Show the current settings, clearing any error."""
        for key, editor in self.editors.items():
            show_value(editor, setting_value(self.settings, key))
        if self.service_state is not None:
            self._start_box().setChecked(self.service_state.installed)
        self._show_problems([])
        self.status.setText(self._service_line())

    def _start_box(self) -> QCheckBox:
        box = self.editors["startup.start_at_login"]
        assert isinstance(box, QCheckBox)
        return box

    def _service_line(self) -> str:
        return f"Record from login: {summary(self.service_state)}." if self.service_state is not None else ""

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.refresh_service_state()

    def refresh_service_state(self) -> None:
        """Ask the service manager whether the recorder starts at login (worker thread); the box follows."""
        if self._status is None or self.busy:
            return
        status = self._status
        self.service_loader.run(lambda: read_status(status), self._state_read, lambda error: None)

    def _state_read(self, state: ServiceStatus | None) -> None:
        self.service_state = state
        if state is not None:
            self._start_box().setChecked(state.installed)
            self.status.setText(self._service_line())
            self.status.setStyleSheet(f"color: {self.theme.muted};")

    def mapping(self) -> dict[str, dict[str, Any]]:
        """What the fields hold, as ``{"section": {"key": raw value}}`` for ``config.validate``."""
        out: dict[str, dict[str, Any]] = {}
        for key, editor in self.editors.items():
            section, name = key.split(".")
            out.setdefault(section, {})[name] = editor_value(editor)
        return out

    def _show_problems(self, problems: list[tuple[str, str]]) -> None:
        by_key = dict(problems)
        for key, label in self.errors.items():
            message = by_key.get(key)
            label.setText(message or "")
            label.setStyleSheet(f"color: {self.theme.bad};")
            label.setVisible(bool(message))
        unplaced = [f"{k}: {m}" for k, m in problems if k not in self.errors]
        if unplaced:
            self.status.setText("; ".join(unplaced))

    @property
    def busy(self) -> bool:
        """Start at login is being changed (the save finishes when it has been)."""
        return self.service_loader.busy

    def save(self) -> bool | None:
        """Validate everything, then apply start-at-login, then write the file; all or nothing.

        True: saved. False: not saved (the problems are shown). None: start at login is being
        changed on a worker thread first; ``applied`` or the problem beside the field follows.
        """
        if self.busy:
            return None
        new, problems = config.validate(self.mapping(), self.settings)
        if new is None:
            self._show_problems(problems)
            self.status.setText(f"Not saved: {len(problems)} value{'s' if len(problems) != 1 else ''} to fix")
            self.status.setStyleSheet(f"color: {self.theme.bad};")
            return False
        state = self.service_state
        now_on = state.installed if state is not None else self.settings.startup.start_at_login
        if new.startup.start_at_login != now_on:
            service = self._service
            if service is None:
                self._show_problems([("startup.start_at_login", "the recorder service is not available in this build")])
                self.status.setText("Not saved")
                return False
            enable = new.startup.start_at_login
            self._set_busy(True)
            self.status.setText("Turning start at login " + ("on…" if enable else "off…"))
            self.status.setStyleSheet(f"color: {self.theme.muted};")
            status = self._status
            self.service_loader.run(lambda: change_service(service, enable, status),
                                    lambda answer: self._service_done(new, *answer), self._service_failed)
            return None
        return self._write(new)

    def _service_done(self, new: Settings, refused: str, state: ServiceStatus | None) -> None:
        wanted = new.startup.start_at_login
        if state is None:  # nobody to ask: the change took effect unless it was refused
            if refused:
                self._service_failed(refused)
                return
            self._set_busy(False)
            self._write(new)
            return
        self.service_state = state
        self._set_busy(False)
        if state.installed != wanted:  # it did not happen: nothing is saved, and the box says what is true
            self._start_box().setChecked(state.installed)
            self._show_problems([("startup.start_at_login", f"could not change: {refused or 'no change'}")])
            self.status.setText(f"Not saved. {self._service_line()}")
            self.status.setStyleSheet(f"color: {self.theme.bad};")
            return
        # Installed as asked, perhaps not yet enabled (no systemctl here): saved as on, with what is left to do.
        if self._write(with_start_at_login(new, state.installed)):
            self.status.setText(" ".join(part for part in ("Saved.", self._service_line(), refused) if part))

    def _service_failed(self, error: str) -> None:
        self._set_busy(False)
        self._show_problems([("startup.start_at_login", f"could not change: {error}")])
        self.status.setText("Not saved")

    def _set_busy(self, busy: bool) -> None:
        for button in (self.save_button, self.revert_button):
            button.setEnabled(not busy)

    def _write(self, new: Settings) -> bool:
        try:
            config.save(new, self.path)
        except OSError as exc:
            self.status.setText(f"Not saved: cannot write the settings file ({exc.strerror or exc})")
            self.status.setStyleSheet(f"color: {self.theme.bad};")
            return False
        self.settings = new
        self._show_problems([])
        self.status.setText(" ".join(part for part in ("Saved.", self._service_line()) if part))
        self.status.setStyleSheet(f"color: {self.theme.muted};")
        self.applied.emit(new)
        return True

    def wait(self, timeout_s: float) -> bool:
        """Let a start-at-login change in flight end; True when none is left."""
        return self.service_loader.wait(timeout_s)

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
