"""The one line that says why a laptop GPU is held below its rated power."""

from __future__ import annotations

from advisor.envelope import (
    POWERD_COMMAND,
    GpuLimits,
    PowerEnvelope,
    envelope_changes,
    explain_cap,
    rated_power,
)

# An RTX 4090 Laptop as NVML gives it (open-gpu-kernel-modules #483: max 175 W, default 150 W).
LAPTOP = dict(name="NVIDIA GeForce RTX 4090 Laptop GPU", default_w=150.0, min_w=80.0, max_w=175.0, is_laptop=True)


def limits(enforced: float | None, **kw: object) -> GpuLimits:
    return GpuLimits(enforced_w=enforced, **{**LAPTOP, **kw})  # type: ignore[arg-type]


def test_on_battery() -> None:
    out = explain_cap(PowerEnvelope(on_ac=False, battery_pct=64, powerd_running=True), limits(55.0))
    assert out.line == "capped at 55 W of 175 W: on battery"
    assert out.cause == "on_battery" and out.capped and out.rated_source == "driver max limit"


def test_powerd_stopped() -> None:
    out = explain_cap(PowerEnvelope(on_ac=True, powerd_running=False, msi_shift_mode="turbo"), limits(115.0))
    assert out.line == "capped at 115 W of 175 W: nvidia-powerd is not running, so Dynamic Boost is off"
    assert out.action == POWERD_COMMAND


def test_firmware_eco_wins_over_powerd() -> None:
    env = PowerEnvelope(on_ac=True, powerd_running=False, msi_shift_mode="eco", msi_shift_modes=("turbo", "eco"))
    out = explain_cap(env, limits(80.0))
    assert out.line == "capped at 80 W of 175 W: firmware mode Eco"
    assert out.action is not None and "echo turbo" in out.action and "-pl" not in out.action


def test_platform_profile_low_power() -> None:
    out = explain_cap(PowerEnvelope(on_ac=True, platform_profile="low-power"), limits(60.0))
    assert out.line == "capped at 60 W of 175 W: firmware mode Low power"


def test_balanced_mode_is_named_when_nothing_else_explains() -> None:
    out = explain_cap(PowerEnvelope(on_ac=True, powerd_running=True, msi_shift_mode="comfort"), limits(150.0))
    assert out.line == "capped at 150 W of 175 W: firmware mode Balanced"


def test_boost_idle_with_powerd_running_in_turbo() -> None:
    out = explain_cap(PowerEnvelope(on_ac=True, powerd_running=True, msi_shift_mode="turbo"), limits(150.0))
    assert out.cause == "boost_idle"


def test_at_rated_power() -> None:
    out = explain_cap(PowerEnvelope(on_ac=True, powerd_running=True), limits(175.0))
    assert out.line == "at its rated power (175 W)" and not out.capped


def test_unknown_cause_is_not_guessed() -> None:
    out = explain_cap(PowerEnvelope(), limits(115.0))
    assert out.line == "capped at 115 W of 175 W: the cause is not readable here"


def test_datasheet_when_driver_gives_no_max() -> None:
    out = explain_cap(PowerEnvelope(on_ac=False), limits(55.0, max_w=None, default_w=None,
                                                        name="NVIDIA GeForce RTX 4070 Laptop GPU"))
    assert out.line == "capped at 55 W of 140 W: on battery"
    assert out.rated_source is not None and out.rated_source.startswith("datasheet (RTX 4070 Laptop: 35-115 W")


def test_desktop_card_is_rated_at_its_default() -> None:
    card = GpuLimits("NVIDIA GeForce RTX 4090", enforced_w=450.0, default_w=450.0, max_w=600.0)
    assert rated_power(card) == (450.0, "driver default limit")
    assert explain_cap(None, card).line == "at its rated power (450 W)"
    # powerd means nothing off a laptop
    assert explain_cap(PowerEnvelope(powerd_running=False), GpuLimits("X", 300.0, 450.0)).cause == "unknown"


def test_no_limit() -> None:
    assert explain_cap(PowerEnvelope(), limits(None)).line == "power limit not readable"


def test_changes() -> None:
    a = PowerEnvelope(on_ac=True, powerd_running=True, msi_shift_mode="turbo")
    b = PowerEnvelope(on_ac=False, powerd_running=False, msi_shift_mode="eco")
    assert [k for k, _ in envelope_changes(a, b)] == ["ac", "powerd", "mode"]
    assert envelope_changes(None, b) == []
    assert envelope_changes(a, PowerEnvelope()) == []  # a source gone is not a change


def test_power_limit_note_over_a_span() -> None:
    from advisor.envelope import power_limit_note

    battery = "capped at 56 W of 175 W: on battery"
    rated = "at its rated power (175 W)"
    # In force since before the run, then unplugged 8 minutes in, for the remaining 32.
    lines = [(0.0, rated), (1480.0, battery)]
    assert power_limit_note(lines, 1000.0, 3400.0) == (
        "Power limit: capped at 56 W of 175 W: on battery (32 minutes), at its rated power (175 W) (8 minutes)")
    assert power_limit_note([(0.0, rated)], 1000.0, 3400.0) == "Power limit: at its rated power (175 W) (the whole run)"
    assert power_limit_note([(5000.0, rated)], 1000.0, 3400.0) is None
    assert power_limit_note([], 1000.0, 3400.0) is None


def test_dynamic_boost_headroom() -> None:
    from advisor.envelope import dynamic_boost_w

    assert dynamic_boost_w(limits(150.0)) == (25.0, "driver max - default limit")
    assert dynamic_boost_w(limits(115.0, name="NVIDIA GeForce RTX 4070 Laptop GPU", max_w=None, default_w=None)) == (
        25.0, "datasheet (RTX 4070 Laptop)")
    assert dynamic_boost_w(limits(80.0, max_w=80.0, default_w=80.0)) == (0.0, "driver max - default limit")
    assert dynamic_boost_w(GpuLimits("NVIDIA H200", 700.0, 700.0, max_w=700.0)) == (None, None)
