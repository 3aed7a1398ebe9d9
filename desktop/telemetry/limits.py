"""GPU temperature thresholds that moved, as history events of kind ``limits``.

The NVML backend reads them again every minute and on an AC/battery change (nvml/backend.py); the
recorder and the window's recording store each change through the writer's ``add_event`` (the
existing events table: no schema step), so a run can be judged against the limits it ran under.
"""

from __future__ import annotations

from typing import Final

from desktop.telemetry.model import GpuInfo, Snapshot

#: (GpuInfo field, label, unit) of each limit watched. The enforced power limit is not among them: the
#: envelope's ``envelope.limit`` event already stores each change of it with its cause (telemetry/envelope.py).
WATCHED: Final = (
    ("temp_slowdown_c", "slowdown temperature", "°C"),
    ("temp_shutdown_c", "shutdown temperature", "°C"),
    ("temp_max_operating_c", "max operating temperature", "°C"),
    ("temp_memory_max_c", "memory max operating temperature", "°C"),
)
#: A history event: (time, kind, GPU uuid, detail), as HistoryWriter.add_event takes it.
LimitsEvent = tuple[float, str, str | None, str]


def _text(value: float | None, unit: str) -> str:
    return "n/a" if value is None else f"{value:g} {unit}"


def limit_changes(before: GpuInfo, after: GpuInfo) -> list[str]:
    """``["slowdown temperature 71 °C -> 77 °C", ...]`` for each watched limit that differs."""
    out = []
    for name, label, unit in WATCHED:
        old, new = getattr(before, name), getattr(after, name)
        if old != new:
            out.append(f"{label} {_text(old, unit)} -> {_text(new, unit)}")
    return out


class LimitsWatch:
    """Turns the GPUs' limits in successive snapshots into ``limits`` events, one per GPU and change."""

    def __init__(self) -> None:
        self._last: dict[str, GpuInfo] = {}

    def events(self, snapshot: Snapshot) -> list[LimitsEvent]:
        out: list[LimitsEvent] = []
        for reading in snapshot.gpus:
            info = reading.info
            if not info.uuid:
                continue
            before = self._last.get(info.uuid)
            self._last[info.uuid] = info
            if before is not None and (changes := limit_changes(before, info)):
                out.append((snapshot.time_s, "limits", info.uuid, "; ".join(changes)))
        return out
