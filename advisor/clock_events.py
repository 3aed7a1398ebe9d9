"""NVML clock-event ("throttle") reasons: the one table of their bits, labels, families, counters and lanes.

Pure (no NVML, no Qt): the telemetry model re-exports it for the desktop side, the advisor
and the stress verdict read the same names, so a raw mask is decoded here and nowhere else, and
what a throttle cause is called, counted, coloured and exported as is one row of ``REASON_TABLE``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal


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
        row = REASON_ROWS.get(self)
        return row.family if row is not None else None


#: Every single-bit reason, in bit order (the order ``decode`` lists them and the history stores them).
SINGLE_REASONS: Final[tuple[ClockEventReason, ...]] = tuple(
    r for r in ClockEventReason if r.value and r.value & (r.value - 1) == 0)

#: A throttle cause as the verdict names it (a clock-event reason of its own).
Cause = Literal["hw_thermal", "sw_thermal", "power_cap", "power_brake", "hw_slowdown"]
#: The coarse family of a throttle cause.
ReasonFamily = Literal["thermal", "power", "hw_slowdown"]
#: Okabe-Ito colour names (desktop/ui/theme.py holds their values).
LaneColour = Literal["orange", "sky", "green", "yellow", "blue", "vermillion", "purple"]


@dataclass(frozen=True, slots=True)
class CauseCounter:
    """NVML's counter of the time under one cause: the GpuSample field and history column it fills, and the
    NVML field ids it is read from (desktop/telemetry/nvml/counters.py says why there are two sets)."""

    #: GpuSample field, history metric and gpu_samples column: seconds under the cause since the previous sample.
    field: str
    title: str  # the metric's label, e.g. "Time power-capped"
    help: str
    #: The field id in each id set: (R575: nvidia-ml-py 12.575.51, R580.82 and later); equal where it never moved.
    field_ids: tuple[int, int]
    #: An id from before R575 that counts the same, asked only where neither set answers (SW thermal's 75).
    older_field_id: int | None = None


@dataclass(frozen=True, slots=True)
class ReasonRow:
    """Everything Rigscope says and does about one clock-event reason: one row per bit.

    A throttle cause (``cause`` set) also has a family, a lane on the dashboard and a place in the verdict;
    one NVML counts time under has a ``counter``. A new cause is a row here (plus, with a counter, its
    GpuSample field and the history's schema step that adds its column).
    """

    reason: ClockEventReason
    label: str  # short, for lists and legends: "HW thermal"
    short: str  # a few letters for `rigscope sample`'s one-line form: "hwtherm"
    #: nvidia-smi's name for it (after ``clocks_event_reasons.`` / ``clocks_throttle_reasons.``); None: it has none.
    nvsmi: str | None = None
    phrase: str | None = None  # inside a sentence ("Throttled after 3 min: HW thermal slowdown")
    cause: Cause | None = None
    family: ReasonFamily | None = None
    #: Throttling whenever it appears under load (the SW power cap alone is not: a GEMM at its power limit
    #: is the normal state of a datacenter GPU).
    slowdown: bool = False
    colour: LaneColour | None = None  # its dashboard lane's colour
    lane: int | None = None  # its dashboard lane, from the top: power causes, then thermal, then the rest
    verdict_rank: int | None = None  # where the verdict reports it
    counter: CauseCounter | None = None


#: The one table of clock-event reasons, in bit order: decoding, counters, verdicts, lanes, `rigscope sample`,
#: nvidia-smi imports, the exporter and the history all read it.
REASON_TABLE: Final[tuple[ReasonRow, ...]] = (
    ReasonRow(ClockEventReason.GPU_IDLE, "GPU idle", "idle", "gpu_idle"),
    ReasonRow(ClockEventReason.APPLICATIONS_CLOCKS_SETTING, "App clocks", "appclk", "applications_clocks_setting"),
    ReasonRow(ClockEventReason.SW_POWER_CAP, "Power cap", "pwrcap", "sw_power_cap", "power cap", "power_cap",
              "power", colour="sky", lane=0, verdict_rank=2,
              counter=CauseCounter("clock_event_sw_power_cap_s", "Time power-capped",
                                   "Seconds under the SW power cap since the previous sample (NVML's counter)",
                                   (74, 74))),
    ReasonRow(ClockEventReason.HW_SLOWDOWN, "HW slowdown", "hwslow", "hw_slowdown", "HW slowdown", "hw_slowdown",
              "hw_slowdown", slowdown=True, colour="purple", lane=4, verdict_rank=4),
    ReasonRow(ClockEventReason.SYNC_BOOST, "Sync boost", "sync", "sync_boost"),
    ReasonRow(ClockEventReason.SW_THERMAL_SLOWDOWN, "SW thermal", "swtherm", "sw_thermal_slowdown",
              "SW thermal slowdown", "sw_thermal", "thermal", slowdown=True, colour="orange", lane=2, verdict_rank=1,
              counter=CauseCounter("clock_event_sw_thermal_s", "Time SW thermal",
                                   "Seconds under SW thermal slowdown since the previous sample (NVML's counter)",
                                   (251, 269), older_field_id=75)),
    ReasonRow(ClockEventReason.HW_THERMAL_SLOWDOWN, "HW thermal", "hwtherm", "hw_thermal_slowdown",
              "HW thermal slowdown", "hw_thermal", "thermal", slowdown=True, colour="vermillion", lane=3,
              verdict_rank=0,
              counter=CauseCounter("clock_event_hw_thermal_s", "Time HW thermal",
                                   "Seconds under HW thermal slowdown since the previous sample (NVML's counter)",
                                   (252, 270))),
    ReasonRow(ClockEventReason.HW_POWER_BRAKE_SLOWDOWN, "Power brake", "brake", "hw_power_brake_slowdown",
              "power brake", "power_brake", "power", slowdown=True, colour="blue", lane=1, verdict_rank=3,
              counter=CauseCounter("clock_event_hw_power_brake_s", "Time power-braked",
                                   "Seconds under HW power brake slowdown since the previous sample (NVML's counter)",
                                   (253, 271))),
    ReasonRow(ClockEventReason.DISPLAY_CLOCK_SETTING, "Display clock", "dispclk", "display_clock_setting"),
    ReasonRow(ClockEventReason.BOARD_LIMIT, "Board limit", "board"),
    ReasonRow(ClockEventReason.RELIABILITY, "Reliability", "reliab"),
)
REASON_ROWS: Final[dict[ClockEventReason, ReasonRow]] = {row.reason: row for row in REASON_TABLE}
assert tuple(REASON_ROWS) == SINGLE_REASONS, "the reason table is not one row per bit, in bit order"

#: The throttle causes, in the order the verdict reports them.
CAUSE_ROWS: Final[tuple[ReasonRow, ...]] = tuple(sorted(
    (row for row in REASON_TABLE if row.cause is not None), key=lambda row: row.verdict_rank or 0))
#: The throttle causes in their dashboard lanes' order, top first.
LANE_ROWS: Final[tuple[ReasonRow, ...]] = tuple(sorted(
    (row for row in REASON_TABLE if row.lane is not None), key=lambda row: row.lane or 0))
#: The causes NVML counts time under, in the history's column order.
COUNTER_ROWS: Final[tuple[ReasonRow, ...]] = tuple(row for row in REASON_TABLE if row.counter is not None)

_REASON_LABELS: Final[dict[ClockEventReason, str]] = {row.reason: row.label for row in REASON_TABLE}
_REASON_PHRASES: Final[dict[ClockEventReason, str]] = {
    row.reason: row.phrase for row in REASON_TABLE if row.phrase is not None}


def _union(rows: Iterable[ReasonRow]) -> ClockEventReason:
    out = ClockEventReason.NONE
    for row in rows:
        out |= row.reason
    return out


def family_reasons(family: ReasonFamily) -> ClockEventReason:
    """The reasons of one family, as one mask: ``family_reasons("thermal")`` is SW | HW thermal slowdown."""
    return _union(row for row in REASON_TABLE if row.family == family)


#: Reasons that mean "the GPU is being slowed against the user's will" (not idle/app/display).
THROTTLE_REASONS: Final = _union(row for row in REASON_TABLE if row.cause is not None)
THERMAL_REASONS: Final = family_reasons("thermal")
POWER_REASONS: Final = family_reasons("power")

#: The per-cause time counters (GpuSample / history metric names), each with the reason bit it counts.
CLOCK_EVENT_COUNTERS: Final[tuple[tuple[str, ClockEventReason], ...]] = tuple(
    (row.counter.field, row.reason) for row in COUNTER_ROWS if row.counter is not None)


def bits(reasons: ClockEventReason) -> tuple[int, ...]:
    """The single bit values in ``reasons``, in bit order: ``bits(THERMAL_REASONS) == (0x20, 0x40)``."""
    return tuple(int(r) for r in ClockEventReason.decode(int(reasons)))
