"""The job's thermal guard as a pure controller: when to stop the job's process tree and when to let it run.

Hysteresis with minimum durations: pause when the GPU reaches the guard temperature T, resume once it
is back at T - offset (5 °C by default, ``jobs.guard_resume_offset_c``), and never pause again before
the job ran ``min_run_s`` since the last resume nor resume before it was stopped ``min_pause_s``. With
the defaults (20 s each) the job is stopped at most 1.5 times a minute, however the temperature
wanders around T. The first pause is immediate: the minimum run only holds after a resume, and never
past T + ``max_overshoot_c`` (3 °C): a GPU that heats fast is stopped there whatever the minimum run
says (then only the minimum pause bounds the stops: at most 3 a minute), so the guard is never
overrun for the sake of fewer stops. Time comes
from the caller (``now_s``), so tests drive it with any clock. An unknown temperature (a failed sensor,
a lost GPU) changes nothing: the job stays as it is until a reading says otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from desktop.errors import UserError
from desktop.stress.guard import check_guard, check_guard_above_current
from desktop.telemetry.model import GpuInfo

GuardAction = Literal["pause", "resume"]
#: A guard below this is below room temperature: the job would never run.
MIN_GUARD_C = 30.0


@dataclass(frozen=True, slots=True)
class GuardSettings:
    limit_c: float
    resume_offset_c: float = 5.0
    min_pause_s: float = 20.0
    min_run_s: float = 20.0
    #: How far past the limit the minimum run may let the temperature go before the job is stopped anyway.
    max_overshoot_c: float = 3.0

    @property
    def resume_c(self) -> float:
        return self.limit_c - self.resume_offset_c


class ThermalGuard:
    """Decides, one temperature reading at a time, whether the job should be stopped or continued."""

    def __init__(self, settings: GuardSettings, now_s: float) -> None:
        self.settings = settings
        self.paused = False
        self.paused_s = 0.0
        self._since_s = now_s
        self._resumed_once = False

    def update(self, temperature_c: float | None, now_s: float) -> GuardAction | None:
        """The action to take now ("pause", "resume") or None; the caller acts on it at once."""
        if temperature_c is None or not math.isfinite(temperature_c):
            return None
        held_s = now_s - self._since_s
        s = self.settings
        if not self.paused:
            overrun = temperature_c >= s.limit_c + s.max_overshoot_c
            if temperature_c >= s.limit_c and (not self._resumed_once or held_s >= s.min_run_s or overrun):
                self.paused = True
                self._since_s = now_s
                return "pause"
            return None
        if temperature_c <= s.resume_c and held_s >= s.min_pause_s:
            self.paused = False
            self.paused_s += held_s
            self._since_s = now_s
            self._resumed_once = True
            return "resume"
        return None

    def resumed_elsewhere(self, now_s: float) -> None:
        """The job was found running while paused (continued from outside the guard): the pause ends at
        ``now_s`` as a resume would, so the guard pauses it again when the temperature says so."""
        if not self.paused:
            return
        self.paused = False
        self.paused_s += now_s - self._since_s
        self._since_s = now_s
        self._resumed_once = True

    def total_paused_s(self, now_s: float) -> float:
        """Seconds stopped so far, the running pause included."""
        return self.paused_s + (now_s - self._since_s if self.paused else 0.0)


def check_guard_c(guard_c: float, gpus: list[GpuInfo], temperatures_c: Mapping[int, float] | None = None,
                  resume_offset_c: float = 5.0) -> None:
    """Refuse a guard below room temperature, at or above a GPU's shutdown temperature, or at or below a GPU's
    temperature now (``temperatures_c``, by GPU index) + the resume offset: the job would be paused at its first
    sample and never continued, its resume point being below where the GPU already is (as `rigscope stress`,
    which refuses a guard at or below the current temperature)."""
    if not (math.isfinite(guard_c) and guard_c >= MIN_GUARD_C):
        raise UserError(f"--guard-c {guard_c:g} °C is below room temperature: the job would never run "
                        f"(use {MIN_GUARD_C:g} °C or more)")
    for info in gpus:
        check_guard(info, guard_c)
        current = (temperatures_c or {}).get(info.index)
        check_guard_above_current(info, guard_c, current, source="explicit",
                                  resume_offset_c=max(resume_offset_c, 0.0))
