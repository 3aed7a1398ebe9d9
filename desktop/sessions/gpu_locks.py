"""The stress test's device locks: one test per device at a time, whether started in the window or a terminal.

A second run on a device would measure the first's load (and both would become baselines). Each lock
is an OS file lock in the data folder (``history.lock.FileLock``: it dies with its process, and its
holder writes who it is, so a refusal names it). Only the stress session takes them; the history's
single-writer lock stays in ``desktop/history/lock.py``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from desktop.errors import UserError
from desktop.history.lock import FileLock, describe_holder, read_holder
from desktop.paths import data_dir
from desktop.telemetry.model import GpuInfo

log = logging.getLogger(__name__)


class DeviceBusy(UserError):
    """Another stress test runs on this device; ``holder`` is what it wrote about itself."""

    def __init__(self, device: str, holder: dict[str, Any] | None) -> None:
        self.device = device
        self.holder = holder or {}
        super().__init__(f"a stress test is already running on {device} in {describe_holder(self.holder)}; "
                         "wait for it to finish (or stop it) first: two runs on one device would measure "
                         "each other")


class DeviceLock(FileLock):
    """One stress test per device at a time: an OS file lock ``stress-<device>.lock`` in the data folder.

    Keyed by the device as given (``cuda:0``, ``cpu``, ``sim``): it is taken before the workload
    starts, when which NVML GPU ``cuda:N`` is cannot be known yet. Once it is, ``gpu_lock`` takes a
    second one keyed by the GPU's UUID, so two shells whose ``CUDA_VISIBLE_DEVICES`` make different
    ``cuda:N`` of one GPU are told apart. Like the writer lock it dies with its process.
    """

    def __init__(self, device: str, folder: Path | None = None, *, label: str | None = None) -> None:
        self.device = label or device
        key = re.sub(r"[^A-Za-z0-9_.-]", "-", device) or "device"
        super().__init__((folder if folder is not None else data_dir()) / f"stress-{key}.lock")

    def _busy(self) -> UserError:
        return DeviceBusy(self.device, read_holder(self.lock_path))


def gpu_lock(uuid: str, name: str, folder: Path | None = None) -> DeviceLock:
    """The stress lock of one NVML GPU, by its UUID (named in a refusal by the GPU's name)."""
    return DeviceLock(f"gpu-{uuid}", folder, label=f"{name} ({uuid})")


class GpuClaims:
    """The GPU locks a stress run takes once it knows its NVML GPU (``StressRunner.claim``);
    ``release`` lets them go when the run ends. A lock another run holds is DeviceBusy; one that
    cannot be made (an unwritable data folder) is skipped, as the device lock is."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder
        self.held: list[DeviceLock] = []

    def claim(self, info: GpuInfo) -> None:
        lock = gpu_lock(info.uuid, info.name, self.folder)
        try:
            lock.acquire()
        except OSError as exc:
            log.info("cannot create the GPU lock %s (%s): the run goes on without it", lock.lock_path, exc)
            return
        self.held.append(lock)

    def release(self) -> None:
        held, self.held = self.held, []
        for lock in held:
            lock.release()
