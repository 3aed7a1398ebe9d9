"""Whether a laptop GPU is asleep (Linux runtime power management), told from sysfs without waking it.

A GPU the driver has powered down wakes up for any NVML query that touches it, so the backend
asks this plain file first and leaves a sleeping GPU alone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from desktop.telemetry.nvml.device import NvmlDevice

#: Where Linux shows each PCI device's runtime power state; RIGSCOPE_SYSFS_ROOT moves it (tests
#: point it at a folder of their own, so that a real sleeping GPU of the machine cannot leak in).
SYSFS_ROOT_ENV: Final = "RIGSCOPE_SYSFS_ROOT"
NVIDIA_PCI_VENDOR: Final = "0x10de"
#: runtime_status values of a GPU the driver keeps asleep (runtime PM): "suspending" is on its way there.
_ASLEEP_STATES: Final = frozenset({"suspended", "suspending"})
ASLEEP_DETAIL: Final = "asleep: the driver has powered the GPU down (runtime power management); not polled"


def default_sysfs_root() -> Path:
    return Path(os.environ.get(SYSFS_ROOT_ENV) or "/sys")


def device_asleep(dev: NvmlDevice, sysfs_root: Path | None) -> bool:
    """True while the driver keeps ``dev`` asleep (runtime PM): a plain file read, no NVML call."""
    if not dev.sleep_file_resolved:
        dev.sleep_file_resolved = True
        dev.sleep_file = runtime_status_file(sysfs_root, dev.info.pci_bus_id)
    return dev.sleep_file is not None and is_asleep(dev.sleep_file)


def runtime_status_file(sysfs_root: Path | None, bus_id: str | None) -> Path | None:
    """``<root>/bus/pci/devices/0000:01:00.0/power/runtime_status`` for an NVIDIA device there, else None.

    sysfs names devices with a 4-hex-digit, lower-case domain where NVML writes 8 digits. The
    vendor check keeps a test's fake bus id (or a stale one) from reading another device's state.
    """
    if sysfs_root is None or not bus_id:
        return None
    parts = bus_id.strip().lower().split(":")
    if len(parts) != 3:
        return None
    try:
        domain = int(parts[0], 16)
    except ValueError:
        return None
    device = sysfs_root / "bus" / "pci" / "devices" / f"{domain:04x}:{parts[1]}:{parts[2]}"
    try:
        vendor = (device / "vendor").read_text().strip().lower()
    except OSError:
        return None  # no such device there (Windows, a container without /sys): never asleep
    return device / "power" / "runtime_status" if vendor == NVIDIA_PCI_VENDOR else None


def is_asleep(status_file: Path) -> bool:
    try:
        return status_file.read_text().strip() in _ASLEEP_STATES
    except OSError:
        return False
