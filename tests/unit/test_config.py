"""Settings: validation per field, all-or-nothing updates, atomic save, bad files reported."""

from __future__ import annotations

from pathlib import Path

from desktop import config
from desktop.config import Settings


def test_defaults_round_trip_through_toml(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    config.save(Settings(), path)
    loaded, problems = config.load(path)
    assert problems == []
    assert loaded == Settings()


def test_changed_values_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    settings, problems = config.validate({"alerts": {"temperature_c": "80"}, "appearance": {"theme": "dark"},
                                          "costs": {"currency": "EUR", "electricity_price_per_kwh": 0.29}})
    assert problems == [] and settings is not None
    config.save(settings, path)
    loaded, _ = config.load(path)
    assert loaded.alerts.temperature_c == 80.0
    assert loaded.appearance.theme == "dark"
    assert loaded.costs.currency == "EUR"


def test_invalid_values_are_refused_per_field_and_nothing_changes() -> None:
    settings, problems = config.validate({
        "sampling": {"interval_s": "0"},
        "alerts": {"temperature_c": "hot", "vram_pct": 50},
        "appearance": {"theme": "purple"},
        "retention": {"raw_days": 1.5},
    })
    assert settings is None
    keys = dict(problems)
    assert keys["sampling.interval_s"].startswith("must be between 0.1")
    assert keys["alerts.temperature_c"] == "must be a number"
    assert keys["appearance.theme"] == "must be one of system, dark, light"
    assert keys["retention.raw_days"] == "must be a whole number"
    assert "alerts.vram_pct" not in keys


def test_values_that_contradict_each_other_are_refused() -> None:
    settings, problems = config.validate({"retention": {"raw_days": 30, "minute_days": 7}})
    assert settings is None
    assert ("retention.minute_days", "must be at least the raw retention") in problems


def test_a_broken_file_gives_defaults_and_a_message(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text("[alerts\ntemperature_c = ", encoding="utf-8")
    loaded, problems = config.load(path)
    assert loaded == Settings()
    assert problems[0][0] == "file" and "not valid TOML" in problems[0][1]


def test_a_bad_value_in_a_file_keeps_the_default_for_that_value_only(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text('[alerts]\ntemperature_c = 500\nvram_pct = 90\n[nonsense]\nx = 1\n', encoding="utf-8")
    loaded, problems = config.load(path)
    assert loaded.alerts.temperature_c == Settings().alerts.temperature_c
    assert loaded.alerts.vram_pct == 90
    assert {p[0] for p in problems} == {"alerts.temperature_c", "nonsense"}


def test_missing_file_is_not_a_problem(tmp_path: Path) -> None:
    assert config.load(tmp_path / "absent.toml") == (Settings(), [])


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    config.save(Settings(), path)
    config.save(Settings(), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.toml"]
