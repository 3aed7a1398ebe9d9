"""The simulated Ada GPUs report what real Ada drivers report (issue 32 item 3, ../shared/realdata).

Every Ada capture gives Max SM clock 3105 MHz (the V/F curve's top); the RTX 4070 Laptop capture a
minimum power limit of 5 W. The model itself runs at the datasheet boost clock, and the laptop's Eco
mode and battery hold it to its base TGP, not to that 5 W.
"""

from __future__ import annotations

from desktop.telemetry.simulated.envelope import SimulatedEnvelope, enforced_limit_w
from desktop.telemetry.simulated.profiles import datasheet_boost_mhz, load_profiles, profile_info

ADA = ("rtx4090-laptop", "rtx4080-laptop", "rtx4070-laptop", "rtx4090")


def test_every_ada_profile_reports_the_v_f_top_as_its_max_clock() -> None:
    profiles = load_profiles()
    for key in ADA:
        profile = profiles[key]
        info = profile_info(profile, 0)
        assert info.sm_clock_max_mhz == 3105.0, key
        assert profile.sm_clock_boost_mhz < 2600.0, key  # what it runs at, far below the reported max
    assert profiles["h100"].sm_clock_max_mhz == profiles["h100"].sm_clock_boost_mhz == 1980.0


def test_laptops_report_a_minimum_limit_of_a_few_watts_and_keep_their_base_tgp() -> None:
    profiles = load_profiles()
    for key in ("rtx4090-laptop", "rtx4080-laptop", "rtx4070-laptop"):
        profile = profiles[key]
        assert profile_info(profile, 0).power_limit_min_w == 5.0, key
        assert profile.base_limit_w > 30.0, key
    laptop = profiles["rtx4090-laptop"]
    assert enforced_limit_w(laptop, SimulatedEnvelope(shift_mode="eco")) == 80.0  # the 4090 Laptop's base TGP
    assert enforced_limit_w(laptop, SimulatedEnvelope(on_ac=False)) == 56.0  # 70 % of it on battery
    assert enforced_limit_w(laptop, SimulatedEnvelope(shift_mode="turbo")) == 175.0


def test_the_datasheet_boost_clock_is_found_by_name() -> None:
    assert datasheet_boost_mhz("NVIDIA GeForce RTX 4090 Laptop GPU (simulated)") == 2040.0
    assert datasheet_boost_mhz("NVIDIA GeForce RTX 4090") == 2520.0
    assert datasheet_boost_mhz("Some Other GPU") is None and datasheet_boost_mhz(None) is None
