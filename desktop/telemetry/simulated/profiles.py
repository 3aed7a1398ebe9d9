"""Simulated GPU models (profiles): the specs of real cards, read from ``resources/gpu_profiles.toml``."""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass

from desktop.paths import resource_path
from desktop.telemetry.model import GpuInfo

DEFAULT_PROFILE = "rtx4090-laptop"
AMBIENT_C = 25.0


@dataclass(frozen=True, slots=True)
class GpuProfile:
    """A simulated GPU model, read from ``resources/gpu_profiles.toml``."""

    key: str
    name: str
    vram_total_mib: float
    power_limit_w: float
    power_limit_min_w: float
    power_limit_max_w: float
    power_limit_settable: bool
    power_idle_w: float
    power_demand_w: float
    #: What the driver reports as the max SM clock: the V/F curve's top on Ada (3105 MHz), never sustained.
    sm_clock_max_mhz: float
    #: The datasheet boost clock: the model's clock at full load below the power limit.
    sm_clock_boost_mhz: float
    sm_clock_idle_mhz: float
    mem_clock_max_mhz: float
    mem_clock_idle_mhz: float
    temp_slowdown_c: float
    temp_shutdown_c: float
    temp_max_operating_c: float
    thermal_r_c_per_w: float
    thermal_tau_s: float
    pcie_gen_max: int
    pcie_width_max: int
    peak_bf16_tflops: float
    has_fan_reading: bool
    is_laptop: bool
    #: NVML GPM answers (Hopper, Blackwell): effective load and DCGM_FI_PROF_* are measured (simulated/gpm.py).
    gpm: bool = False
    #: A laptop's base TGP (W): what Eco mode and battery hold it to; the driver's min limit is a few W.
    power_limit_base_w: float | None = None

    @property
    def base_limit_w(self) -> float:
        """The lowest limit the firmware sets in use (Eco): the base TGP where known, else the min limit."""
        return self.power_limit_base_w if self.power_limit_base_w is not None else self.power_limit_min_w

    def steady_state_temp_c(self, power_w: float, ambient_c: float = AMBIENT_C) -> float:
        return ambient_c + self.thermal_r_c_per_w * power_w


def datasheet_boost_mhz(gpu_name: str | None) -> float | None:
    """The datasheet boost clock of the profile named ``gpu_name`` (" (simulated)" ignored); None if unknown."""
    if not gpu_name:
        return None
    name = gpu_name.removesuffix(" (simulated)").strip().casefold()
    for _key, profile in _shipped_profiles():
        if profile.name.casefold() == name:
            return profile.sm_clock_boost_mhz
    return None


def load_profiles() -> dict[str, GpuProfile]:
    """Every profile in the shipped table, by key (e.g. ``rtx4090-laptop``); a dict of the caller's own."""
    return dict(_shipped_profiles())


@functools.cache
def _shipped_profiles() -> tuple[tuple[str, GpuProfile], ...]:
    """The shipped table, parsed once per process (the window's start asked for it twice); profiles are frozen."""
    with resource_path("gpu_profiles.toml").open("rb") as handle:
        table = tomllib.load(handle)["profiles"]
    return tuple((key, GpuProfile(key=key, **values)) for key, values in table.items())


def parse_profile_list(spec: str | None) -> list[GpuProfile]:
    """``"rtx4090-laptop,rtx4090"`` -> profiles; raises ValueError naming the known keys."""
    profiles = load_profiles()
    keys = [k.strip() for k in (spec or DEFAULT_PROFILE).split(",") if k.strip()] or [DEFAULT_PROFILE]
    unknown = [k for k in keys if k not in profiles]
    if unknown:
        raise ValueError(f"unknown simulated GPU profile {', '.join(unknown)!r}; known: {', '.join(sorted(profiles))}")
    return [profiles[k] for k in keys]


def profile_info(profile: GpuProfile, index: int) -> GpuInfo:
    return GpuInfo(
        index=index,
        uuid=f"GPU-SIM{index:02d}-{profile.key}",
        name=f"{profile.name} (simulated)",
        vram_total_mib=profile.vram_total_mib,
        power_limit_enforced_w=profile.power_limit_w,
        power_limit_default_w=profile.power_limit_w,
        power_limit_min_w=profile.power_limit_min_w,
        power_limit_max_w=profile.power_limit_max_w,
        power_limit_settable=profile.power_limit_settable,
        sm_clock_max_mhz=profile.sm_clock_max_mhz,
        mem_clock_max_mhz=profile.mem_clock_max_mhz,
        temp_slowdown_c=profile.temp_slowdown_c,
        temp_shutdown_c=profile.temp_shutdown_c,
        temp_max_operating_c=profile.temp_max_operating_c,
        # The real cards modelled give T.Limit offsets; the values above are their absolute form.
        temp_thresholds_relative=True,
        pcie_gen_max=profile.pcie_gen_max,
        pcie_width_max=profile.pcie_width_max,
        pci_bus_id=f"00000000:{index + 1:02X}:00.0",
        driver_version="simulated",
        cuda_version=None,
        vbios_version=None,
        persistence_mode=None,
        is_laptop=profile.is_laptop,
        gpm_supported=profile.gpm,
        simulated=True,
    )
