"""Host readings (CPU, RAM, swap, load, CPU temperature, battery) and GPU-process details.

The only module that imports psutil. Slow sources (temperature sensors) are read on
their own period; per-process CPU % needs a remembered ``psutil.Process``, so those are
cached by pid and dropped when the process ends.
"""

from __future__ import annotations

import getpass
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import psutil

from advisor.attribution import StateLookup, container_from_cgroup, short_command
from advisor.safetext import printable
from desktop.safeio import read_bounded
from desktop.telemetry import owned
from desktop.telemetry.container_state import RuntimeStateFiles, posix_home
from desktop.telemetry.model import GpuProcess, HostSample

_MIB = 1024.0 * 1024.0
#: Linux's memory counters: psutil.swap_memory reads SwapTotal/SwapFree here, then all of /proc/vmstat for
#: the swap-in/out counters a host sample does not use (two thirds of a host sample's CPU).
MEMINFO = Path("/proc/meminfo")
#: /proc/meminfo and /proc/PID/cgroup are a few KiB; more is not the kernel's file (safeio: bounded, non-blocking).
_MAX_PROC_BYTES = 64 << 10
_CPU_TEMP_SENSORS = ("coretemp", "k10temp", "zenpower", "cpu_thermal", "acpitz")
#: Where /proc/PID/cgroup is read (Linux only: elsewhere no process runs in a cgroup we can name).
PROC_ROOT: Path | None = Path("/proc") if sys.platform.startswith("linux") else None
#: Container names from Docker's and Podman's state files (no daemon call).
RUNTIME_STATE: StateLookup = RuntimeStateFiles(home_of=posix_home)


class _Details(NamedTuple):
    name: str
    user: str | None
    cpu_pct: float | None
    started_s: float


class Attribution(NamedTuple):
    """Who a process is, read once per process (pid and start time): a reused pid is read again."""

    command: str | None
    container: str | None


def read_attribution(handle: psutil.Process, proc_root: Path | None, state_lookup: StateLookup | None) -> Attribution:
    """The shortened command line (else the image name, as Windows gives for other users' processes)
    and the container label from ``/proc/PID/cgroup``; what cannot be read is None, never an error."""
    try:
        argv: list[str] = handle.cmdline()
    except (psutil.AccessDenied, psutil.ZombieProcess, psutil.NoSuchProcess, OSError):
        argv = []
    command = short_command(argv)
    if command is None:
        try:
            command = short_command([handle.name()])
        except (psutil.Error, OSError):
            command = None
    container = None
    if proc_root is not None:
        try:
            raw = read_bounded(proc_root / str(handle.pid) / "cgroup", _MAX_PROC_BYTES, truncate=True)
            text = raw.decode("utf-8", errors="replace")
        except OSError:
            text = ""
        found = container_from_cgroup(text, state_lookup)
        container = found.label if found is not None else None
    return Attribution(command, container)


def swap_bytes(meminfo: Path = MEMINFO) -> tuple[int, int]:
    """Swap (total, used) in bytes as psutil.swap_memory gives them on Linux (used = SwapTotal - SwapFree of
    ``meminfo``), without its /proc/vmstat pass; psutil's own answer where the file has no such lines."""
    total = free = None
    try:
        for line in read_bounded(meminfo, _MAX_PROC_BYTES, truncate=True).split(b"\n"):
            if line.startswith(b"SwapTotal:"):
                total = int(line.split()[1]) * 1024
            elif line.startswith(b"SwapFree:"):
                free = int(line.split()[1]) * 1024
            if total is not None and free is not None:
                return total, total - free
    except (OSError, ValueError, IndexError):
        pass
    swap = psutil.swap_memory()
    return int(swap.total), int(swap.used)


class PsutilHost:
    """The HostBackend over psutil."""

    def __init__(self, temp_period_s: float = 5.0, monotonic: Callable[[], float] = time.monotonic, *,
                 proc_root: Path | None = PROC_ROOT, state_lookup: StateLookup | None = RUNTIME_STATE) -> None:
        self._proc_root = proc_root
        self._state_lookup = state_lookup
        self._attribution: dict[tuple[int, float], Attribution] = {}
        self._temp_period_s = temp_period_s
        self._monotonic = monotonic
        self._temp_read_at: float | None = None
        self._cpu_temp_c: float | None = None
        self._procs: dict[int, psutil.Process] = {}
        try:
            self._user: str | None = getpass.getuser()
        except (KeyError, OSError):
            self._user = None
        # Prime the CPU counters so the first real sample is not 0.0.
        psutil.cpu_percent(interval=None)
        psutil.cpu_percent(interval=None, percpu=True)

    def sample(self) -> HostSample:
        vm = psutil.virtual_memory()
        swap_total, swap_used = swap_bytes()
        try:
            freq = psutil.cpu_freq()
            freq_mhz: float | None = float(freq.current) if freq else None
        except (OSError, NotImplementedError, AttributeError):
            freq_mhz = None
        try:
            load: tuple[float | None, ...] = tuple(psutil.getloadavg())
        except (OSError, AttributeError):
            load = (None, None, None)
        battery_pct, on_ac = self._battery()
        return HostSample(
            cpu_pct=float(psutil.cpu_percent(interval=None)),
            cpu_per_core_pct=tuple(float(v) for v in psutil.cpu_percent(interval=None, percpu=True)),
            cpu_freq_mhz=freq_mhz,
            ram_used_mib=(vm.total - vm.available) / _MIB,
            ram_total_mib=vm.total / _MIB,
            swap_used_mib=swap_used / _MIB,
            swap_total_mib=swap_total / _MIB,
            load_1m=load[0],
            load_5m=load[1],
            load_15m=load[2],
            cpu_temp_c=self._cpu_temp(),
            battery_pct=battery_pct,
            on_ac_power=on_ac,
        )

    def _cpu_temp(self) -> float | None:
        now = self._monotonic()
        if self._temp_read_at is not None and now - self._temp_read_at < self._temp_period_s:
            return self._cpu_temp_c
        self._temp_read_at = now
        reader = getattr(psutil, "sensors_temperatures", None)  # absent on Windows and macOS
        self._cpu_temp_c = None
        if reader is None:
            return None
        try:
            sensors = reader()
        except (OSError, RuntimeError):
            return None
        for name in _CPU_TEMP_SENSORS:
            entries = sensors.get(name)
            if entries:
                self._cpu_temp_c = float(max(e.current for e in entries))
                break
        return self._cpu_temp_c

    @staticmethod
    def _battery() -> tuple[float | None, bool | None]:
        reader = getattr(psutil, "sensors_battery", None)
        if reader is None:
            return None, None
        try:
            battery = reader()
        except (OSError, RuntimeError):
            return None, None
        if battery is None:  # a desktop: no battery, so mains power is the only option
            return None, None
        return float(battery.percent), (bool(battery.power_plugged) if battery.power_plugged is not None else None)

    def describe(self, processes: Sequence[GpuProcess]) -> list[GpuProcess]:
        # NVML lists a pid once per GPU it holds memory on. psutil's cpu_percent is "since the
        # previous call", so it is read once per pid and tick and shared by all its entries; a
        # second call right after the first would read ~0.
        details: dict[int, _Details | None] = {}
        out = []
        for proc in processes:
            if proc.pid not in details:
                details[proc.pid] = self._details(proc.pid)
            found = details[proc.pid]
            if found is None:
                out.append(proc)  # another PID namespace (containers), just ended, or not ours to read
                continue
            who = self._attribution_of(proc.pid, found.started_s)
            out.append(replace(proc, name=found.name or proc.name, user=found.user or proc.user,
                               cpu_pct=found.cpu_pct, started_s=found.started_s,
                               own=bool(found.user and found.user == self._user),
                               command=who.command if who is not None else proc.command,
                               container=who.container if who is not None else proc.container))
        for pid in list(self._procs):
            if pid not in details:
                del self._procs[pid]
        for key in [k for k in self._attribution if k[0] not in self._procs]:
            del self._attribution[key]
        return out

    def _attribution_of(self, pid: int, started_s: float) -> Attribution | None:
        key = (pid, started_s)
        if key not in self._attribution:
            handle = self._procs.get(pid)
            if handle is None:
                return None
            self._attribution[key] = read_attribution(handle, self._proc_root, self._state_lookup)
        return self._attribution[key]

    def _details(self, pid: int) -> _Details | None:
        """Name, user, start and CPU % of one pid (None when psutil cannot read it)."""
        handle = self._procs.get(pid)
        try:
            if handle is None:
                handle = psutil.Process(pid)
                handle.cpu_percent(interval=None)  # primes; the next tick gives a real figure
                self._procs[pid] = handle
                cpu = None
            else:
                cpu = float(handle.cpu_percent(interval=None))
            with handle.oneshot():
                name = handle.name()
                try:
                    user: str | None = handle.username()
                except (psutil.AccessDenied, KeyError):
                    user = None
                started = float(handle.create_time())
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            self._procs.pop(pid, None)
            return None
        except psutil.AccessDenied:
            return None
        return _Details(name, user, cpu, started)


#: How far a process's start may differ from the one confirmed and still be that process (the boot time psutil
#: adds can move by a second with the wall clock; a PID handed out again takes a full lap of PIDs).
SAME_START_S = 0.5


def pid_running(pid: int) -> bool:
    """Whether a process ``pid`` exists (without signalling it: on Windows ``os.kill(pid, 0)`` ends it)."""
    return bool(psutil.pid_exists(pid))


def end_process(pid: int, started_s: float | None, timeout_s: float = 3.0) -> str | None:
    """Terminate the process the user confirmed, ``pid`` started at ``started_s`` (epoch s, as psutil gave it when
    the row was shown), if they own it: SIGTERM, then SIGKILL after ``timeout_s``. An error message, or None.

    The PID may have been handed to another process while the question was open: each signal goes only to a
    process whose start is the confirmed one, checked at that moment. On Linux the process is held by a pidfd
    opened before the check, so SIGTERM and the SIGKILL after it reach that process or none; elsewhere the start
    is read again just before each signal."""
    pinned: owned.Pinned | None = None
    try:
        if sys.platform.startswith("linux"):
            try:
                pinned = owned.Pinned(pid)
            except ProcessLookupError:
                return None  # it ended by itself
        proc = psutil.Process(pid)  # read after the pin: if its start is the confirmed one, the pin holds it
        refusal = _not_confirmed(proc, started_s)
        if refusal is not None:
            return refusal
        if os.name != "nt" and proc.uids().real != os.getuid():
            return f"Process {pid} belongs to another user; Rigscope only ends your own processes."
        if pinned is not None and pinned.exact:
            pinned.send(signal.SIGTERM)
            if not pinned.wait(timeout_s):
                pinned.send(signal.SIGKILL)  # through the same pidfd: the same process, or none
            return None
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except psutil.TimeoutExpired:
            refusal = _not_confirmed(psutil.Process(pid), started_s)
            if refusal is not None:
                return refusal
            proc.kill()
    except (psutil.NoSuchProcess, ProcessLookupError):
        return None
    except (psutil.AccessDenied, PermissionError):
        return f"Not allowed to end process {pid}."
    finally:
        if pinned is not None:
            pinned.close()
    return None


def _not_confirmed(proc: psutil.Process, started_s: float | None) -> str | None:
    """Why ``proc`` is not the process the user confirmed (None: it is)."""
    if started_s is None:
        return (f"Process {proc.pid}: its start time is unknown, so Rigscope cannot tell it is still the process "
                "shown; nothing was ended.")
    now = float(proc.create_time())
    if abs(now - started_s) > SAME_START_S:
        try:
            name = f" ({printable(proc.name())})"
        except psutil.Error:
            name = ""
        return (f"Process {proc.pid} is no longer the process you confirmed: it ended and its PID now belongs to "
                f"another process{name}; nothing was ended.")
    return None


# --- a wrapped job's process tree (`rigscope run`, desktop/jobs) ----------------------------


def process_tree(pid: int) -> list[int]:
    """``pid`` and every descendant still alive (empty when ``pid`` is gone)."""
    try:
        root = psutil.Process(pid)
        return [pid, *(child.pid for child in root.children(recursive=True))]
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return []
    except psutil.AccessDenied:
        return [pid]


def suspend_processes(pids: Sequence[int]) -> None:
    """Stop each process (Windows: NtSuspendProcess; POSIX: SIGSTOP); gone ones are skipped."""
    for pid in pids:
        try:
            psutil.Process(pid).suspend()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


def resume_processes(pids: Sequence[int]) -> None:
    """Continue what ``suspend_processes`` stopped."""
    for pid in pids:
        try:
            psutil.Process(pid).resume()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


class CpuUse(NamedTuple):
    """CPU seconds (summed over cores) the whole machine and one process tree had used, at one instant."""

    machine_busy_s: float
    tree_s: float
    cores: int


def cpu_use(pid: int) -> CpuUse | None:
    """The machine's busy CPU time and that of ``pid`` with its children now; None when it cannot be read."""
    try:
        times = psutil.cpu_times()
        busy = sum(float(getattr(times, name, 0.0)) for name in ("user", "nice", "system", "irq", "softirq", "steal"))
        root = psutil.Process(pid)
        tree = 0.0
        for proc in (root, *root.children(recursive=True)):
            own = proc.cpu_times()
            tree += own.user + own.system
        return CpuUse(busy, tree, psutil.cpu_count() or 1)
    except (psutil.Error, OSError):
        return None


def other_cores(before: CpuUse | None, after: CpuUse | None, wall_s: float) -> float | None:
    """Cores' worth of CPU time used by everything but the process tree between two readings (a CPU stress
    run's competition for its cores); None without both readings or any time between them."""
    if before is None or after is None or wall_s <= 0:
        return None
    others = (after.machine_busy_s - before.machine_busy_s) - (after.tree_s - before.tree_s)
    return max(0.0, others / wall_s)
