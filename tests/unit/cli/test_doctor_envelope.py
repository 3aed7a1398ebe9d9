"""`rigscope doctor` over NVML with fake sysfs trees of a laptop: the one line and the envelope's fields."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from desktop.cli import doctor
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml, desktop_gpu

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"


def _machine(monkeypatch: pytest.MonkeyPatch, case: str, limit_w: int, gpus: list[FakeGpu] | None = None) -> None:
    root = FIXTURES / case
    monkeypatch.setenv("RIGSCOPE_SYSFS_ROOT", str(root / "sys"))
    monkeypatch.setenv("RIGSCOPE_PROC_ROOT", str(root / "proc"))
    monkeypatch.setenv("RIGSCOPE_UNIT_DIRS", str(root / "units"))
    FakeNvml(gpus or [FakeGpu(power_limit_mw=limit_w * 1000)]).install(monkeypatch)


def _doctor(capsys: pytest.CaptureFixture[str], *, json_out: bool) -> str:
    assert doctor.main(argparse.Namespace(json=json_out, simulate=None)) == 0
    return capsys.readouterr().out


CASES = [
    ("on_battery", 55, "capped at 55 W of 175 W: on battery",
     {"on_ac": False, "battery_pct": 64.0, "msi_shift_mode": "comfort", "powerd_running": True}),
    ("powerd_stopped", 115, "capped at 115 W of 175 W: nvidia-powerd is not running, so Dynamic Boost is off",
     {"on_ac": True, "powerd_running": False, "powerd_installed": True, "msi_shift_mode": "turbo"}),
    ("msi_ec_eco", 80, "capped at 80 W of 175 W: firmware mode Eco",
     {"on_ac": True, "msi_shift_mode": "eco", "firmware_mode_name": "Eco", "powerd_running": True}),
    ("rated", 175, "at its rated power (175 W)", {"msi_cooler_boost": True, "cpu_package_temp_c": 74.0}),
    ("none", 150, "capped at 150 W of 175 W: the cause is not readable here",
     {"on_ac": None, "msi_shift_mode": None, "platform_profile": None, "powerd_running": None, "any_source": False}),
]


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0] for c in CASES])
def test_doctor_line_and_fields_per_case(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                         index: int) -> None:
    case, limit_w, line, fields = CASES[index]
    assert isinstance(case, str) and isinstance(limit_w, int) and isinstance(line, str) and isinstance(fields, dict)
    _machine(monkeypatch, case, limit_w)
    env = json.loads(_doctor(capsys, json_out=True))["power_envelope"]
    assert env["gpus"][0]["line"] == line
    assert env["gpus"][0]["rated_w"] == 175.0 and env["gpus"][0]["rated_source"] == "driver max limit"
    assert env["gpus"][0]["enforced_w"] == float(limit_w)
    assert env["gpus"][0]["dynamic_boost_w"] == 25.0  # the 4090 Laptop's 175 W max over its 150 W default
    for key, value in fields.items():
        assert env[key] == value, key
    text = _doctor(capsys, json_out=False)
    assert "Power envelope" in text and line in text


def test_doctor_text_names_the_fix_and_never_pl(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _machine(monkeypatch, "powerd_stopped", 115)
    text = _doctor(capsys, json_out=False)
    assert "GPU 0 fix: sudo systemctl enable --now nvidia-powerd" in text
    assert "not running, unit installed" in text
    assert "another GPU drives the display" in text
    assert re.search(r"GPU 0 Dynamic Boost +up to 25 W \(driver max - default limit\)", text)
    section = text.split("Power envelope", 1)[1].split("Permissions", 1)[0]
    assert "nvidia-smi -pl" not in section


def test_doctor_desktop_gpu_beside_the_laptop_one(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _machine(monkeypatch, "powerd_stopped", 115, [FakeGpu(power_limit_mw=115_000), desktop_gpu()])
    laptop, desk = json.loads(_doctor(capsys, json_out=True))["power_envelope"]["gpus"]
    assert laptop["cause"] == "powerd_stopped"
    assert desk["cause"] == "rated" and desk["rated_source"] == "driver default limit"


def test_doctor_hostile_mode_is_escaped(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    ec = tmp_path / "sys" / "devices" / "platform" / "msi-ec"
    ec.mkdir(parents=True)
    (ec / "shift_mode").write_bytes(b"eco\x1b]0;pwned\x07\n")
    monkeypatch.setenv("RIGSCOPE_SYSFS_ROOT", str(tmp_path / "sys"))
    monkeypatch.setenv("RIGSCOPE_PROC_ROOT", str(tmp_path / "proc"))
    FakeNvml([FakeGpu(power_limit_mw=80_000)]).install(monkeypatch)
    text = _doctor(capsys, json_out=False)
    assert "\x1b" not in text and "\x07" not in text


def test_doctor_simulated_laptop_models_its_envelope(capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor.main(argparse.Namespace(json=True, simulate="rtx4090-laptop")) == 0
    env = json.loads(capsys.readouterr().out)["power_envelope"]
    assert env["simulated"] is True and env["msi_shift_mode"] == "comfort"
    assert env["gpus"][0]["line"] == "capped at 150 W of 175 W: firmware mode Balanced"
