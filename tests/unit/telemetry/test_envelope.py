"""The laptop power envelope read from fake sysfs/procfs trees built from the real layouts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from desktop.telemetry.envelope import EnvelopeReader, power_supplies

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"


def reader(case: str, clock: list[float] | None = None) -> EnvelopeReader:
    root = FIXTURES / case
    times = clock if clock is not None else [0.0]
    return EnvelopeReader(root / "sys", root / "proc", [root / "units"], monotonic=lambda: times[0])


def test_on_battery_msi_vector() -> None:
    env = reader("on_battery").read()
    assert env.on_ac is False
    assert env.battery_pct == 64.0
    assert env.battery_status == "Discharging"
    assert env.msi_shift_mode == "comfort"
    assert env.msi_shift_modes == ("turbo", "eco", "comfort")
    assert env.msi_fan_mode == "auto"
    assert env.msi_fan_modes == ("auto", "silent", "advanced")
    assert env.msi_cooler_boost is False
    assert env.msi_super_battery is False
    assert (env.cpu_fan_pct, env.gpu_fan_pct) == (48.0, 52.0)
    assert env.cpu_package_temp_c == 74.0  # hwmon coretemp "Package id 0", not msi-ec's 71
    assert env.powerd_running is True
    assert env.powerd_installed is True
    assert env.gpu_display == "offload"
    assert env.cpu_package_power_w is None  # one read: no interval yet


def test_powerd_stopped_and_eco() -> None:
    stopped = reader("powerd_stopped").read()
    assert stopped.on_ac is True and stopped.powerd_running is False and stopped.powerd_installed is True
    assert stopped.msi_shift_mode == "turbo"
    eco = reader("msi_ec_eco").read()
    assert eco.msi_shift_mode == "eco" and eco.powerd_running is True and eco.on_ac is True


def test_platform_profile_and_usb_c_charger() -> None:
    env = reader("platform_profile_low_power").read()
    assert env.platform_profile == "low-power"
    assert env.platform_profile_choices == ("low-power", "balanced", "performance")
    assert env.on_ac is True  # a USB-C supply online is AC power
    assert env.battery_pct == 55.0
    assert env.msi_shift_mode is None


def test_machine_with_none_of_these_files() -> None:
    env = reader("none").read()
    assert not env.any_source
    assert env.powerd_running is None  # no PID 1 visible: /proc cannot tell, not "stopped"
    assert env.powerd_installed is False
    assert env.platform_profile is None and env.msi_shift_mode is None and env.on_ac is None


def test_missing_roots_are_not_errors(tmp_path: Path) -> None:
    env = EnvelopeReader(tmp_path / "no-sys", tmp_path / "no-proc", []).read()
    assert not env.any_source and env.powerd_installed is None


def test_rapl_power_from_two_reads_and_wrap(tmp_path: Path) -> None:
    zone = tmp_path / "sys" / "class" / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text("1000000000\n")
    (zone / "energy_uj").write_text("999000000\n")
    clock = [100.0]
    r = EnvelopeReader(tmp_path / "sys", tmp_path / "proc", [], monotonic=lambda: clock[0])
    assert r.read().cpu_package_power_w is None
    clock[0] = 102.0
    (zone / "energy_uj").write_text("89000000\n")  # wrapped: 1 J to the top + 89 J = 90 J in 2 s
    assert r.read().cpu_package_power_w == pytest.approx(45.0)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a 0400 file")
def test_rapl_root_only_is_none(tmp_path: Path) -> None:
    zone = tmp_path / "sys" / "class" / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("5\n")
    (zone / "energy_uj").chmod(0o400 & 0)  # as on Linux >= 5.10 for non-root (CVE-2020-8694)
    clock = [0.0]
    r = EnvelopeReader(tmp_path / "sys", tmp_path / "proc", [], monotonic=lambda: clock[0])
    r.read()
    clock[0] = 1.0
    assert r.read().cpu_package_power_w is None


def test_powerd_scan_on_slow_period(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "1").mkdir(parents=True)
    (proc / "1" / "comm").write_text("systemd\n")
    clock = [0.0]
    r = EnvelopeReader(tmp_path / "sys", proc, [], monotonic=lambda: clock[0], powerd_period_s=10.0)
    assert r.read().powerd_running is False
    (proc / "4242").mkdir()
    (proc / "4242" / "comm").write_text("nvidia-powerd\n")
    clock[0] = 5.0
    assert r.read().powerd_running is False  # not scanned again yet
    clock[0] = 10.0
    assert r.read().powerd_running is True


def test_hostile_and_odd_values_are_data(tmp_path: Path) -> None:
    ec = tmp_path / "sys" / "devices" / "platform" / "msi-ec"
    ec.mkdir(parents=True)
    (ec / "shift_mode").write_bytes(b"unknown (195)\x1b[2J\xff\n")
    (ec / "cooler_boost").write_text("maybe\n")
    (ec / "cpu").mkdir()
    (ec / "cpu" / "realtime_fan_speed").write_text("nan\n")
    env = EnvelopeReader(tmp_path / "sys", tmp_path / "proc", []).read()
    assert env.msi_shift_mode is not None and env.msi_shift_mode.startswith("unknown (195)\x1b")
    assert env.msi_cooler_boost is None
    assert env.cpu_fan_pct is None


def test_power_supply_battery_only_told_by_status(tmp_path: Path) -> None:
    bat = tmp_path / "class" / "power_supply" / "BAT0"
    bat.mkdir(parents=True)
    (bat / "type").write_text("Battery\n")
    (bat / "status").write_text("Discharging\n")
    (bat / "capacity").write_text("31\n")
    assert power_supplies(tmp_path) == (False, 31.0, "Discharging")


def test_default_roots_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    root = FIXTURES / "msi_ec_eco"
    monkeypatch.setenv("RIGSCOPE_SYSFS_ROOT", str(root / "sys"))
    monkeypatch.setenv("RIGSCOPE_PROC_ROOT", str(root / "proc"))
    monkeypatch.setenv("RIGSCOPE_UNIT_DIRS", str(root / "units"))
    env = EnvelopeReader().read()
    assert env.msi_shift_mode == "eco" and env.powerd_running is True and env.powerd_installed is True
