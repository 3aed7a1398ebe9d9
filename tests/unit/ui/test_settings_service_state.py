"""Settings → "Record from login" says after every change what `rigscope service status` says, in a label that
wraps: the unit written without systemctl is reported as installed (not "could not change"), and unticking a
unit that the settings file did not know about removes it (not "Saved." with the unit still there)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from desktop import config, service
from desktop.config import Settings
from desktop.ui.pages.settings_page import SettingsPage
from desktop.ui.theme import LIGHT

KEY = "startup.start_at_login"


def _no_systemctl(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
    raise AssertionError(f"ran {command} although systemctl is absent")


@pytest.fixture
def unit_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RIGSCOPE_SYSTEMD_USER_DIR", str(tmp_path / "systemd-user"))
    monkeypatch.setattr("desktop.service.shutil.which", lambda name: None)  # a session without systemctl
    return tmp_path / "systemd-user" / service.UNIT_NAME


def _page(qtbot, tmp_path: Path, settings: Settings | None = None) -> SettingsPage:
    def change(enable: bool) -> None:
        if enable:
            service.install(runner=_no_systemctl, system="linux", db_path=tmp_path / "history.db")
        else:
            service.uninstall(runner=_no_systemctl, system="linux")

    page = SettingsPage(settings or Settings(), LIGHT, path=tmp_path / "settings.toml", service=change,
                        service_status=lambda: service.status(runner=_no_systemctl, system="linux"))
    qtbot.addWidget(page)
    page.resize(700, 500)
    page.show()
    qtbot.waitUntil(lambda: not page.busy)  # the first status read
    return page


def _reported() -> str:
    return service.summary(service.status(runner=_no_systemctl, system="linux"))


def test_tick_and_save_reports_the_written_unit_as_status_does(qtbot, tmp_path: Path, unit_path: Path) -> None:
    page = _page(qtbot, tmp_path)
    page.editors[KEY].setChecked(True)
    with qtbot.waitSignal(page.applied):
        assert page.save() is None
    assert unit_path.exists()
    assert "could not change" not in page.errors[KEY].text() and not page.errors[KEY].isVisible()
    assert _reported() in page.status.text() and "installed" in _reported()
    assert "systemctl --user is not available" in page.status.text()  # what is still to do, said once
    assert page.status.wordWrap()
    assert page.editors[KEY].isChecked()
    assert config.load(tmp_path / "settings.toml")[0].startup.start_at_login is True

    page.editors[KEY].setChecked(False)
    with qtbot.waitSignal(page.applied):
        assert page.save() is None
    assert not unit_path.exists()
    assert _reported() in page.status.text() and "not installed" in page.status.text()
    assert config.load(tmp_path / "settings.toml")[0].startup.start_at_login is False


def test_the_page_shows_a_unit_installed_elsewhere_and_untick_removes_it(qtbot, tmp_path: Path,
                                                                         unit_path: Path) -> None:
    unit_path.parent.mkdir(parents=True)
    unit_path.write_text(service.render_unit(["/usr/bin/rigscope", "record"]), encoding="utf-8")
    page = _page(qtbot, tmp_path)  # the settings file says off; `rigscope service install` ran in a terminal
    assert page.editors[KEY].isChecked()
    assert _reported() in page.status.text()
    page.editors[KEY].setChecked(False)
    with qtbot.waitSignal(page.applied):
        assert page.save() is None
    assert not unit_path.exists()
    assert "not installed" in page.status.text() and page.status.text() != "Saved."


def test_a_long_message_wraps_instead_of_widening_the_page(qtbot, tmp_path: Path, unit_path: Path) -> None:
    page = _page(qtbot, tmp_path)
    page.editors[KEY].setChecked(True)
    with qtbot.waitSignal(page.applied):
        page.save()
    assert page.sizeHint().width() <= 700 and page.minimumSizeHint().width() <= 700
    assert page.status.height() > page.status.fontMetrics().height() * 1.5  # on more than one line
