"""One NVML GPU's record: its handle, static info, what its calls taught, and the state kept between reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from desktop.telemetry.model import GpuInfo
from desktop.telemetry.nvml.call_memory import CallMemory
from desktop.telemetry.nvml.counters import CounterTracker


@dataclass(slots=True)
class GpmSamples:
    """One GPU's two GPM sample buffers (``nvmlGpmSample_t``), used in turn; ``previous`` holds the last
    reading once ``primed`` (see ``gpm``)."""

    previous: Any
    spare: Any
    primed: bool = False


@dataclass(slots=True)
class NvmlDevice:
    """A GPU as the backend tracks it; ``handle`` is None while it is lost."""

    index: int
    handle: Any
    info: GpuInfo
    lost_detail: str | None = None
    #: Call keys (and "field:N") this device answered NotSupported & co., and the ones failing.
    calls: CallMemory = field(init=False)
    #: Slow metrics last read (mem clock, fan, pstate, link, PCIe throughput fallback).
    slow: dict[str, float | int | None] = field(default_factory=dict)
    slow_at_s: float | None = None
    slow_count: int = 0
    #: (time_s, tx_bytes, rx_bytes) of the previous PCIe counter reading.
    pcie_prev: tuple[float, float, float] | None = None
    #: The clock-event time counters: which field ids to ask and believe (set with the driver version at open).
    counters: CounterTracker = field(default_factory=CounterTracker)
    #: (CallMemory.changes, counter ids rejected) when the dropped counter ids were last filed as unsupported.
    counters_dropped: tuple[int, int] | None = None
    #: Newest per-process utilization sample seen (driver CPU time, µs): the next poll asks for newer ones.
    util_seen_us: int = 0
    #: Where the last utilization window ended (driver CPU µs), the driver's sample period once seen, and
    #: the newest field-values timestamp (the same clock: the end of the next window).
    util_window_end_us: int = 0
    util_period_us: int | None = None
    last_field_stamp_us: int = 0
    #: The field ids of the last field-values request and its ctypes array, reused while the ids stay the same.
    field_request: tuple[tuple[int, ...], Any] | None = None
    #: The field ids asked, and the (CallMemory.changes, counters rejected) they were worked out at.
    wanted_fields: tuple[tuple[int, int], list[int]] | None = None
    #: Process polls so far, and the utilization of each pid listed at the last one that asked (None: n/a).
    process_polls: int = 0
    util_last: dict[int, Any] | None = None
    #: The GPU's sysfs runtime_status file (resolved once; None: nothing to look at).
    sleep_file: Path | None = None
    sleep_file_resolved: bool = False
    #: The GPU slept when it was opened: its static info is read when it wakes.
    info_pending: bool = False
    #: The HBM temperature of the last read (field 82), None where the GPU has no memory sensor.
    memory_temperature_c: float | None = None
    #: A bogus power reading was logged for this GPU (said once, the reading is n/a every time).
    bogus_power_logged: bool = False
    #: When the moving limits were last read (sample time; None: not since the open), and whether they are
    #: to be read at the next tick whatever the period (``NvmlBackend.refresh_limits``).
    limits_at_s: float | None = None
    limits_due: bool = False
    #: GPM support was asked (once per handle), and the two GPM sample buffers where it answered yes.
    gpm_checked: bool = False
    gpm: GpmSamples | None = None

    def __post_init__(self) -> None:
        self.calls = CallMemory(label=f"GPU {self.index}")
