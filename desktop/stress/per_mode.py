"""The Quick test once per firmware mode, and the runs side by side (`rigscope stress --per-mode`).

Each mode is set before its run: by Rigscope where it may (the simulated laptop always; a real
laptop's msi-ec ``shift_mode`` or ACPI ``platform_profile`` only when the user allowed it and the
file is writable), otherwise the user is asked to switch and the mode read back labels the run.
Between runs the GPU cools to near its first start temperature (``cool_to_start``: within
``COOL_MARGIN_C``, at most ``COOL_LIMIT_S``), so a later mode does not start hot. ``run_modes`` is the loop
the command line runs; ``ModeSteps`` the same steps one at a time, which the Stress page's "Compare modes"
drives from its callbacks (desktop/ui/pages/stress_modes.py). Each run is the stress session's (``run_test``:
its locks, its judging against the earlier runs, its saving; desktop/sessions/stress.py); here it becomes a
portable record (advisor/portable.py) compared as any other, plus one sentence per neighbouring pair
(advisor/mode_compare.py). The mode found before the first switch is put back afterwards, on Ctrl+C and
after a crash (desktop/stress/mode_restore.py).

A mode file is written in place and only there (``write_mode_file``): never through a symbolic link,
never outside the sysfs root, never emptied before the new value is in it. With ``RIGSCOPE_SYSFS_ROOT``
naming a tree that has msi-ec's ``shift_mode`` (a fake one in tests), the simulated laptop follows that
file as a real laptop's EC does, so the simulated run switches and restores through the same code.
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from advisor.envelope import MSI_SHIFT_MODE_NAMES, PLATFORM_PROFILE_NAMES
from advisor.mode_compare import ModeFigures
from advisor.portable import PortableRecord
from advisor.verdict_model import Verdict
from desktop.errors import UserError
from desktop.safeio import refusal
from desktop.stress.portable import record_from_stress
from desktop.stress.run_model import Clock, RunResult
from desktop.telemetry.envelope import MSI_EC, SYSFS_ROOT_ENV, EnvelopeReader
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
    #: Whether Rigscope may write the mode (``--switch-modes``); without it the user switches, and back.
    allow_write: bool

    def available(self) -> tuple[str, ...]: ...

    def current(self) -> str | None: ...

    def set(self, mode: str) -> bool:
        """Switch to ``mode``; False when Rigscope may not (the user is asked instead)."""
        ...

    def restore_command(self, mode: str) -> str | None:
        """The shell command that sets ``mode`` by hand (None: nothing outside Rigscope can)."""
        ...

    @property
    def mode_file(self) -> tuple[Path, Path] | None:
        """(the mode file, the sysfs root it must stay under) when the mode lives in a file that outlives
        this process; None for a mode that dies with it (the simulated laptop's model)."""
        ...


class ModeFileRefused(UserError):
    """A firmware mode file Rigscope will not write: a symbolic link, outside the sysfs root, not a regular file."""


def write_mode_file(path: Path, root: Path, value: str) -> None:
    """Write ``value`` (plus a newline, as ``echo`` does) into the sysfs attribute ``path`` under ``root``.

    Opened with ``O_NOFOLLOW`` and no ``O_CREAT``/``O_TRUNC``: a symbolic link (to /etc/passwd, say) is
    refused instead of truncated and written, and the resolved path must stay under ``root``. The value
    goes in one ``write`` at offset 0, as sysfs wants it; only a plain file longer than the value (a fake
    tree) is cut to it afterwards, so no reader ever sees it empty. ModeFileRefused says why not; an
    OSError is the write's own (EACCES without root, EINVAL from a driver that does not know the mode)."""
    check_mode_file(path, root)
    real_root = os.path.realpath(root)
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if os.path.islink(path):  # swapped for a link since the check (O_NOFOLLOW: ELOOP)
            raise ModeFileRefused(f"{path} became a symbolic link: not written") from None
        raise exc
    try:
        st = os.fstat(fd)
        problem = refusal(path, st.st_mode)
        if problem is not None:
            raise ModeFileRefused(str(problem))
        opened = _opened_path(fd)
        if opened is not None and os.path.commonpath([real_root, opened]) != real_root:
            raise ModeFileRefused(f"{path} opened {opened}, outside the sysfs root {root}: not written")
        data = (value + "\n").encode("utf-8", "surrogateescape")
        if os.pwrite(fd, data, 0) != len(data):
            raise OSError(f"{path}: short write")
        if os.fstat(fd).st_size > len(data):
            try:  # a plain file in a fake tree keeps no tail of a longer old value; sysfs ignores this
                os.ftruncate(fd, len(data))
            except OSError:
                pass
    finally:
        os.close(fd)


def _opened_path(fd: int) -> str | None:
    """The path the kernel opened for ``fd`` (Linux), to check it after the open as well as before."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def mode_name(kind: str, mode: str) -> str:
    """A mode as people know it: msi-ec's turbo is MSI Center's Extreme Performance."""
    if kind in ("msi-ec", "simulated"):
        return MSI_SHIFT_MODE_NAMES.get(mode, mode)
    return PLATFORM_PROFILE_NAMES.get(mode, mode)


class SimulatedModes:
    """The simulated laptop's msi-ec modes: always switchable."""

    kind = "simulated"
    allow_write = True

    def __init__(self, machine: SimulatedMachine) -> None:
        self.machine = machine

    def available(self) -> tuple[str, ...]:
        return self.machine.power_envelope().msi_shift_modes

    def current(self) -> str | None:
        return self.machine.power_envelope().msi_shift_mode

    def set(self, mode: str) -> bool:
        self.machine.set_envelope(shift_mode=mode)
        return True

    def restore_command(self, mode: str) -> str | None:
        return None

    @property
    def mode_file(self) -> tuple[Path, Path] | None:
        return None


class SysfsModes:
    """msi-ec's shift_mode where the driver is loaded, else ACPI platform_profile; written only if ``allow_write``.

    With ``allow_write`` a mode file that would not be written in place (a symbolic link, a path out of
    the sysfs root) is refused at once (ModeFileRefused), before any mode is switched."""

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
        if allow_write:
            check_mode_file(self._file, sysfs)

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
            write_mode_file(self._file, self.reader.sysfs_root, mode)
        except OSError:  # ModeFileRefused is no OSError: it stops the run with its one line
            return False
        return self.current() == mode

    def restore_command(self, mode: str) -> str | None:
        return restore_command(self._file, mode)

    @property
    def mode_file(self) -> tuple[Path, Path]:
        return self._file, self.reader.sysfs_root


def check_mode_file(path: Path, root: Path) -> None:
    """ModeFileRefused when ``path`` would not be written in place under ``root`` (``write_mode_file``'s checks)."""
    if os.path.islink(path):
        raise ModeFileRefused(f"{path} is a symbolic link (to {os.readlink(path)}): firmware mode files are "
                              "written only in place, never through a link")
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise ModeFileRefused(f"{path} resolves to {real}, outside the sysfs root {root}: not written")
    try:
        problem = refusal(path, os.lstat(path).st_mode)
    except OSError:  # missing or unreadable: the write says so (and a missing mode is never chosen)
        return
    if problem is not None:  # a FIFO would block or fail the open, a folder cannot be written
        raise ModeFileRefused(str(problem))


def restore_command(path: Path, mode: str) -> str:
    """The command a user runs to set ``mode`` in ``path`` by hand."""
    return f"echo {shlex.quote(mode)} | sudo tee {shlex.quote(str(path))} >/dev/null"


def simulated_switch(machine: SimulatedMachine, *, allow_write: bool) -> ModeSwitch:
    """The simulated laptop's modes: where ``RIGSCOPE_SYSFS_ROOT`` names a tree with msi-ec's ``shift_mode``
    (a fake one), the laptop follows that file as a real EC does and the modes are switched through it
    (``SysfsModes``, written only with ``allow_write``, as on a real laptop); else the model's own modes."""
    if os.environ.get(SYSFS_ROOT_ENV) and machine.laptop:
        reader = EnvelopeReader()
        mode_file = reader.sysfs_root / MSI_EC / "shift_mode"
        if os.path.lexists(mode_file):
            switch = SysfsModes(reader, allow_write=allow_write)
            machine.follow_mode_file(mode_file)
            return switch
    return SimulatedModes(machine)


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


#: Each run after the first starts once the GPU is back within this of the first run's start temperature...
COOL_MARGIN_C = 3.0
#: ...or once it has idled this long.
COOL_LIMIT_S = 180.0


class ModeSteps:
    """``run_modes`` one step at a time, for a caller that cannot block between runs (the Stress page's "Compare
    modes", which runs each test on the page and comes back when it is judged).

    Per mode: ``switch_next()`` (on the caller's thread: it may ask the user) sets the next mode and gives the mode
    the firmware reads, or None when the runs are over (all done, ``stop`` set, a run aborted, or the user
    declined: ``declined``); ``cool()`` idles before any run but the first (it blocks: off the GUI thread);
    ``add(judged)`` records the run. ``ask(prompt)`` returning False declines the switch; anything else goes on."""

    def __init__(self, modes: Sequence[str], switch: ModeSwitch, *, ask: Callable[[str], object],
                 cool_down: Callable[[], object] | None = None, say: Callable[[str], None] = lambda _text: None,
                 machine: str | None = None, stop: threading.Event | None = None,
                 prompt: str = "Switch the firmware to {name} ({kind} {mode}) now, then press Enter") -> None:
        self.modes = list(modes)
        #: What ``ask`` is given where Rigscope may not switch: a template of the mode's name, kind and value.
        self.prompt = prompt
        self.switch = switch
        self.ask = ask
        self.cool_down = cool_down
        self.say = say
        self.machine = machine
        self.stop = stop if stop is not None else threading.Event()
        self.runs: list[ModeRun] = []
        #: The user declined to switch when asked (the window's Cancel in its dialog).
        self.declined = False
        self._position = 0
        self._name = ""

    @property
    def over(self) -> bool:
        """No further run: every mode ran, ``stop`` is set, the user declined, or the last run was aborted."""
        return (self._position >= len(self.modes) or self.stop.is_set() or self.declined
                or bool(self.runs and self.runs[-1].result.aborted))  # the next would not be a fair comparison

    def switch_next(self) -> str | None:
        """Switch to the next mode (or ask the user to); the mode the firmware then reads, None when over."""
        if self.over:
            return None
        mode = self.modes[self._position]
        self._position += 1
        name = mode_name(self.switch.kind, mode)
        if not self.switch.set(mode) and self.ask(
                self.prompt.format(name=name, kind=self.switch.kind, mode=mode)) is False:
            self.declined = True
            return None
        actual = self.switch.current() or mode
        if actual != mode:
            self.say(f"the firmware reads {actual!r}, not {mode!r}: the run is labelled by what it reads")
        self._name = mode_name(self.switch.kind, actual)
        return actual

    @property
    def cooling_due(self) -> bool:
        """``cool()`` will idle (any mode but the first, with a ``cool_down``): the window runs it on a worker."""
        return self._position > 1 and self.cool_down is not None

    def cool(self) -> bool:
        """Idle before any run but the first (``cool_down``), then say which mode runs; False: stopped meanwhile."""
        if self.cooling_due and self.cool_down is not None:
            self.say("cooling down before the next mode…")
            self.cool_down()
            if self.stop.is_set():
                return False
        self.say(f"running {self._name}…")
        return True

    def add(self, mode: str, judged: JudgedRun) -> ModeRun:
        """Record the run of ``mode`` (the one ``switch_next`` gave) as a portable record labelled by its mode."""
        result, verdict = judged.result, judged.verdict
        name = mode_name(self.switch.kind, mode)
        record = record_from_stress(result, verdict, machine=f"{self.machine} · {name}" if self.machine else name)
        run = ModeRun(mode, name, result, verdict, record, judged.run_id, judged.save_error)
        self.runs.append(run)
        return run


def run_modes(modes: Sequence[str], switch: ModeSwitch, run_test: Callable[[str], JudgedRun], *,
              ask: Callable[[str], object], cool_down: Callable[[], object] | None = None,
              say: Callable[[str], None] = lambda _text: None, machine: str | None = None,
              stop: threading.Event | None = None) -> list[ModeRun]:
    """Run once per mode: switch (or ask), cool down, run, record (``ModeSteps``, one step after the other).
    ``run_test(mode)`` runs, judges and stores one test (the stress session's ``run_next``); this loop only sets
    the mode before each and labels it. ``stop`` set (Ctrl+C, SIGTERM) ends the loop before the next switch;
    putting the mode found back is the caller's (``mode_restore.ModeKeeper``)."""
    steps = ModeSteps(modes, switch, ask=ask, cool_down=cool_down, say=say, machine=machine, stop=stop)
    while (mode := steps.switch_next()) is not None:
        if not steps.cool():
            break
        steps.add(mode, run_test(mode))
    return steps.runs


def cool_to_start(read_temperature: Callable[[], float | None], clock: Clock,
                  stop: threading.Event | None = None) -> Callable[[], object] | None:
    """The cool-down between modes: back to within ``COOL_MARGIN_C`` of the temperature now (read before the first
    run), at most ``COOL_LIMIT_S``; None when the temperature cannot be read."""
    start = read_temperature()
    if start is None:
        return None
    return lambda: wait_cool(read_temperature, start + COOL_MARGIN_C, clock, limit_s=COOL_LIMIT_S, stop=stop)


def wait_cool(read_temperature: Callable[[], float | None], target_c: float, clock: Clock, *,
              limit_s: float = 120.0, step_s: float = 2.0, stop: threading.Event | None = None) -> float | None:
    """Idle until the GPU is at or below ``target_c``, ``limit_s`` passed or ``stop`` is set; the last temperature
    read."""
    wake = stop if stop is not None else threading.Event()
    start = clock.now()
    temperature = read_temperature()
    while (temperature is not None and temperature > target_c and clock.now() - start < limit_s
           and not wake.is_set()):
        clock.sleep(step_s, wake)
        temperature = read_temperature()
    return temperature
