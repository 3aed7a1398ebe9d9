"""Read a laptop's power envelope from sysfs and /proc: AC or battery, firmware mode, nvidia-powerd.

Every source is optional: a file that is missing, unreadable or holds nonsense is None, never an
error (a desktop, a container or Windows reads nothing and gets an empty ``PowerEnvelope``).
Everything sits under ``RIGSCOPE_SYSFS_ROOT`` (default /sys) and ``RIGSCOPE_PROC_ROOT`` (default
/proc), so tests build fake trees (tests/fixtures/sysfs/<case>/). The layouts read:

- ``class/power_supply/*/{type,online,status,capacity}`` (kernel ABI sysfs-class-power: type
  Mains/USB/Battery; online 0/1, 2 for USB programmable; status Charging/Discharging/...);
- ``firmware/acpi/platform_profile`` and ``platform_profile_choices`` (sysfs-platform_profile:
  one line, choices space-separated);
- ``devices/platform/msi-ec/{shift_mode,available_shift_modes,fan_mode,available_fan_modes,
  cooler_boost,super_battery}`` and ``cpu|gpu/realtime_{temperature,fan_speed}`` (msi-ec README
  and msi-ec.c: "on"/"off", newline-separated lists, "unspecified" or "unknown (N)" for a mode it
  cannot name);
- ``class/hwmon/hwmon*/{name,temp*_label,temp*_input}`` (coretemp "Package id 0", k10temp "Tctl"),
  ``class/powercap/intel-rapl:N/{name,energy_uj,max_energy_range_uj}`` (root-only since Linux 5.10);
- ``bus/pci/devices/*/{vendor,class,boot_vga}`` for which GPU drives the display (PRIME).

nvidia-powerd is found by its process name in /proc (``/proc/PID/comm``), not by asking systemd:
a file scan needs no D-Bus, no subprocess and no timeout, works on any init system and inside
the window's sampler thread; it is done on a slow period (10 s) as it lists every process. Where
/proc hides other users' processes (``hidepid``), PID 1 is invisible and the answer is None.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from advisor.envelope import (
    CapExplanation,
    GpuLimits,
    PowerEnvelope,
    envelope_changes,
    envelope_state_text,
    explain_cap,
)
from desktop.safeio import read_bounded
from desktop.telemetry.model import GpuInfo, Snapshot

__all__ = ["PROC_ROOT_ENV", "SYSFS_ROOT_ENV", "CapExplanation", "EnvelopeReader", "EnvelopeSource", "EnvelopeWatch",
           "PowerEnvelope",
           "envelope_of", "explain_gpu", "limits_of", "read_envelope"]

SYSFS_ROOT_ENV: Final = "RIGSCOPE_SYSFS_ROOT"
PROC_ROOT_ENV: Final = "RIGSCOPE_PROC_ROOT"
UNIT_DIRS_ENV: Final = "RIGSCOPE_UNIT_DIRS"
#: Where systemd looks for installed unit files (packaged and local).
DEFAULT_UNIT_DIRS: Final = ("/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
POWERD_NAME: Final = "nvidia-powerd"
MSI_EC: Final = "devices/platform/msi-ec"
_NVIDIA_VENDOR: Final = "0x10de"
#: A sysfs value longer than this is not one of the short words these files hold.
_MAX_VALUE_CHARS: Final = 200
#: sysfs serves at most a page per attribute; nothing read here is longer.
_MAX_FILE_BYTES: Final = 4096
_POWERD_PERIOD_S: Final = 10.0
#: hwmon drivers and the label of their CPU package sensor (Intel coretemp, AMD k10temp / zenpower).
_PACKAGE_LABELS: Final[dict[str, tuple[str, ...]]] = {
    "coretemp": ("Package id 0",), "k10temp": ("Tctl", "Tdie"), "zenpower": ("Tdie", "Tctl")}


def _roots() -> tuple[Path, Path, tuple[Path, ...]]:
    sysfs = Path(os.environ.get(SYSFS_ROOT_ENV) or "/sys")
    proc = Path(os.environ.get(PROC_ROOT_ENV) or "/proc")
    units = os.environ.get(UNIT_DIRS_ENV)
    dirs = tuple(Path(d) for d in units.split(os.pathsep) if d) if units else tuple(Path(d) for d in DEFAULT_UNIT_DIRS)
    return sysfs, proc, dirs


def _text(path: Path) -> str | None:
    """A sysfs file's first line, stripped; None when missing or unreadable. Bytes kept (surrogateescape)."""
    try:  # never blocks (a FIFO planted in the tree), never reads more than a page (/dev/zero)
        raw = read_bounded(path, _MAX_FILE_BYTES, truncate=True)
    except OSError:
        return None
    if b"\0" in raw:  # no sysfs word holds a NUL: a sparse or binary file in the tree
        return None
    text = raw.decode("utf-8", errors="surrogateescape").strip()
    return text[:_MAX_VALUE_CHARS] if text else None


def _lines(path: Path) -> tuple[str, ...]:
    try:
        raw = read_bounded(path, _MAX_FILE_BYTES, truncate=True)
    except OSError:
        return ()
    if b"\0" in raw:
        return ()
    return tuple(word[:_MAX_VALUE_CHARS] for word in raw.decode("utf-8", errors="surrogateescape").split() if word)


def _number(path: Path) -> float | None:
    text = _text(path)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _percent(path: Path) -> float | None:
    """A percentage, None outside 0..100 (a fan speed of 1e308 % is a broken file, not a reading)."""
    value = _number(path)
    return value if value is not None and 0.0 <= value <= 100.0 else None


def _on_off(path: Path) -> bool | None:
    text = _text(path)
    return {"on": True, "off": False}.get(text) if text is not None else None


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []


def power_supplies(sysfs: Path) -> tuple[bool | None, float | None, str | None]:
    """(on AC, battery %, battery status) from class/power_supply.

    A Mains or USB supply that is online means AC (USB-C chargers are type USB, online 1 or 2);
    supplies that all say offline mean battery. A machine with only a battery is told by its status.
    """
    on_ac: bool | None = None
    battery_pct: float | None = None
    status: str | None = None
    for supply in _children(sysfs / "class" / "power_supply"):
        kind = _text(supply / "type")
        if kind in ("Mains", "USB"):
            online = _number(supply / "online")
            if online in (1.0, 2.0):  # the ABI's values: 0 offline, 1 online, 2 USB programmable
                on_ac = True
            elif online == 0.0:
                on_ac = on_ac or False
        elif kind == "Battery" and battery_pct is None:
            if _text(supply / "present") == "0":
                continue
            capacity = _number(supply / "capacity")
            battery_pct = capacity if capacity is not None and 0 <= capacity <= 100 else None
            status = _text(supply / "status")
    if on_ac is None and status is not None:
        on_ac = {"Discharging": False, "Charging": True, "Full": True}.get(status)
    return on_ac, battery_pct, status


def _hwmon_package_temp_c(sysfs: Path) -> float | None:
    for hwmon in _children(sysfs / "class" / "hwmon"):
        name = _text(hwmon / "name")
        wanted = _PACKAGE_LABELS.get(name or "")
        if wanted is None:
            continue
        for label_file in sorted(hwmon.glob("temp*_label")):
            if _text(label_file) in wanted:
                value = _number(label_file.with_name(label_file.name.replace("_label", "_input")))
                if value is not None and 0 < value < 150_000:
                    return value / 1000.0
    return None


def _rapl_energy_uj(sysfs: Path) -> tuple[float, float] | None:
    """(package energy µJ summed over packages, wrap range µJ), or None (no RAPL, or root only)."""
    total = 0.0
    wrap = 0.0
    found = False
    for zone in _children(sysfs / "class" / "powercap"):
        if not zone.name.startswith("intel-rapl:") or zone.name.count(":") != 1:
            continue  # intel-rapl:0:0 and deeper are sub-zones (core, uncore, dram) of a package
        if not (_text(zone / "name") or "").startswith("package"):
            continue
        energy = _number(zone / "energy_uj")
        if energy is None:
            return None
        total += energy
        wrap += _number(zone / "max_energy_range_uj") or 0.0
        found = True
    return (total, wrap) if found else None


def gpu_display(sysfs: Path) -> str | None:
    """"display" when an NVIDIA GPU is the boot display device, "offload" when another GPU is, else None."""
    nvidia_boot: list[bool] = []
    other_boot = False
    for device in _children(sysfs / "bus" / "pci" / "devices"):
        klass = _text(device / "class") or ""
        if not klass.startswith("0x03"):  # display controllers only
            continue
        boot = _text(device / "boot_vga")
        if boot is None:
            continue
        if (_text(device / "vendor") or "").lower() == _NVIDIA_VENDOR:
            nvidia_boot.append(boot == "1")
        elif boot == "1":
            other_boot = True
    if any(nvidia_boot):
        return "display"
    if nvidia_boot and other_boot:
        return "offload"
    return None


def powerd_running(proc: Path) -> bool | None:
    """Whether a process named nvidia-powerd runs; None where /proc shows no PID 1 (absent, hidepid)."""
    if _text(proc / "1" / "comm") is None:
        return None
    return any(entry.name.isdigit() and _text(entry / "comm") == POWERD_NAME for entry in _children(proc))


def powerd_installed(unit_dirs: Sequence[Path]) -> bool | None:
    if not unit_dirs:
        return None
    return any((folder / f"{POWERD_NAME}.service").exists() for folder in unit_dirs)


class EnvelopeReader:
    """Reads the envelope; remembers RAPL's last energy (power needs two reads) and scans /proc slowly."""

    def __init__(self, sysfs_root: Path | None = None, proc_root: Path | None = None,
                 unit_dirs: Sequence[Path] | None = None, *, monotonic: Callable[[], float] = time.monotonic,
                 powerd_period_s: float = _POWERD_PERIOD_S) -> None:
        sysfs, proc, units = _roots()
        self.sysfs_root = sysfs_root if sysfs_root is not None else sysfs
        self.proc_root = proc_root if proc_root is not None else proc
        self.unit_dirs = tuple(unit_dirs) if unit_dirs is not None else units
        self._monotonic = monotonic
        self._powerd_period_s = powerd_period_s
        self._powerd: tuple[float, bool | None] | None = None
        self._rapl: tuple[float, float] | None = None

    def read(self) -> PowerEnvelope:
        sysfs = self.sysfs_root
        now = self._monotonic()
        on_ac, battery_pct, status = power_supplies(sysfs)
        acpi = sysfs / "firmware" / "acpi"
        ec = sysfs / MSI_EC
        if self._powerd is None or now - self._powerd[0] >= self._powerd_period_s:
            self._powerd = (now, powerd_running(self.proc_root))
        package_temp = _hwmon_package_temp_c(sysfs)
        if package_temp is None:
            ec_temp = _number(ec / "cpu" / "realtime_temperature")
            package_temp = ec_temp if ec_temp is not None and 0 < ec_temp <= 110 else None
        return PowerEnvelope(
            on_ac=on_ac,
            battery_pct=battery_pct,
            battery_status=status,
            platform_profile=_text(acpi / "platform_profile"),
            platform_profile_choices=_lines(acpi / "platform_profile_choices"),
            platform_profile_writable=os.access(acpi / "platform_profile", os.W_OK),
            msi_shift_mode=_text(ec / "shift_mode"),
            msi_shift_modes=_lines(ec / "available_shift_modes"),
            msi_shift_mode_writable=os.access(ec / "shift_mode", os.W_OK),
            msi_fan_mode=_text(ec / "fan_mode"),
            msi_fan_modes=_lines(ec / "available_fan_modes"),
            msi_cooler_boost=_on_off(ec / "cooler_boost"),
            msi_super_battery=_on_off(ec / "super_battery"),
            cpu_fan_pct=_percent(ec / "cpu" / "realtime_fan_speed"),
            gpu_fan_pct=_percent(ec / "gpu" / "realtime_fan_speed"),
            cpu_package_temp_c=package_temp,
            cpu_package_power_w=self._rapl_power_w(now),
            powerd_running=self._powerd[1],
            powerd_installed=powerd_installed(self.unit_dirs),
            gpu_display=gpu_display(sysfs),
        )

    def _rapl_power_w(self, now: float) -> float | None:
        energy = _rapl_energy_uj(self.sysfs_root)
        before, self._rapl = self._rapl, (now, energy[0]) if energy is not None else None
        if energy is None or before is None or now <= before[0]:
            return None
        delta = energy[0] - before[1]
        if delta < 0:  # the counter wrapped
            delta += energy[1]
        power = delta / 1e6 / (now - before[0])
        return power if 0 <= power < 2000 else None


def read_envelope(reader: EnvelopeReader | None = None, *, wait_s: float = 0.25,
                  sleep: Callable[[float], None] = time.sleep) -> PowerEnvelope:
    """One settled reading for a one-shot command (`doctor`): where RAPL's energy is readable, a
    second read ``wait_s`` later gives the CPU package power."""
    reader = reader or EnvelopeReader()
    first = reader.read()
    if _rapl_energy_uj(reader.sysfs_root) is None:
        return first
    sleep(wait_s)
    return reader.read()


def envelope_of(backend: object, reader: EnvelopeReader | None = None) -> PowerEnvelope:
    """The simulated laptop's modelled envelope, else one settled sysfs reading."""
    modelled = getattr(backend, "power_envelope", None)
    if callable(modelled):
        result = modelled()
        if isinstance(result, PowerEnvelope):
            return result
    return read_envelope(reader)


def limits_of(info: GpuInfo) -> GpuLimits:
    """The GPU's limits as its info carries them (re-read on the backend's slow period)."""
    return GpuLimits(name=info.name, enforced_w=info.power_limit_enforced_w, default_w=info.power_limit_default_w,
                     min_w=info.power_limit_min_w, max_w=info.power_limit_max_w, is_laptop=info.is_laptop)


def explain_gpu(info: GpuInfo, envelope: PowerEnvelope | None) -> CapExplanation:
    """The one line for this GPU's limit (advisor.envelope.explain_cap on its info)."""
    return explain_cap(envelope, limits_of(info))


class EnvelopeSource:
    """Where a process gets the envelope: the simulated laptop's model, or sysfs on a slow period.

    ``read()`` answers the cached envelope between periods, so the sampler may call it each tick.
    """

    def __init__(self, backend: object, reader: EnvelopeReader | None = None, *, period_s: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        modelled = getattr(backend, "power_envelope", None)
        self._modelled: Callable[[], PowerEnvelope] | None = modelled if callable(modelled) else None
        self._reader = reader if reader is not None or self._modelled is not None else EnvelopeReader()
        self._period_s = period_s
        self._monotonic = monotonic
        self._last: tuple[float, PowerEnvelope] | None = None

    def read(self) -> PowerEnvelope:
        if self._modelled is not None:
            return self._modelled()  # a dataclass built from the model's state: cheap, and changes at once
        now = self._monotonic()
        if self._last is None or now - self._last[0] >= self._period_s:
            assert self._reader is not None
            self._last = (now, self._reader.read())
        return self._last[1]


#: A history event: (time, kind, GPU uuid or None, detail), as HistoryWriter.add_event takes it.
EnvelopeEvent = tuple[float, str, str | None, str]


class EnvelopeWatch:
    """Turns the envelope of successive snapshots into history events (the recorder and the window call it).

    Kinds: ``envelope.state`` once at the start (the whole state, as the rules need a starting point),
    ``envelope.ac`` / ``envelope.powerd`` / ``envelope.mode`` / ``envelope.cooler_boost`` when one changes,
    and per GPU ``envelope.limit`` with the one line whenever it changes (the advisor reads its cause back).
    """

    def __init__(self) -> None:
        self._last: PowerEnvelope | None = None
        self._lines: dict[str, str] = {}

    def events(self, snapshot: Snapshot) -> list[EnvelopeEvent]:
        envelope = snapshot.envelope
        if envelope is None:
            return []
        now = snapshot.time_s
        out: list[EnvelopeEvent] = []
        if self._last is None:
            if envelope.any_source:
                out.append((now, "envelope.state", None, envelope_state_text(envelope)))
        else:
            out.extend((now, f"envelope.{what}", None, text) for what, text in envelope_changes(self._last, envelope))
        self._last = envelope
        for reading in snapshot.gpus:
            info = reading.info
            if info.power_limit_enforced_w is None or not info.uuid:
                continue
            line = explain_gpu(info, envelope).line
            if self._lines.get(info.uuid) != line:
                self._lines[info.uuid] = line
                out.append((now, "envelope.limit", info.uuid, line))
        return out
