"""A laptop's power envelope and the one line that says why its GPU is held below its rated power.

Pure: the machine side (desktop/telemetry/envelope.py) reads sysfs, /proc and the driver into a
``PowerEnvelope``; ``explain_cap`` judges it against the GPU's power limits. On laptops the
sustained speed is set less by the GPU than by this envelope: AC or battery, Dynamic Boost
(nvidia-powerd moves ~25 W from CPU to GPU, only on AC and under load) and the firmware's mode
(MSI's msi-ec ``shift_mode``, the ACPI ``platform_profile`` elsewhere). Nothing here raises on a
missing value: every source is optional, and an unknown one is never given as the cause.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from advisor.wording import duration_text

#: A limit this close to the rated power counts as the rated power (drivers round to 1 W; nvidia-smi
#: shows e.g. 174.96 W for a 175 W limit).
RATED_TOLERANCE_W: Final = 2.0

#: msi-ec ``shift_mode`` values (msi-ec.c SM_*_NAME) as MSI Center names them (msi-ec README:
#: eco = power saving, comfort = balanced, sport = full clocks, turbo = over-clock).
MSI_SHIFT_MODE_NAMES: Final[dict[str, str]] = {
    "eco": "Eco",
    "comfort": "Balanced",
    "sport": "Sport",
    "turbo": "Extreme Performance",
}
#: ACPI platform_profile choices (kernel ABI sysfs-platform_profile) as people say them.
PLATFORM_PROFILE_NAMES: Final[dict[str, str]] = {
    "low-power": "Low power",
    "cool": "Cool",
    "quiet": "Quiet",
    "balanced": "Balanced",
    "balanced-performance": "Balanced performance",
    "performance": "Performance",
    "custom": "Custom",
}
#: Modes that cut the GPU's power on purpose (a cause even where powerd runs).
_SAVING_MODES: Final = frozenset({"eco", "low-power", "cool", "quiet"})
#: Modes that give the GPU its full power.
_FULL_MODES: Final = frozenset({"turbo", "sport", "performance"})

Cause = Literal["on_battery", "firmware_saving", "powerd_stopped", "firmware_mode", "boost_idle",
                "unknown", "rated", "no_limit"]


@dataclass(frozen=True, slots=True)
class PowerEnvelope:
    """What the machine says about its power envelope now; None = that source is not readable here."""

    #: True on mains power, False on battery (power_supply Mains/USB ``online``, or the driver's power source).
    on_ac: bool | None = None
    battery_pct: float | None = None
    #: power_supply ``status`` of the battery: Charging, Discharging, Not charging, Full, Unknown.
    battery_status: str | None = None
    #: /sys/firmware/acpi/platform_profile and its choices.
    platform_profile: str | None = None
    platform_profile_choices: tuple[str, ...] = ()
    platform_profile_writable: bool = False
    #: msi-ec (/sys/devices/platform/msi-ec/): shift_mode, fan_mode, cooler_boost, super_battery.
    msi_shift_mode: str | None = None
    msi_shift_modes: tuple[str, ...] = ()
    msi_shift_mode_writable: bool = False
    msi_fan_mode: str | None = None
    msi_fan_modes: tuple[str, ...] = ()
    msi_cooler_boost: bool | None = None
    msi_super_battery: bool | None = None
    #: msi-ec cpu/ and gpu/ realtime_fan_speed (percent, the EC's scale: 0-100 or 0-150).
    cpu_fan_pct: float | None = None
    gpu_fan_pct: float | None = None
    #: CPU package temperature (hwmon coretemp "Package id 0" / k10temp "Tctl", else msi-ec's cpu temperature).
    cpu_package_temp_c: float | None = None
    #: CPU package power from RAPL (powercap intel-rapl energy_uj between two reads); None: one read or root only.
    cpu_package_power_w: float | None = None
    #: Whether an nvidia-powerd process runs (None: /proc cannot tell, e.g. mounted hidepid).
    powerd_running: bool | None = None
    #: Whether the nvidia-powerd systemd unit file is installed (None: not looked for).
    powerd_installed: bool | None = None
    #: "display": the NVIDIA GPU drives the boot display (dGPU / MUX discrete mode); "offload": another
    #: GPU does and this one renders by PRIME offload (hybrid); None: not readable.
    gpu_display: str | None = None
    #: True for a simulated laptop (its envelope is modelled, not read).
    simulated: bool = False

    @property
    def firmware_mode(self) -> str | None:
        """The firmware's mode as raw value (msi-ec's shift_mode first: it is what MSI Center sets)."""
        if self.msi_shift_mode is not None:
            return self.msi_shift_mode
        return self.platform_profile

    @property
    def any_source(self) -> bool:
        """Whether anything at all was read (a desktop or a container reads nothing)."""
        return any(v is not None for v in (self.on_ac, self.battery_pct, self.platform_profile, self.msi_shift_mode,
                                           self.cpu_package_temp_c, self.powerd_running, self.gpu_display))


def firmware_mode_name(envelope: PowerEnvelope) -> str | None:
    """"Eco", "Extreme Performance", "Balanced": the firmware mode in the vendor's words, or None."""
    if envelope.msi_shift_mode is not None:
        raw = envelope.msi_shift_mode
        return MSI_SHIFT_MODE_NAMES.get(raw, raw)
    if envelope.platform_profile is not None:
        raw = envelope.platform_profile
        return PLATFORM_PROFILE_NAMES.get(raw, raw)
    return None


@dataclass(frozen=True, slots=True)
class RatedPower:
    """A laptop GPU's datasheet power range (REFERENCE.md's GPU table)."""

    gpu: str
    tgp_min_w: float
    tgp_max_w: float
    #: Total graphics power with Dynamic Boost at the top of its range.
    boost_max_w: float

    def text(self) -> str:
        return (f"{self.gpu}: {self.tgp_min_w:.0f}-{self.tgp_max_w:.0f} W, "
                f"up to {self.boost_max_w:.0f} W with Dynamic Boost")


#: Known laptop GPUs, by the words in NVML's name (REFERENCE.md; data-check.eu, hmc-tech.com).
LAPTOP_DATASHEETS: Final[tuple[tuple[str, RatedPower], ...]] = (
    ("rtx 4090 laptop", RatedPower("RTX 4090 Laptop", 80.0, 150.0, 175.0)),
    ("rtx 4080 laptop", RatedPower("RTX 4080 Laptop", 60.0, 150.0, 175.0)),
    ("rtx 4070 laptop", RatedPower("RTX 4070 Laptop", 35.0, 115.0, 140.0)),
)


def datasheet_for(gpu_name: str) -> RatedPower | None:
    name = " ".join(gpu_name.lower().split())
    for key, rated in LAPTOP_DATASHEETS:
        if key in name:
            return rated
    return None


@dataclass(frozen=True, slots=True)
class GpuLimits:
    """The GPU's power limits as the driver gives them (GpuInfo's power_limit_* fields), watts."""

    name: str
    enforced_w: float | None
    default_w: float | None = None
    min_w: float | None = None
    max_w: float | None = None
    is_laptop: bool = False


@dataclass(frozen=True, slots=True)
class CapExplanation:
    """Why the GPU's limit is where it is: one line, its cause, and the numbers behind it."""

    line: str
    cause: Cause
    enforced_w: float | None
    rated_w: float | None
    #: Where the rated power comes from: "driver max limit", "driver default limit" or "datasheet (...)".
    rated_source: str | None
    capped: bool
    #: What to do about it (a command or a setting), None where nothing is to be done.
    action: str | None = None


POWERD_COMMAND: Final = "sudo systemctl enable --now nvidia-powerd"


def rated_power(limits: GpuLimits) -> tuple[float | None, str | None]:
    """The GPU's rated power and where it comes from.

    On a laptop the driver's max limit is the GPU's own figure (a 4090 Laptop says 175 W: TGP plus
    Dynamic Boost); where the driver gives none, a known laptop GPU's datasheet top (with Dynamic
    Boost); else the default limit. Elsewhere the default limit is the rated power (a desktop
    card's max is overclocking headroom).
    """
    if not limits.is_laptop:
        # A desktop or data-centre card is rated at its default limit; its max is overclocking headroom.
        if limits.default_w is not None and limits.default_w > 0:
            return limits.default_w, "driver default limit"
        return (limits.max_w, "driver max limit") if limits.max_w else (None, None)
    sheet = datasheet_for(limits.name)
    if limits.max_w is not None and limits.max_w > 0:
        return limits.max_w, "driver max limit"
    if sheet is not None:
        return sheet.boost_max_w, f"datasheet ({sheet.text()})"
    if limits.default_w is not None and limits.default_w > 0:
        return limits.default_w, "driver default limit"
    return None, None


def explain_cap(envelope: PowerEnvelope | None, limits: GpuLimits) -> CapExplanation:
    """The ONE explanation line: "capped at 55 W of 175 W: on battery", or "at its rated power (175 W)".

    Causes in order of certainty: on battery (Dynamic Boost is off and the firmware cuts TGP), a
    power-saving firmware mode, nvidia-powerd not running (laptops only: no Dynamic Boost), any
    other non-performance firmware mode; with powerd running and the limit at or above its
    default, Dynamic Boost simply has not raised it (it does so only under GPU load).
    """
    env = envelope if envelope is not None else PowerEnvelope()
    enforced = limits.enforced_w
    rated, source = rated_power(limits)
    if enforced is None:
        return CapExplanation("power limit not readable", "no_limit", None, rated, source, False)
    if rated is None or enforced >= rated - RATED_TOLERANCE_W:
        line = f"at its rated power ({enforced:.0f} W)" if rated is not None else f"limit {enforced:.0f} W"
        return CapExplanation(line, "rated", enforced, rated, source, False)
    head = f"capped at {enforced:.0f} W of {rated:.0f} W"
    mode = env.firmware_mode
    mode_name = firmware_mode_name(env)
    cause: Cause
    action: str | None
    if env.on_ac is False:
        cause, why = "on_battery", CAUSE_PHRASES["on_battery"]
        action = "plug in the charger: on battery the firmware cuts the GPU's power and Dynamic Boost is off"
    elif mode in _SAVING_MODES or env.msi_super_battery:
        cause, why = "firmware_saving", f"firmware mode {mode_name or 'Super Battery'}"
        action = _mode_action(env)
    elif limits.is_laptop and env.powerd_running is False:
        cause, why = "powerd_stopped", CAUSE_PHRASES["powerd_stopped"]
        action = POWERD_COMMAND
    elif mode is not None and mode not in _FULL_MODES:
        cause, why = "firmware_mode", f"firmware mode {mode_name}"
        action = _mode_action(env)
    elif (limits.is_laptop and env.powerd_running and limits.default_w is not None
          and enforced >= limits.default_w - RATED_TOLERANCE_W):
        cause, why = "boost_idle", CAUSE_PHRASES["boost_idle"]
        action = None
    else:
        cause, why = "unknown", CAUSE_PHRASES["unknown"]
        action = None
    return CapExplanation(f"{head}: {why}", cause, enforced, rated, source, True, action)


#: The fixed reasons of ``explain_cap``'s line, by cause (the firmware ones name the mode after this prefix).
CAUSE_PHRASES: Final[dict[Cause, str]] = {
    "on_battery": "on battery",
    "powerd_stopped": "nvidia-powerd is not running, so Dynamic Boost is off",
    "boost_idle": "Dynamic Boost adds power only under GPU load",
    "unknown": "the cause is not readable here",
}
_MODE_PREFIX: Final = "firmware mode "
SAVING_MODE_NAMES: Final = frozenset({"Eco", "Low power", "Cool", "Quiet", "Super Battery"})


def cause_from_line(line: str) -> Cause | None:
    """The cause behind a stored line (history events keep the line people read, not a code)."""
    if line.startswith("at its rated power") or line.startswith("limit "):
        return "rated"
    if line == "power limit not readable":
        return "no_limit"
    _head, sep, why = line.partition(": ")
    if not sep:
        return None
    for cause, phrase in CAUSE_PHRASES.items():
        if why == phrase:
            return cause
    if why.startswith(_MODE_PREFIX):
        return "firmware_saving" if why[len(_MODE_PREFIX):] in SAVING_MODE_NAMES else "firmware_mode"
    return None


def _mode_action(env: PowerEnvelope) -> str:
    if env.msi_shift_mode is not None:
        best = next((m for m in ("turbo", "sport") if m in env.msi_shift_modes), "turbo")
        return (f"switch MSI Center to {MSI_SHIFT_MODE_NAMES[best]} "
                f"(Linux, msi-ec: echo {best} | sudo tee /sys/devices/platform/msi-ec/shift_mode)")
    if env.platform_profile is not None:
        return "echo performance | sudo tee /sys/firmware/acpi/platform_profile"
    return "switch the firmware to its performance mode"


def envelope_changes(before: PowerEnvelope | None, after: PowerEnvelope) -> list[tuple[str, str]]:
    """What changed between two readings, as (event kind suffix, message): "ac", "powerd", "mode", ...

    Unknown on either side is not a change (a source that comes and goes is not an event).
    """
    if before is None:
        return []
    out: list[tuple[str, str]] = []
    if before.on_ac is not None and after.on_ac is not None and before.on_ac != after.on_ac:
        out.append(("ac", "on AC power" if after.on_ac else "on battery"))
    if (before.powerd_running is not None and after.powerd_running is not None
            and before.powerd_running != after.powerd_running):
        out.append(("powerd", "nvidia-powerd started" if after.powerd_running else "nvidia-powerd stopped"))
    if None not in (before.firmware_mode, after.firmware_mode) and before.firmware_mode != after.firmware_mode:
        out.append(("mode", f"firmware mode {firmware_mode_name(after)}"))
    if (before.msi_cooler_boost is not None and after.msi_cooler_boost is not None
            and before.msi_cooler_boost != after.msi_cooler_boost):
        out.append(("cooler_boost", "Cooler Boost on" if after.msi_cooler_boost else "Cooler Boost off"))
    return out


def envelope_summary(envelope: PowerEnvelope | None, cap: CapExplanation) -> dict[str, object]:
    """What a stress run or job keeps of the envelope it ran in (JSON-ready): the line, its cause and
    the sources that decide it."""
    env = envelope if envelope is not None else PowerEnvelope()
    return {"power_limit_line": cap.line, "power_limit_cause": cap.cause, "power_rated_w": cap.rated_w,
            "power_rated_source": cap.rated_source, "on_ac": env.on_ac, "battery_pct": env.battery_pct,
            "firmware_mode": env.firmware_mode, "powerd_running": env.powerd_running,
            "cooler_boost": env.msi_cooler_boost, "cpu_package_temp_c": env.cpu_package_temp_c}


def envelope_state_text(envelope: PowerEnvelope) -> str:
    """"on AC; firmware mode Extreme Performance; nvidia-powerd running": the state an "envelope.state" event keeps."""
    parts = []
    if envelope.on_ac is not None:
        parts.append("on AC power" if envelope.on_ac else "on battery")
    if (name := firmware_mode_name(envelope)) is not None:
        parts.append(f"firmware mode {name}")
    if envelope.powerd_running is not None:
        parts.append("nvidia-powerd " + ("running" if envelope.powerd_running else "not running"))
    if envelope.msi_cooler_boost:
        parts.append("Cooler Boost on")
    return "; ".join(parts)


def power_limit_note(lines: Sequence[tuple[float, str]], start_s: float, end_s: float, *,
                     what: str = "run") -> str | None:
    """A job's or run's power limit in one note: "Power limit: capped at 56 W of 175 W: on battery (32 minutes),
    at its rated power (175 W) (8 minutes)", longest first; "(the whole run)" for one line.

    ``lines``: (time, line) of the GPU's envelope.limit events, time order, the one in force at ``start_s``
    included (its time may be earlier). None when no line covers the span.
    """
    if end_s <= start_s:
        return None
    held: dict[str, float] = {}
    for i, (time_s, line) in enumerate(lines):
        until = lines[i + 1][0] if i + 1 < len(lines) else end_s
        seconds = min(until, end_s) - max(time_s, start_s)
        if seconds > 0:
            held[line] = held.get(line, 0.0) + seconds
    if not held:
        return None
    if len(held) == 1:
        return f"Power limit: {next(iter(held))} (the whole {what})"
    ranked = sorted(held.items(), key=lambda item: -item[1])
    return "Power limit: " + ", ".join(f"{line} ({duration_text(seconds)})" for line, seconds in ranked)


def dynamic_boost_w(limits: GpuLimits) -> tuple[float | None, str | None]:
    """How many watts Dynamic Boost can add to this GPU, and where that comes from; (None, None) off laptops.

    The driver's max limit above its default is the boost a laptop's firmware allows (a 4090 Laptop: 175 - 150
    = 25 W); without those, the datasheet's boost range; 0 where the max equals the default (no boost).
    """
    if not limits.is_laptop:
        return None, None
    if limits.max_w is not None and limits.default_w is not None:
        return max(0.0, limits.max_w - limits.default_w), "driver max - default limit"
    sheet = datasheet_for(limits.name)
    if sheet is not None:
        return sheet.boost_max_w - sheet.tgp_max_w, f"datasheet ({sheet.gpu})"
    return None, None
