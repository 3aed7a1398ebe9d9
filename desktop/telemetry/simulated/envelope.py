"""The simulated laptop's power envelope: AC or battery, nvidia-powerd, and the EC's firmware modes.

It follows the MSI Vector 16 HX as msi-ec shows it (shift modes turbo / eco / comfort: msi-ec.c
CONF_G2_10) and the 4090 Laptop's limits (default 150 W, max 175 W with Dynamic Boost, base TGP
80 W; NVML's min limit is 5 W): Extreme Performance (turbo) with nvidia-powerd on AC is the max
limit, Balanced (comfort) the default one, Eco the base TGP; without nvidia-powerd Dynamic Boost is off
(at most the default limit), and on battery the firmware holds the GPU at 70 % of its base TGP
(a 4090 Laptop at 56 W; reports of 55 W: open-gpu-kernel-modules #1295). The mode also sets the
fan curve: Extreme Performance runs the fans harder (the cooling's thermal resistance 15 % lower),
Eco keeps them quiet (10 % higher).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from advisor.envelope import PowerEnvelope
from desktop.telemetry.simulated.profiles import GpuProfile

SHIFT_MODES: Final = ("turbo", "eco", "comfort")
DEFAULT_MODE: Final = "comfort"
_BATTERY_SHARE_OF_MIN: Final = 0.7
#: How each mode's fan curve scales the profile's thermal resistance (°C per W).
_FAN_SCALE: Final = {"turbo": 0.85, "comfort": 1.0, "eco": 1.1}


@dataclass(frozen=True, slots=True)
class SimulatedEnvelope:
    """What the simulated laptop's owner set: the charger, the service, the firmware mode."""

    on_ac: bool = True
    powerd_running: bool = True
    shift_mode: str = DEFAULT_MODE
    battery_pct: float = 100.0

    def with_changes(self, *, on_ac: bool | None = None, powerd_running: bool | None = None,
                     shift_mode: str | None = None, battery_pct: float | None = None) -> SimulatedEnvelope:
        if shift_mode is not None and shift_mode not in SHIFT_MODES:
            raise ValueError(f"unknown firmware mode {shift_mode!r}; the simulated laptop has {', '.join(SHIFT_MODES)}")
        return replace(self, on_ac=self.on_ac if on_ac is None else on_ac,
                       powerd_running=self.powerd_running if powerd_running is None else powerd_running,
                       shift_mode=self.shift_mode if shift_mode is None else shift_mode,
                       battery_pct=self.battery_pct if battery_pct is None else battery_pct)

    def power_envelope(self) -> PowerEnvelope:
        return PowerEnvelope(
            on_ac=self.on_ac, battery_pct=self.battery_pct,
            battery_status=("Full" if self.battery_pct >= 100 else "Charging") if self.on_ac else "Discharging",
            msi_shift_mode=self.shift_mode, msi_shift_modes=SHIFT_MODES, msi_shift_mode_writable=True,
            msi_fan_mode="auto", msi_fan_modes=("auto", "silent", "advanced"), msi_cooler_boost=False,
            msi_super_battery=False, powerd_running=self.powerd_running, powerd_installed=True,
            gpu_display="offload", simulated=True)


def enforced_limit_w(profile: GpuProfile, state: SimulatedEnvelope) -> float:
    """The power limit the simulated firmware enforces on ``profile`` in ``state`` (laptops only)."""
    if not profile.is_laptop:
        return profile.power_limit_w
    by_mode = {"turbo": profile.power_limit_max_w, "comfort": profile.power_limit_w,
               "eco": profile.base_limit_w}
    limit = by_mode.get(state.shift_mode, profile.power_limit_w)
    if not state.powerd_running:
        limit = min(limit, profile.power_limit_w)
    if not state.on_ac:
        limit = min(limit, round(profile.base_limit_w * _BATTERY_SHARE_OF_MIN))
    return float(limit)


def thermal_r_c_per_w(profile: GpuProfile, state: SimulatedEnvelope) -> float:
    """The cooling's thermal resistance in ``state``'s firmware mode (laptops only)."""
    if not profile.is_laptop:
        return profile.thermal_r_c_per_w
    return profile.thermal_r_c_per_w * _FAN_SCALE.get(state.shift_mode, 1.0)
