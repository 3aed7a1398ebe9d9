"""Settings files nobody should write, but someone did: bad bytes, huge numbers, control characters.

Issue 12 item 3: each of these crashed every command that reads the settings (gui, record,
advise, report, exporter, stress) or made `save` write a file that lost every setting.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from desktop import config
from desktop.cli import main as cli_main
from desktop.config import Settings

DEFAULTS = Settings()
REPO = Path(__file__).resolve().parents[2]


def _load_bytes(tmp_path: Path, data: bytes) -> tuple[Settings, list[tuple[str, str]]]:
    path = tmp_path / "settings.toml"
    path.write_bytes(data)
    return config.load(path)


def test_invalid_utf8_keeps_the_other_settings_and_reports_the_value(tmp_path: Path) -> None:
    loaded, problems = _load_bytes(tmp_path, b'[costs]\ncurrency = "\xa3"\nelectricity_price_per_kwh = 0.3\n')
    assert loaded.costs.currency == DEFAULTS.costs.currency
    assert loaded.costs.electricity_price_per_kwh == 0.3
    assert ("costs.currency", "is not valid UTF-8 text") in problems


def test_invalid_utf8_outside_a_value_is_a_file_problem(tmp_path: Path) -> None:
    loaded, problems = _load_bytes(tmp_path, b'[co\xffsts]\ncurrency = "EUR"\n')
    assert loaded == DEFAULTS
    assert problems and problems[0][0] == "file"


@pytest.mark.parametrize("digits", [400, 5000])
def test_a_huge_integer_is_a_problem_of_that_value(tmp_path: Path, digits: int) -> None:
    loaded, problems = _load_bytes(tmp_path, f"[alerts]\ntemperature_c = {'9' * digits}\nvram_pct = 90\n".encode())
    assert loaded.alerts.temperature_c == DEFAULTS.alerts.temperature_c
    if digits == 400:  # parsed, then refused for its range
        assert loaded.alerts.vram_pct == 90
        assert dict(problems)["alerts.temperature_c"].startswith("must be")
    else:  # past Python's integer-string limit the parser gives up on the file
        assert problems and problems[0][0] == "file"


@pytest.mark.parametrize("key", ["retention.raw_days", "costs.amortisation_months", "alerts.gpu_lost",
                                 "costs.currency", "appearance.theme"])
def test_a_huge_integer_in_any_field_never_raises(tmp_path: Path, key: str) -> None:
    section, name = key.split(".")
    loaded, problems = _load_bytes(tmp_path, f"[{section}]\n{name} = -{'7' * 400}\n".encode())
    assert getattr(getattr(loaded, section), name) == getattr(getattr(DEFAULTS, section), name)
    assert key in dict(problems)


def test_deep_nesting_and_huge_files_are_file_problems(tmp_path: Path) -> None:
    loaded, problems = _load_bytes(tmp_path, b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n")
    assert loaded == DEFAULTS and problems[0][0] == "file"
    loaded, problems = _load_bytes(tmp_path, b"# " + b"a" * (2 << 20) + b"\n")
    assert loaded == DEFAULTS and problems[0][0] == "file" and "too large" in problems[0][1]


@pytest.mark.parametrize("text", ["E\x1b[2JUR", "E\nUR", "EUR\x00", "\u202eRUE", "E\x7fR"])
def test_control_characters_in_a_text_setting_are_refused(text: str) -> None:
    settings_, problems = config.validate({"costs": {"currency": text}})
    assert settings_ is None
    assert dict(problems)["costs.currency"].startswith("must not contain control characters")


def test_save_writes_valid_toml_even_for_settings_built_directly(tmp_path: Path) -> None:
    """A Settings object made in code skips validation; the file must still parse, and lose nothing else."""
    import dataclasses

    odd = dataclasses.replace(DEFAULTS, costs=dataclasses.replace(DEFAULTS.costs, currency='E"\\\n\x00\ud800',
                                                                   electricity_price_per_kwh=0.25))
    path = tmp_path / "settings.toml"
    config.save(odd, path)
    tomllib.loads(path.read_text(encoding="utf-8"))  # valid TOML, valid UTF-8
    loaded, problems = config.load(path)
    assert loaded.costs.electricity_price_per_kwh == 0.25  # the rest survives
    assert loaded.costs.currency == DEFAULTS.costs.currency and "costs.currency" in dict(problems)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=16))
def test_any_text_setting_either_round_trips_or_is_refused(text: str) -> None:
    settings_, problems = config.validate({"costs": {"currency": text}})
    if settings_ is None:
        assert [key for key, _ in problems] == ["costs.currency"]
        return
    loaded, load_problems = config.from_mapping(tomllib.loads(config.dumps(settings_)))
    assert load_problems == [] and loaded == settings_


@settings(max_examples=100, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-(10**30), max_value=10**30))
def test_any_number_setting_saves_as_valid_toml(number: float, whole: int) -> None:
    import dataclasses

    odd = dataclasses.replace(DEFAULTS, alerts=dataclasses.replace(DEFAULTS.alerts, temperature_c=number),
                              retention=dataclasses.replace(DEFAULTS.retention, raw_days=whole))
    loaded, _ = config.from_mapping(tomllib.loads(config.dumps(odd)))  # parses; bad values are reported
    assert loaded.sampling == DEFAULTS.sampling


@pytest.mark.parametrize("command", [["advise"], ["report", "-o", "out.html"]])
def test_commands_report_a_hostile_settings_file_instead_of_crashing(
        command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "settings.toml").write_bytes(b'[costs]\ncurrency = "\xa3"\n[alerts]\ntemperature_c = '
                                               + b"9" * 400 + b"\n")
    monkeypatch.setenv("RIGSCOPE_CONFIG_DIR", str(config_dir))
    monkeypatch.chdir(tmp_path)
    code = cli_main([*command, "--db", str(tmp_path / "none.sqlite")], now_s=1_790_000_000.0)
    err = capsys.readouterr().err
    # Each bad value is reported, and the command goes on to its next step (here: no database there).
    assert "costs.currency: is not valid UTF-8 text" in err and "alerts.temperature_c: must be between" in err
    assert code == 2 and "none.sqlite" in err and "Traceback" not in err


def _rows(db: Path) -> int:
    """GPU samples stored so far; 0 while the database is not there or not yet made."""
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
    try:
        return int(conn.execute("SELECT count(*) FROM gpu_samples").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_fifo_as_the_settings_file_does_not_stop_record(tmp_path: Path) -> None:
    """Issue 34 item 5: opening a FIFO with no writer blocked ``record`` before it started."""
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    os.mkfifo(config_dir / "settings.toml")
    db = tmp_path / "h.sqlite"
    env = dict(os.environ, RIGSCOPE_CONFIG_DIR=str(config_dir),
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "desktop", "record", "--simulate", "--interval", "0.2",
                             "--db", str(db)], stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 90.0  # generous for a busy machine; the rows are what is waited for
        while _rows(db) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _rows(db) >= 3, "record stored nothing: it is stuck on the settings FIFO"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "settings.toml: is a FIFO (named pipe), not a regular file; using defaults" in err
    assert "Traceback" not in err
