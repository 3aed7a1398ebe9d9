"""The temperature guards' decisions, for the stress test and for `rigscope run`'s job: pure.

**The stress test's guard** (``guard_temperature``, ``check_guard``, ``check_guard_above_current``,
``RunWatch``): where it stands for a GPU, and which explicit guards are refused. The guard stops the
workload when the GPU reaches it. It must stay below the shutdown
temperature (the board powers off there) and close to the platform's max operating
temperature, which a laptop maker may set far below slowdown: a GeForce MX330 in a
ThinkPad T14 reports max operating 57 °C with slowdown 97 °C and shutdown 102 °C
(../shared/realdata/README.md, "Figures from other public captures"). The platform holds
the GPU *at* its max operating temperature under sustained load (an Ada laptop's thermal
limit, 87 °C on Linux, is also its target), so the default guard sits a few degrees above
it: at the limit is the normal state a sustained test is there to judge; climbing past it
means the platform's cooling is no longer holding the GPU.

**The job's thermal guard** (``ThermalGuard``, ``check_guard_c``): a controller deciding when to stop the
job's process tree and when to let it run. Hysteresis with minimum durations: pause when the GPU reaches
the guard temperature T, resume once it is back at T - offset (5 °C by default,
``jobs.guard_resume_offset_c``), and never pause again before the job ran ``min_run_s`` since the last
resume nor resume before it was stopped ``min_pause_s``. With the defaults (20 s each) the job is stopped
at most 1.5 times a minute, however the temperature wanders around T. The first pause is immediate: the
minimum run only holds after a resume, and never past T + ``max_overshoot_c`` (3 °C): a GPU that heats
fast is stopped there whatever the minimum run says (then only the minimum pause bounds the stops: at
most 3 a minute), so the guard is never overrun for the sake of fewer stops. Time comes from the caller
(``now_s``), so tests drive it with any clock. An unknown temperature (a failed sensor, a lost GPU)
changes nothing: the job stays as it is until a reading says otherwise.

A refused guard raises ``GuardRefused`` (a ValueError): the callers in desktop/ say it to the user as a
``UserError`` (exit code 2). The GPUs and processes are read through the small ``GuardedGpu`` and
``GuardedProcess`` protocols (``desktop.telemetry.model``'s ``GpuInfo`` and ``GpuProcess`` are both).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from advisor.safetext import printable
from advisor.thresholds import DEFAULT_GUARD_OFFSET_C as DEFAULT_GUARD_OFFSET_C  # noqa: PLC0414 (re-exported)
from advisor.thresholds import DEFAULT_MIN_PAUSE_S as DEFAULT_MIN_PAUSE_S  # noqa: PLC0414 (re-exported)
from advisor.thresholds import DEFAULT_MIN_RUN_S as DEFAULT_MIN_RUN_S  # noqa: PLC0414 (re-exported)
from advisor.thresholds import DEFAULT_RESUME_OFFSET_C as DEFAULT_RESUME_OFFSET_C  # noqa: PLC0414 (re-exported)

#: What the job's guard does now.
GuardAction = Literal["pause", "resume"]
#: Where a stress test's guard came from: ``--guard-c``, the configured absolute guard, the GPU's own limits.
GuardSource = Literal["explicit", "setting", "default"]
#: A guard below this is below room temperature: the job would never run, a stress test would stop at once.
MIN_GUARD_C = 30.0


class GuardedGpu(Protocol):
    """What the guard reads of a GPU (``desktop.telemetry.model.GpuInfo`` is one)."""

    @property
    def index(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def temp_slowdown_c(self) -> float | None: ...
    @property
    def temp_shutdown_c(self) -> float | None: ...
    @property
    def temp_max_operating_c(self) -> float | None: ...
    @property
    def temp_memory_max_c(self) -> float | None: ...


class GuardedProcess(Protocol):
    """What the guard reads of a process on a GPU (``desktop.telemetry.model.GpuProcess`` is one)."""

    @property
    def pid(self) -> int: ...
    @property
    def gpu_index(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def user(self) -> str | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def command(self) -> str | None: ...


#: How far below shutdown the guard stays at most. An RTX 3090 reports slowdown 95 °C and
#: shutdown 98 °C (nvsmi_q_RTX3090.txt), an A10 98 and 101 (nvsmi_q_A10.txt): slowdown + 5
#: alone would sit above shutdown on both.
SHUTDOWN_MARGIN_C = 5.0
#: How far above the max operating temperature a default guard may sit: far enough that a GPU
#: regulated at its limit (±1-2 °C of sensor noise) runs on, near enough to catch an overshoot.
MAX_OPERATING_MARGIN_C = 3.0


class GuardRefused(ValueError):
    """A guard that cannot work: one below room temperature (`rigscope run`'s), an explicit one at or above
    shutdown (it would never act), or any guard at or below the GPU's temperature at the start (the run would
    stop at once). The message is said to the user as it is (desktop/ raises it again as a ``UserError``)."""


def guard_ceiling(info: GuardedGpu | None) -> float | None:
    """The highest default guard this GPU allows: min(shutdown - 5 °C, max operating + 3 °C), where known."""
    if info is None:
        return None
    limits = [value for value in (
        info.temp_shutdown_c - SHUTDOWN_MARGIN_C if info.temp_shutdown_c is not None else None,
        info.temp_max_operating_c + MAX_OPERATING_MARGIN_C if info.temp_max_operating_c is not None else None,
    ) if value is not None]
    return min(limits) if limits else None


def check_guard(info: GuardedGpu | None, guard_c: float | None) -> None:
    """Refuse an explicit guard at or above the GPU's shutdown temperature (raises GuardRefused)."""
    if guard_c is None or info is None or info.temp_shutdown_c is None:
        return
    if guard_c >= info.temp_shutdown_c:
        raise GuardRefused(
            f"--guard-c {guard_c:g} °C is at or above the shutdown temperature of {info.name} "
            f"({info.temp_shutdown_c:g} °C): the GPU would power off before the guard acted; "
            f"use a guard below {info.temp_shutdown_c - SHUTDOWN_MARGIN_C:g} °C or leave it to the default")


def guard_temperature(info: GuardedGpu | None, guard_c: float | None, offset_c: float = DEFAULT_GUARD_OFFSET_C,
                      absolute_c: float = 0.0) -> float | None:
    """The guard: an explicit value (checked against shutdown), else the configured absolute one, else
    slowdown + offset; a default never above ``guard_ceiling``."""
    if guard_c is not None:
        check_guard(info, guard_c)
        return guard_c
    default: float | None = None
    if absolute_c > 0:
        default = absolute_c
    elif info is not None and info.temp_slowdown_c is not None:
        default = info.temp_slowdown_c + offset_c
    ceiling = guard_ceiling(info)
    if ceiling is None:
        return default
    return ceiling if default is None else min(default, ceiling)


def check_guard_above_current(info: GuardedGpu | None, guard_c: float | None, current_c: float | None, *,
                              source: GuardSource = "explicit", resume_offset_c: float = 0.0) -> None:
    """Refuse a guard at or below the GPU's temperature at the start (+ ``resume_offset_c`` for a guard that
    pauses and resumes, `rigscope run`'s): the run would stop at its first sample (and never resume).

    ``source`` says where the guard came from, for the message: ``explicit`` (``--guard-c``), ``setting``
    (the configured absolute guard) or ``default`` (the GPU's own limits).
    """
    if guard_c is None or current_c is None or current_c + resume_offset_c < guard_c:
        return
    if resume_offset_c > 0:
        name = info.name if info is not None else "the GPU"
        raise GuardRefused(
            f"--guard-c {guard_c:g} °C is at or below the current temperature of {name} ({current_c:.0f} °C) "
            f"plus the resume offset ({resume_offset_c:g} °C): the job would be paused at its first sample and "
            f"continue only at {guard_c - resume_offset_c:g} °C, below where the GPU is now; use a guard above "
            f"{current_c + resume_offset_c:.0f} °C")
    name = info.name if info is not None else "the GPU"
    what = {"explicit": f"--guard-c {guard_c:g} °C",
            "setting": f"The guard temperature set in Settings ({guard_c:g} °C)"}.get(
        source, f"The temperature guard ({guard_c:g} °C, from the GPU's own limits)")
    advice = (f"use a guard above {current_c:.0f} °C or leave it to the default" if source == "explicit"
              else "let the GPU cool down first" + (", or raise the setting" if source == "setting" else ""))
    raise GuardRefused(f"{what} is at or below the current temperature of {name} ({current_c:.0f} °C): "
                       f"the run would stop at once; {advice}")


#: How long the watched GPU's temperature may be unknown before the guard stops the run. A failing
#: temperature query is only asked again after minutes (the NVML gateway rests a failing call), and
#: a guard that cannot read the GPU cannot protect it: a few seconds, not five minutes.
TEMP_UNKNOWN_LIMIT_S = 5.0
#: The HBM guard where the GPU has a memory sensor but no memory threshold: the max operating
#: temperature of HBM2e on an A100 (nvsmi_q_A100SXMx4.txt "Memory Max Operating Temp: 95 C").
DEFAULT_MEMORY_MAX_C = 95.0


def memory_guard_temperature(info: GuardedGpu | None) -> float:
    """The HBM guard: the memory max operating temperature + 3 °C where known, else 95 °C."""
    if info is not None and info.temp_memory_max_c is not None:
        return info.temp_memory_max_c + MAX_OPERATING_MARGIN_C
    return DEFAULT_MEMORY_MAX_C


def process_label(process: GuardedProcess) -> str:
    """``pid 4242 python train.py``: a foreign process as the warning and the verdict name it (escaped)."""
    what = process.command or process.name or "?"
    user = f" ({printable(process.user)})" if process.user else ""
    return f"pid {process.pid} {printable(what)}{user}"


@dataclass
class RunWatch:
    """What the guard watches beside the GPU temperature: an unknown temperature, HBM, foreign processes."""

    #: Processes of this run (the child, this process): never foreign.
    own_pids: set[int] = field(default_factory=set)
    temp_unknown_since_s: float | None = None
    #: Foreign compute processes on the GPU at the start (labels), None before the first look.
    at_start: tuple[str, ...] | None = None
    #: Every foreign compute process seen on the GPU during the run: pid -> label.
    shared_with: dict[int, str] = field(default_factory=dict)

    def unknown_temperature(self, temperature_c: float | None, now_s: float) -> str | None:
        """The stop message once the temperature has been unknown for ``TEMP_UNKNOWN_LIMIT_S``, else None."""
        if temperature_c is not None:
            self.temp_unknown_since_s = None
            return None
        if self.temp_unknown_since_s is None:
            self.temp_unknown_since_s = now_s
            return None
        unknown_s = now_s - self.temp_unknown_since_s
        if unknown_s < TEMP_UNKNOWN_LIMIT_S:
            return None
        return (f"stopped by the temperature guard: temperature unknown for {unknown_s:.0f} s, and a guard "
                "cannot protect a GPU it cannot read")

    @staticmethod
    def memory_too_hot(memory_c: float | None, info: GuardedGpu | None) -> str | None:
        """The stop message where the HBM is at or past its guard, else None (also where it has no sensor)."""
        if memory_c is None:
            return None
        guard_c = memory_guard_temperature(info)
        if memory_c < guard_c:
            return None
        return f"stopped by the temperature guard: memory (HBM) at {memory_c:.0f} °C >= {guard_c:.0f} °C"

    def note_processes(self, processes: Iterable[GuardedProcess], gpu_index: int) -> list[str]:
        """Record the foreign compute processes on ``gpu_index``; returns the ones new at the start (to warn)."""
        foreign = {p.pid: process_label(p) for p in processes
                   if p.gpu_index == gpu_index and p.kind != "graphics" and p.pid not in self.own_pids}
        self.shared_with.update(foreign)
        if self.at_start is None:
            self.at_start = tuple(foreign.values())
            return list(self.at_start)
        return []

    def extra(self) -> dict[str, list[str]]:
        """What the run record keeps: the foreign processes at the start and during the run."""
        out: dict[str, list[str]] = {}
        if self.at_start:
            out["foreign_processes_at_start"] = list(self.at_start)
        if self.shared_with:
            out["shared_with"] = sorted(self.shared_with.values())
        return out


# --- the job's thermal guard (`rigscope run --guard-c`) ----------------------------------------------

@dataclass(frozen=True, slots=True)
class GuardSettings:
    limit_c: float
    resume_offset_c: float = DEFAULT_RESUME_OFFSET_C
    min_pause_s: float = DEFAULT_MIN_PAUSE_S
    min_run_s: float = DEFAULT_MIN_RUN_S
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


def check_guard_c(guard_c: float, gpus: Sequence[GuardedGpu], temperatures_c: Mapping[int, float] | None = None,
                  resume_offset_c: float = DEFAULT_RESUME_OFFSET_C) -> None:
    """Refuse a guard below room temperature, at or above a GPU's shutdown temperature, or at or below a GPU's
    temperature now (``temperatures_c``, by GPU index) + the resume offset: the job would be paused at its first
    sample and never continued, its resume point being below where the GPU already is (as `rigscope stress`,
    which refuses a guard at or below the current temperature)."""
    if not math.isfinite(guard_c):
        raise GuardRefused(f"--guard-c {guard_c:g}: a temperature must be a finite number of °C "
                           f"(e.g. 83; {MIN_GUARD_C:g} °C or more)")
    if guard_c < MIN_GUARD_C:
        raise GuardRefused(f"--guard-c {guard_c:g} °C is below room temperature: the job would never run "
                           f"(use {MIN_GUARD_C:g} °C or more)")
    for info in gpus:
        check_guard(info, guard_c)
        current = (temperatures_c or {}).get(info.index)
        check_guard_above_current(info, guard_c, current, source="explicit",
                                  resume_offset_c=max(resume_offset_c, 0.0))
