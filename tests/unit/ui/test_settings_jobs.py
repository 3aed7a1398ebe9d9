"""The Settings page edits `rigscope run`'s thermal guard ([jobs]): units, ranges, help, saved like the rest."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from PySide6.QtWidgets import QGroupBox, QLabel, QLineEdit
from pytestqt.qtbot import QtBot

from desktop import config
from desktop.config import Settings
from desktop.ui.pages.settings_page import SettingsPage
from desktop.ui.theme import LIGHT

GUARD_KEYS = ("jobs.guard_resume_offset_c", "jobs.guard_min_pause_s", "jobs.guard_min_run_s")


def _page(qtbot: QtBot, tmp_path: Path, settings: Settings | None = None) -> SettingsPage:
    page = SettingsPage(settings or Settings(), LIGHT, path=tmp_path / "settings.toml", service=lambda enable: None)
    qtbot.addWidget(page)
    page.show()
    return page


def _row_text(page: SettingsPage, key: str) -> str:
    row = page.editors[key].parentWidget()
    assert row is not None
    return " ".join(label.text() for label in row.findChildren(QLabel) if label.isVisible())


def test_the_guard_settings_show_their_values_units_ranges_and_help(qtbot: QtBot, tmp_path: Path) -> None:
    jobs = config.JobSettings(guard_resume_offset_c=7.5, guard_min_pause_s=30.0, guard_min_run_s=45.0)
    page = _page(qtbot, tmp_path, dataclasses.replace(Settings(), jobs=jobs))
    editors = [page.editors[k] for k in GUARD_KEYS]
    assert all(isinstance(e, QLineEdit) for e in editors)
    assert [e.text() for e in editors if isinstance(e, QLineEdit)] == ["7.5", "30", "45"]
    assert _row_text(page, "jobs.guard_resume_offset_c") == "°C below the guard (1 to 30)"
    assert _row_text(page, "jobs.guard_min_pause_s") == "s (0 to 3600)"
    assert "--guard-c" in page.editors["jobs.guard_resume_offset_c"].toolTip()
    assert all(page.editors[k].toolTip() for k in GUARD_KEYS)


def test_guard_settings_are_saved_with_the_others(qtbot: QtBot, tmp_path: Path) -> None:
    page = _page(qtbot, tmp_path)
    for key, text in zip(GUARD_KEYS, ("3", "10", "60"), strict=True):
        editor = page.editors[key]
        assert isinstance(editor, QLineEdit)
        editor.setText(text)
    with qtbot.waitSignal(page.applied) as signal:
        assert page.save() is True
    assert signal.args[0].jobs == config.JobSettings(3.0, 10.0, 60.0)
    loaded, problems = config.load(tmp_path / "settings.toml")
    assert problems == [] and loaded.jobs == config.JobSettings(3.0, 10.0, 60.0)


def test_an_out_of_range_guard_setting_is_refused_beside_its_field(qtbot: QtBot, tmp_path: Path) -> None:
    page = _page(qtbot, tmp_path)
    editor = page.editors["jobs.guard_resume_offset_c"]
    assert isinstance(editor, QLineEdit)
    editor.setText("0.2")
    with qtbot.assertNotEmitted(page.applied):
        assert page.save() is False
    error = page.errors["jobs.guard_resume_offset_c"]
    assert error.isVisible() and "between 1 and 30" in error.text()
    assert not (tmp_path / "settings.toml").exists()


def test_the_guard_settings_have_their_own_group(qtbot: QtBot, tmp_path: Path) -> None:
    page = _page(qtbot, tmp_path)
    (box,) = [b for b in page.findChildren(QGroupBox) if b.title() == "Job guard (rigscope run --guard-c)"]
    assert {e.objectName() for e in box.findChildren(QLineEdit)} == set(GUARD_KEYS)
