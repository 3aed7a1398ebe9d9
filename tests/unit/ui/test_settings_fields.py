"""The Settings page's field table: every field names a setting once, and a value goes through its editor and
``config.validate`` unchanged."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest

from desktop import config
from desktop.config import Settings
from desktop.service import ServiceStatus
from desktop.ui.pages.settings_fields import GROUPS, editor_value, make_editor, setting_value, show_value
from desktop.ui.pages.settings_service import change_service, read_status, with_start_at_login

FIELDS = [f for _title, fields in GROUPS for f in fields]


def _through_the_editors(settings: Settings) -> tuple[Settings | None, list[tuple[str, str]]]:
    data: dict[str, dict[str, Any]] = {}
    for f in FIELDS:
        editor = make_editor(f)
        assert editor.objectName() == f.key
        show_value(editor, setting_value(settings, f.key))
        section, name = f.key.split(".")
        data.setdefault(section, {})[name] = editor_value(editor)
    return config.validate(data, settings)


def test_every_field_names_one_setting_once() -> None:
    keys = [f.key for f in FIELDS]
    assert len(keys) == len(set(keys))
    for key in keys:
        section, name = key.split(".")
        assert name in {f.name for f in dataclasses.fields(getattr(Settings(), section))}


@pytest.mark.parametrize("settings", [
    Settings(),
    dataclasses.replace(
        Settings(),
        sampling=dataclasses.replace(Settings().sampling, interval_s=0.5),
        retention=dataclasses.replace(Settings().retention, hour_days=0),  # the spin box's "forever"
        appearance=dataclasses.replace(Settings().appearance, theme="dark"),
        costs=dataclasses.replace(Settings().costs, currency="EUR", electricity_price_per_kwh=0.31),
        alerts=dataclasses.replace(Settings().alerts, gpu_lost=False),
    ),
], ids=["defaults", "changed"])
def test_a_value_goes_through_its_editor_unchanged(qapp, settings: Settings) -> None:
    assert _through_the_editors(settings) == (settings, [])


def test_start_at_login_status_that_cannot_be_read_is_none(caplog: pytest.LogCaptureFixture) -> None:
    def unreadable() -> ServiceStatus:
        raise OSError("no unit")

    assert read_status(None) is None
    with caplog.at_level(logging.INFO):
        assert read_status(unreadable) is None
    assert "start-at-login status unknown: no unit" in caplog.text


def test_a_refused_change_says_why_and_reads_the_state_after() -> None:
    state = ServiceStatus("systemd", installed=True, enabled=None, active=None, location="/unit", command=[])
    asked: list[bool] = []

    def refuse(enable: bool) -> None:
        asked.append(enable)
        raise RuntimeError("systemctl --user is not available here")

    assert change_service(refuse, True, lambda: state) == ("systemctl --user is not available here", state)
    assert change_service(asked.append, False, None) == ("", None)
    assert asked == [True, False]
    assert with_start_at_login(Settings(), True).startup.start_at_login is True
