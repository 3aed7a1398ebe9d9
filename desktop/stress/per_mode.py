"""The Quick test once per firmware mode, and the runs side by side (`rigscope stress --per-mode`).

Each mode is set before its run: by Rigscope where it may (the simulated laptop always; a real
laptop's msi-ec ``shift_mode`` or ACPI ``platform_profile`` only when the user allowed it and the
file is writable), otherwise the user is asked to switch and the mode read back labels the run.
Between runs the GPU cools to near its first start temperature (at most ``cooldown_s``), so a later
mode does not start hot. Each run is the stress session's (``run_test``: its locks, its judging
against the earlier runs, its saving; desktop/sessions/stress.py); here it becomes a portable record
(advisor/portable.py) compared as any other, plus one sentence per neighbouring pair
(advisor/mode_compare.py).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from advisor.envelope import MSI_SHIFT_MODE_NAMES, PLATFORM_PROFILE_NAMES
from advisor.mode_compare import ModeFigures
from advisor.portable import PortableRecord
from advisor.verdict_model import Verdict
from desktop.stress.portable import record_from_stress
from desktop.stress.run_model import Clock, RunResult
from desktop.telemetry.envelope import MSI_EC, EnvelopeReader
from desktop.telemetry.simulated import SimulatedMachine


@dataclass(frozen=True)
class ModeRun:
    """One mode's run: which mode it was (raw value and display name), the run, its verdict and record,
    and where the history stored it (``run_id`` None: not stored; ``save_error`` says why, when it failed)."""

    mode: str
    name: str
    result: RunResult
    verdict: Verdict
    record: PortableRecord
    run_id: int | None = None
    save_error: str | None = None

    def figures(self) -> ModeFigures:
        r = self.record
        return ModeFigures(self.name, r.throughput, r.unit, r.power_w.p50, r.temperature_c.p50, r.sm_clock_mhz.p50)


class JudgedRun(Protocol):
    """One test as the stress session gives it back (``StressOutcome``): run, verdict, and where it was stored."""

    @property
    def result(self) -> RunResult: ...

    @property
    def verdict(self) -> Verdict: ...

    @property
    def run_id(self) -> int | None: ...

    @property
    def save_error(self) -> str | None: ...


class ModeSwitch(Protocol):
    """Where the firmware mode is read and, where allowed, written."""

    #: "msi-ec", "platform_profile" or "simulated": the names modes are shown by.
    kind: str

    def available(self) -> tuple[str, ...]: ...

    def current(self) -> str | None: ...

    def set(self, mode: str) -> bool:
        """Switch to ``mode``; False when Rigscope may not (the user is asked instead)."""
        ...


def mode_name(kind: str, mode: str) -> str:
    """A mode as people know it: msi-ec's turbo is MSI Center's Extreme Performance."""
    if kind in ("msi-ec", "simulated"):
        return MSI_SHIFT_MODE_NAMES.get(mode, mode)
    return PLATFORM_PROFILE_NAMES.get(mode, mode)


class SimulatedModes:
    """The simulated laptop's msi-ec modes: always switchable."""

    kind = "simulated"

    def __init__(self, machine: SimulatedMachine) -> None:
        self.machine = machine

    def available(self) -> tuple[str, ...]:
        return self.machine.power_envelope().msi_shift_modes

    def current(self) -> str | None:
        return self.machine.power_envelope().msi_shift_mode

    def set(self, mode: str) -> bool:
        self.machine.set_envelope(shift_mode=mode)
        return True


class SysfsModes:
    """msi-ec's shift_mode where the driver is loaded, else ACPI platform_profile; written only if ``allow_write``."""

    def __init__(self, reader: EnvelopeReader | None = None, *, allow_write: bool = False) -> None:
        self.reader = reader or EnvelopeReader()
        self.allow_write = allow_write
        envelope = self.reader.read()
        sysfs = self.reader.sysfs_root
        if envelope.msi_shift_mode is not None:
            self.kind = "msi-ec"
            self._file: Path = sysfs / MSI_EC / "shift_mode"
        else:
            self.kind = "platform_profile"
            self._file = sysfs / "firmware" / "acpi" / "platform_profile"

    def available(self) -> tuple[str, ...]:
        envelope = self.reader.read()
        return envelope.msi_shift_modes if self.kind == "msi-ec" else envelope.platform_profile_choices

    def current(self) -> str | None:
        envelope = self.reader.read()
        return envelope.msi_shift_mode if self.kind == "msi-ec" else envelope.platform_profile

    def set(self, mode: str) -> bool:
        if not self.allow_write or not os.access(self._file, os.W_OK):
            return False
        try:
            self._file.write_text(mode + "\n")
        except OSError:
            return False
        return self.current() == mode


def choose_modes(requested: Sequence[str], available: Sequence[str]) -> list[str]:
    """The modes to run, in the order given (all available ones when none is given); ValueError naming the choices."""
    if not available:
        raise ValueError("no firmware modes are readable here (no msi-ec, no ACPI platform_profile)")
    modes = list(requested) or list(available)
    unknown = [m for m in modes if m not in available]
    if unknown:
        raise ValueError(f"unknown mode {', '.join(unknown)}; this machine has {', '.join(available)}")
    if len(modes) < 2:
        raise ValueError("--per-mode compares at least two modes")
    return list(dict.fromkeys(modes))


def run_modes(modes: Sequence[str], switch: ModeSwitch, run_test: Callable[[str], JudgedRun], *,
              ask: Callable[[str], None], cool_down: Callable[[], object] | None = None,
              say: Callable[[str], None] = lambda _text: None, machine: str | None = None) -> list[ModeRun]:
    """Run once per mode: switch (or ask), cool down, run, record. ``run_test(mode)`` runs, judges and stores
    one test (the stress session's ``run_next``); this loop only sets the mode before each and labels it."""
    runs: list[ModeRun] = []
    for position, mode in enumerate(modes):
        name = mode_name(switch.kind, mode)
        if not switch.set(mode):
            ask(f"Switch the firmware to {name} ({switch.kind} {mode}) now, then press Enter")
        actual = switch.current() or mode
        if actual != mode:
            say(f"the firmware reads {actual!r}, not {mode!r}: the run is labelled by what it reads")
            name = mode_name(switch.kind, actual)
        if position > 0 and cool_down is not None:
            say("cooling down before the next mode…")
            cool_down()
        say(f"running {name}…")
        judged = run_test(actual)
        result, verdict = judged.result, judged.verdict
        record = record_from_stress(result, verdict, machine=f"{machine} · {name}" if machine else name)
        runs.append(ModeRun(actual, name, result, verdict, record, judged.run_id, judged.save_error))
        if result.aborted:
            break  # cancelled or guarded: the next mode would not be a fair comparison
    return runs


def wait_cool(read_temperature: Callable[[], float | None], target_c: float, clock: Clock, *,
              limit_s: float = 120.0, step_s: float = 2.0) -> float | None:
    """Idle until the GPU is at or below ``target_c`` or ``limit_s`` passed; the last temperature read."""
    never = threading.Event()
    start = clock.now()
    temperature = read_temperature()
    while temperature is not None and temperature > target_c and clock.now() - start < limit_s:
        clock.sleep(step_s, never)
        temperature = read_temperature()
    return temperature
