"""Alert rules over snapshots: hot GPU, VRAM nearly full, throttled too long, GPU lost.

``AlertMonitor.check(snapshot)`` returns the alerts that *start* in this snapshot. An alert
fires once per episode (while its condition holds it stays quiet) and an episode that starts
again within ``debounce_s`` of the last notice of the same alert on the same GPU is not
announced again (a temperature that wobbles around the threshold). After each ``check``,
``ended`` lists the ``(kind, gpu_uuid)`` episodes whose condition stopped holding in that
snapshot, so whoever shows an alert (the status bar's alert list) takes it down again. Pure logic: no Qt, so
it is tested with plain snapshots; the app shows the result in the status bar and the tray.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.wording import parenthesized
from desktop.config import AlertSettings
from desktop.telemetry.model import THROTTLE_REASONS, ClockEventReason, DeviceState, Snapshot

#: A temperature episode ends only this far below the threshold (hysteresis).
TEMPERATURE_HYSTERESIS_C = 2.0


@dataclass(frozen=True)
class Alert:
    kind: str  # temperature | vram | throttle | lost
    gpu_index: int
    gpu_uuid: str
    time_s: float
    message: str
    level: str = "warning"


class AlertMonitor:
    """Remembers which conditions hold per GPU, to announce each episode once."""

    def __init__(self, settings: AlertSettings) -> None:
        self.settings = settings
        self._active: set[tuple[str, int]] = set()
        self._last_notice_s: dict[tuple[str, int], float] = {}
        self._throttled_since: dict[int, float] = {}
        #: The episodes that ended in the last ``check``: (kind, GPU uuid).
        self.ended: list[tuple[str, str]] = []

    def update_settings(self, settings: AlertSettings) -> None:
        self.settings = settings

    def check(self, snap: Snapshot) -> list[Alert]:
        fired: list[Alert] = []
        self.ended = []
        s = self.settings
        for reading in snap.gpus:
            info = reading.info
            index = info.index
            name = f"GPU {index} {parenthesized(info.name)}"  # "(… Laptop GPU, simulated)", not "(… (simulated))"
            conditions: dict[str, str | None] = {}
            lost = reading.state is DeviceState.LOST
            conditions["lost"] = (f"{name} stopped answering: {reading.state_detail or 'lost'}"
                                  if lost and s.gpu_lost else None)
            sample = reading.sample if not lost else None
            temp = sample.temperature_c if sample else None
            hot_key = ("temperature", index)
            limit = s.temperature_c - (TEMPERATURE_HYSTERESIS_C if hot_key in self._active else 0.0)
            conditions["temperature"] = (f"{name} is at {temp:.0f} °C (alert at {s.temperature_c:.0f} °C)"
                                         if temp is not None and temp >= limit else None)
            used, total = (sample.vram_used_mib if sample else None), info.vram_total_mib
            pct = 100.0 * used / total if used is not None and total else None
            conditions["vram"] = (f"{name} VRAM is {pct:.0f} % full ({used:,.0f} of {total:,.0f} MiB)"
                                  if pct is not None and total and used is not None and pct >= s.vram_pct else None)
            mask = (sample.clock_event_reasons or 0) & int(THROTTLE_REASONS) if sample else 0
            if mask:
                since = self._throttled_since.setdefault(index, snap.time_s)
            else:
                self._throttled_since.pop(index, None)
                since = snap.time_s
            held = snap.time_s - since
            reasons = ", ".join(r.label for r in ClockEventReason.decode(mask))
            conditions["throttle"] = (f"{name} has been held back for {held:.0f} s: {reasons}"
                                      if mask and held >= s.throttle_s else None)
            for kind, message in conditions.items():
                if message is None and (kind, index) in self._active:
                    self.ended.append((kind, info.uuid))
                alert = self._edge(kind, index, message, snap.time_s)
                if alert is not None:
                    fired.append(Alert(kind, index, info.uuid, snap.time_s, alert,
                                       "error" if kind in ("lost", "temperature") else "warning"))
        return fired

    def _edge(self, kind: str, index: int, message: str | None, now_s: float) -> str | None:
        key = (kind, index)
        if message is None:
            self._active.discard(key)
            return None
        if key in self._active:
            return None  # the same episode: already announced
        self._active.add(key)
        last = self._last_notice_s.get(key)
        if last is not None and now_s - last < self.settings.debounce_s:
            return None
        self._last_notice_s[key] = now_s
        return message
