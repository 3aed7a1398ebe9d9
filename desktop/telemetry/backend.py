"""The contract between the sampler and the GPU/host backends (NVML, simulated, psutil)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from desktop.telemetry.model import GpuInfo, GpuProcess, GpuReading, HostSample, SourceInfo


class BackendUnavailable(Exception):
    """A backend cannot start here (no driver, no library); the message says why, for users."""


class GpuBackend(Protocol):
    """A source of GPU readings. Implementations never let a driver error escape ``sample``."""

    @property
    def source(self) -> SourceInfo: ...

    def devices(self) -> Sequence[GpuInfo]:
        """Static info of every GPU, in index order (read once, refreshed by ``reinit``)."""
        ...

    def sample(self, now_s: float) -> list[GpuReading]:
        """Read every GPU once. A GPU that fails comes back with state LOST, the rest as usual."""
        ...

    def processes(self) -> list[GpuProcess]:
        """Processes holding GPU memory (pid, GPU, VRAM); names and users are filled by the host."""
        ...

    def supported_metrics(self, index: int) -> dict[str, bool]:
        """For `doctor`: which GpuSample fields this GPU answers."""
        ...

    def reinit(self) -> None:
        """Try to bring lost GPUs back (re-open handles, re-read static info)."""
        ...

    def close(self) -> None: ...


class HostBackend(Protocol):
    """A source of host readings (CPU, RAM, battery) and process details."""

    def sample(self) -> HostSample: ...

    def describe(self, processes: Sequence[GpuProcess]) -> list[GpuProcess]:
        """Fill name, user, CPU %, start time and ownership of GPU processes."""
        ...
