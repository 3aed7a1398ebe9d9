"""What a stress run is: its settings, its clocks, its progress updates and its result.

The vocabulary the runner (desktop.stress.runner), the CLI, the Stress page and the run's
records share; no process, thread or sampler is started here. ``SimClock`` is the injected
clock that lets a test run a ten-minute simulated test in milliseconds.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from advisor.guard import DEFAULT_GUARD_OFFSET_C
from advisor.verdict import RunTrace
from desktop.stress.devices import GpuTarget
from desktop.telemetry.model import GpuInfo
from desktop.telemetry.simulated.profiles import datasheet_boost_mhz

FloatArray = npt.NDArray[np.float64]


class Clock(Protocol):
    """Where the runner gets time from: the real clock, or an accelerated one in tests."""

    def now(self) -> float: ...

    def sleep(self, seconds: float, cancel: threading.Event) -> None: ...


class RealClock:
    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float, cancel: threading.Event) -> None:
        cancel.wait(seconds)


@dataclass
class SimClock:
    """Simulated time: ``sleep`` advances it at once (or ``real_s_per_s`` real seconds per simulated second)."""

    time_s: float = 1_790_000_000.0
    real_s_per_s: float = 0.0

    def now(self) -> float:
        return self.time_s

    def sleep(self, seconds: float, cancel: threading.Event) -> None:
        if self.real_s_per_s > 0:
            cancel.wait(seconds * self.real_s_per_s)
        if not cancel.is_set():
            self.time_s += seconds


@dataclass(frozen=True)
class StressConfig:
    """A stress run's settings. The device is one value, ``target`` (desktop.stress.devices.GpuTarget: NVML index,
    CUDA ordinal, UUID, bus id), made once by the stress session and passed down; ``device`` and ``gpu_index``
    are read-only views of it, so a config cannot name one device and watch another."""

    workload: str = "gemm"
    #: The GPU picked, as the session made it once: where its UUID is known, the runner refuses a child that
    #: landed on another GPU; a finished run's config carries the NVML GPU the runner found for the child.
    target: GpuTarget = field(default_factory=lambda: GpuTarget("sim"))
    dtype: str | None = None
    duration_s: float = 600.0
    guard_c: float | None = None
    #: Without ``guard_c``: an absolute guard (> 0) or the GPU's slowdown temperature plus this offset.
    guard_offset_c: float = DEFAULT_GUARD_OFFSET_C
    guard_absolute_c: float = 0.0
    interval_s: float = 1.0
    #: Passed to the child: GEMM N / bandwidth elements / block width (0 = sized by the child).
    size: int = 0
    threads: int = 0
    inject_faults: bool = False

    @property
    def device(self) -> str:
        """The device as the workload child, the device lock and the stored run spell it: cuda:N, cpu or sim."""
        return self.target.name

    @property
    def gpu_index(self) -> int:
        """The NVML GPU watched (the sampler, the guard, the GPU locks, the history): the simulated one for "sim"."""
        return self.target.nvml_index


@dataclass(frozen=True)
class Progress:
    """One update for a progress bar or a live chart."""

    elapsed_s: float
    duration_s: float
    throughput: float | None
    unit: str
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    power_w: float | None = None
    errors: int = 0
    checks: int = 0
    phase: str = "running"  # starting | running
    #: When this was sampled (epoch seconds, or the injected clock's time), for live charts.
    time_s: float = 0.0

    @property
    def remaining_s(self) -> float:
        return max(0.0, self.duration_s - self.elapsed_s)


@dataclass
class RunResult:
    """What happened: the status and every sample, ready for the verdict and the history."""

    status: str  # completed | cancelled | guard | crashed
    message: str
    config: StressConfig
    started_s: float
    ended_s: float
    unit: str
    dtype: str
    time_s: FloatArray
    throughput: FloatArray
    columns: dict[str, FloatArray]
    errors: int = 0
    checks: int = 0
    gpu: GpuInfo | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def aborted(self) -> bool:
        return self.status != "completed"

    def trace(self) -> RunTrace:
        gpu = self.gpu
        return RunTrace.from_columns(
            self.time_s, self.columns, throughput=self.throughput, unit=self.unit,
            sm_clock_max_mhz=gpu.sm_clock_max_mhz if gpu else None,
            sm_clock_boost_mhz=datasheet_boost_mhz(gpu.name) if gpu else None,
            power_limit_w=gpu.power_limit_enforced_w if gpu else None,
            temp_slowdown_c=gpu.temp_slowdown_c if gpu else None,
            errors=self.errors, checks=self.checks)
