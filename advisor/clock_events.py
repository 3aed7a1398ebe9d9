"""NVML clock-event ("throttle") reasons: the one place that names their bits, labels and families.

Pure (no NVML, no Qt): the telemetry model re-exports it for the desktop side, the advisor
and the stress verdict read the same names, so a raw mask is decoded here and nowhere else.
"""

from __future__ import annotations

import enum
from typing import Final


class ClockEventReason(enum.IntFlag):
    """NVML clock-event ("throttle") reasons; the raw mask is stored, decoded here only."""

    NONE = 0
    GPU_IDLE = 0x1
    APPLICATIONS_CLOCKS_SETTING = 0x2
    SW_POWER_CAP = 0x4
    HW_SLOWDOWN = 0x8
    SYNC_BOOST = 0x10
    SW_THERMAL_SLOWDOWN = 0x20
    HW_THERMAL_SLOWDOWN = 0x40
    HW_POWER_BRAKE_SLOWDOWN = 0x80
    DISPLAY_CLOCK_SETTING = 0x100
    BOARD_LIMIT = 0x200
    RELIABILITY = 0x400

    @classmethod
    def decode(cls, mask: int | None) -> list[ClockEventReason]:
        """The single reasons set in ``mask`` (unknown bits are ignored)."""
        if not mask:
            return []
        return [reason for reason in SINGLE_REASONS if mask & reason]

    @property
    def label(self) -> str:
        """A short human label, e.g. "HW thermal"."""
        return _REASON_LABELS.get(self, self.name or hex(int(self)))

    @property
    def phrase(self) -> str:
        """The reason inside a sentence, e.g. "HW thermal slowdown" ("Throttled after 3 min: ...")."""
        return _REASON_PHRASES.get(self, self.label)

    @property
    def family(self) -> str | None:
        """The coarse family of a throttling reason: "thermal", "power" or "hw_slowdown"; None otherwise."""
        if self in THERMAL_REASONS:
            return "thermal"
        if self in POWER_REASONS:
            return "power"
        if self == ClockEventReason.HW_SLOWDOWN:
            return "hw_slowdown"
        return None


#: Every single-bit reason, in bit order (the order ``decode`` lists them and the history stores them).
SINGLE_REASONS: Final[tuple[ClockEventReason, ...]] = tuple(
    r for r in ClockEventReason if r.value and r.value & (r.value - 1) == 0)

_REASON_LABELS: Final[dict[ClockEventReason, str]] = {
    ClockEventReason.GPU_IDLE: "GPU idle",
    ClockEventReason.APPLICATIONS_CLOCKS_SETTING: "App clocks",
    ClockEventReason.SW_POWER_CAP: "Power cap",
    ClockEventReason.HW_SLOWDOWN: "HW slowdown",
    ClockEventReason.SYNC_BOOST: "Sync boost",
    ClockEventReason.SW_THERMAL_SLOWDOWN: "SW thermal",
    ClockEventReason.HW_THERMAL_SLOWDOWN: "HW thermal",
    ClockEventReason.HW_POWER_BRAKE_SLOWDOWN: "Power brake",
    ClockEventReason.DISPLAY_CLOCK_SETTING: "Display clock",
    ClockEventReason.BOARD_LIMIT: "Board limit",
    ClockEventReason.RELIABILITY: "Reliability",
}

_REASON_PHRASES: Final[dict[ClockEventReason, str]] = {
    ClockEventReason.HW_THERMAL_SLOWDOWN: "HW thermal slowdown",
    ClockEventReason.SW_THERMAL_SLOWDOWN: "SW thermal slowdown",
    ClockEventReason.SW_POWER_CAP: "power cap",
    ClockEventReason.HW_POWER_BRAKE_SLOWDOWN: "power brake",
    ClockEventReason.HW_SLOWDOWN: "HW slowdown",
}

#: Reasons that mean "the GPU is being slowed against the user's will" (not idle/app/display).
THROTTLE_REASONS: Final = (
    ClockEventReason.SW_POWER_CAP
    | ClockEventReason.HW_SLOWDOWN
    | ClockEventReason.SW_THERMAL_SLOWDOWN
    | ClockEventReason.HW_THERMAL_SLOWDOWN
    | ClockEventReason.HW_POWER_BRAKE_SLOWDOWN
)
THERMAL_REASONS: Final = ClockEventReason.SW_THERMAL_SLOWDOWN | ClockEventReason.HW_THERMAL_SLOWDOWN
POWER_REASONS: Final = ClockEventReason.SW_POWER_CAP | ClockEventReason.HW_POWER_BRAKE_SLOWDOWN

#: The per-cause time counters (GpuSample / history metric names), each with the reason bit it counts.
CLOCK_EVENT_COUNTERS: Final[tuple[tuple[str, ClockEventReason], ...]] = (
    ("clock_event_sw_power_cap_s", ClockEventReason.SW_POWER_CAP),
    ("clock_event_sw_thermal_s", ClockEventReason.SW_THERMAL_SLOWDOWN),
    ("clock_event_hw_thermal_s", ClockEventReason.HW_THERMAL_SLOWDOWN),
    ("clock_event_hw_power_brake_s", ClockEventReason.HW_POWER_BRAKE_SLOWDOWN),
)


def bits(reasons: ClockEventReason) -> tuple[int, ...]:
    """The single bit values in ``reasons``, in bit order: ``bits(THERMAL_REASONS) == (0x20, 0x40)``."""
    return tuple(int(r) for r in ClockEventReason.decode(int(reasons)))
