"""The settings page refuses invalid values beside their fields and never saves half of a change."""

from __future__ import annotations

import threading

from desktop import config
from desktop.config import Settings
from desktop.ui.pages.settings_page import SettingsPage
from desktop.ui.theme import LIGHT
from tests.unit.ui.conftest import gui_stays_responsive


def make_page(qtbot, tmp_path, service=None, settings=None):
    calls = []

    def fake_service(enable: bool) -> None:
        calls.append(enable)
        if service is not None:
            service(enable)

    page = SettingsPage(settings or Settings(), LIGHT, path=tmp_path / "settings.toml", service=fake_service)
    qtbot.addWidget(page)
    page.show()
    return page, calls


def test_invalid_values_are_refused_beside_their_fields_and_nothing_is_saved(qtbot, tmp_path):
    page, _ = make_page(qtbot, tmp_path)
    page.editors["sampling.interval_s"].setText("fast")
    page.editors["alerts.temperature_c"].setText("500")
    page.editors["costs.electricity_price_per_kwh"].setText("0.31")  # valid, but must not be saved alone
    with qtbot.assertNotEmitted(page.applied):
        assert page.save() is False
    assert page.errors["sampling.interval_s"].isVisible()
    assert page.errors["sampling.interval_s"].text() == "must be a number"
    assert "between 30 and 120" in page.errors["alerts.temperature_c"].text()
    assert not page.errors["costs.electricity_price_per_kwh"].isVisible()
    assert not (tmp_path / "settings.toml").exists()
    assert page.settings == Settings()
    assert "Not saved" in page.status.text()


def test_cross_field_rules_are_shown_too(qtbot, tmp_path):
    page, _ = make_page(qtbot, tmp_path)
    page.editors["retention.raw_days"].setText("30")
    page.editors["retention.minute_days"].setText("7")
    assert page.save() is False
    assert "raw retention" in page.errors["retention.minute_days"].text()


def test_valid_values_are_saved_atomically_and_applied(qtbot, tmp_path):
    page, _ = make_page(qtbot, tmp_path)
    page.editors["alerts.temperature_c"].setText("80")
    page.editors["appearance.theme"].setCurrentText("dark")
    page.editors["costs.currency"].setText("EUR")
    with qtbot.waitSignal(page.applied) as signal:
        assert page.save() is True
    new = signal.args[0]
    assert new.alerts.temperature_c == 80.0 and new.appearance.theme == "dark" and new.costs.currency == "EUR"
    loaded, problems = config.load(tmp_path / "settings.toml")
    assert problems == [] and loaded == new
    assert not any(label.isVisible() for label in page.errors.values())


def test_start_at_login_calls_the_service_and_a_failure_saves_nothing(qtbot, tmp_path):
    def refuse(enable: bool) -> None:
        raise RuntimeError("systemctl is not available")

    page, calls = make_page(qtbot, tmp_path, service=refuse)
    page.editors["startup.start_at_login"].setChecked(True)
    page.editors["alerts.temperature_c"].setText("80")
    with qtbot.assertNotEmitted(page.applied):
        assert page.save() is None  # systemctl runs on a worker thread
        qtbot.waitUntil(lambda: not page.busy)
    assert calls == [True]
    assert "systemctl is not available" in page.errors["startup.start_at_login"].text()
    assert page.status.text() == "Not saved"
    assert not (tmp_path / "settings.toml").exists()

    page2, calls2 = make_page(qtbot, tmp_path)
    page2.editors["startup.start_at_login"].setChecked(True)
    with qtbot.waitSignal(page2.applied):
        assert page2.save() is None
    assert calls2 == [True]
    assert config.load(tmp_path / "settings.toml")[0].startup.start_at_login is True


def test_revert_shows_the_current_settings_again(qtbot, tmp_path):
    page, _ = make_page(qtbot, tmp_path)
    page.editors["sampling.interval_s"].setText("nonsense")
    page.save()
    page.revert()
    assert page.editors["sampling.interval_s"].text() == "1"
    assert not page.errors["sampling.interval_s"].isVisible()


def test_saved_settings_reach_the_running_app(make_app):
    h = make_app()
    page = h.app.settings_page
    page.editors["sampling.interval_s"].setText("2")
    page.editors["sampling.process_interval_s"].setText("10")
    page.editors["alerts.temperature_c"].setText("70")
    page.editors["appearance.theme"].setCurrentText("dark")
    assert page.save() is True
    assert h.app.sampling.interval_s == 2.0
    assert h.app.sampler.process_period_s == 10.0
    assert h.app.alerts.settings.temperature_c == 70.0
    assert h.app.theme.name == "dark"


def test_start_at_login_is_changed_off_the_gui_thread(qtbot, tmp_path):
    release = threading.Event()

    def slow_systemctl(enable: bool) -> None:
        assert release.wait(10)

    page, calls = make_page(qtbot, tmp_path, service=slow_systemctl)
    page.editors["startup.start_at_login"].setChecked(True)
    try:
        assert page.save() is None
        assert page.busy and page.status.text() == "Turning start at login on…"
        assert not page.save_button.isEnabled() and not page.revert_button.isEnabled()
        assert page.save() is None  # a second click while it runs changes nothing
        gui_stays_responsive(qtbot)
        assert not (tmp_path / "settings.toml").exists()  # nothing written before the service answered
    finally:
        release.set()
    with qtbot.waitSignal(page.applied) as signal:
        pass
    assert signal.args[0].startup.start_at_login is True and calls == [True]
    assert page.status.text() == "Saved." and page.save_button.isEnabled()
    assert config.load(tmp_path / "settings.toml")[0].startup.start_at_login is True


def test_saving_the_page_keeps_the_fleet_settings_it_has_no_fields_for(qtbot, tmp_path):
    """[fleet] has no fields on the page yet (the Fleet page will add them): a save must not lose it."""
    import dataclasses

    fleet = config.FleetSettings(url="https://prometheus.example:9090", timeout_s=12.0, tls_verify=False,
                                 user="team", password_file="/run/secrets/prometheus")
    page, _ = make_page(qtbot, tmp_path, settings=dataclasses.replace(Settings(), fleet=fleet))
    page.editors["alerts.temperature_c"].setText("80")
    with qtbot.waitSignal(page.applied):
        assert page.save() is True
    assert config.load(tmp_path / "settings.toml") == (dataclasses.replace(
        Settings(), fleet=fleet, alerts=dataclasses.replace(Settings().alerts, temperature_c=80.0)), [])
