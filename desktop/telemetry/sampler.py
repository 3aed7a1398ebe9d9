"""The sampler: one ``tick()`` reads every backend once and returns a ``Snapshot``.

Backends are chosen by ``open_gpu_backend``: real NVML when it starts, otherwise (by the caller's
choice) the labelled simulated GPU or no GPU at all, with the reason NVML could not be used.
Process lists are the slowest NVML call, so they are polled on their own period; lost GPUs are
retried on another.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Literal

from desktop.telemetry.backend import BackendUnavailable, GpuBackend, HostBackend
from desktop.telemetry.effective_load import EffectiveLoad
from desktop.telemetry.envelope import EnvelopeSource
from desktop.telemetry.model import DeviceState, GpuProcess, Snapshot
from desktop.telemetry.no_gpu import NoGpuBackend
from desktop.telemetry.simulated import SharedLoads, SimulatedBackend, parse_profile_list

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 1.0
DEFAULT_PROCESS_PERIOD_S = 5.0
DEFAULT_REINIT_PERIOD_S = 15.0
#: What stands in when NVML cannot start (``open_gpu_backend``).
Fallback = Literal["simulated", "unavailable"]


def open_gpu_backend(simulate: str | None = None, *, seed: int = 0, fallback: Fallback = "simulated") -> GpuBackend:
    """Real NVML unless ``simulate`` is given ("" = the default profile, or "a,b" profiles).

    When NVML cannot start, ``fallback`` says what stands in: "simulated" (the window, `sample`: a
    labelled simulated GPU whose ``source.fallback_reason`` says why, never written into a history) or
    "unavailable" (what records: `record`, the service, `serve`, `doctor`: no GPU, the host only, NVML
    tried again every minute; desktop/telemetry/no_gpu.py). Raises ValueError for an unknown simulated
    profile name (a user mistake). A simulated GPU is this user's one simulated machine: the loads other
    processes put on theirs add to it (desktop/telemetry/simulated/shared.py).
    """
    if simulate is not None:
        return SimulatedBackend(parse_profile_list(simulate or None), seed=seed, shared=SharedLoads())
    try:
        from desktop.telemetry.nvml import NvmlBackend

        backend: GpuBackend = NvmlBackend.open()
        return backend
    except BackendUnavailable as exc:
        if fallback == "unavailable":
            none = NoGpuBackend(str(exc))
            log.info("NVML unavailable, no GPU is read (NVML is tried again every %g s): %s", none.retry_period_s, exc)
            return none
        log.info("NVML unavailable, using the simulated GPU: %s", exc)
        return SimulatedBackend(parse_profile_list(None), seed=seed, reason=str(exc), shared=SharedLoads())


def open_host_backend() -> HostBackend:
    from desktop.telemetry.host import PsutilHost

    return PsutilHost()


class Sampler:
    """Reads the GPU and host backends; the only producer of ``Snapshot``s."""

    def __init__(
        self,
        gpu: GpuBackend,
        host: HostBackend | None = None,
        *,
        process_period_s: float = DEFAULT_PROCESS_PERIOD_S,
        reinit_period_s: float = DEFAULT_REINIT_PERIOD_S,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        effective_load: EffectiveLoad | None = None,
        envelope: EnvelopeSource | None = None,
    ) -> None:
        self.gpu = gpu
        #: Estimates each reading's effective load; ``calibrate`` it with the GPUs' stress runs.
        self.effective_load = effective_load if effective_load is not None else EffectiveLoad()
        self.host = host
        #: The laptop's power envelope: the simulated laptop's model, or sysfs every few seconds.
        self.envelope = envelope if envelope is not None else EnvelopeSource(gpu, monotonic=monotonic)
        self.process_period_s = process_period_s
        self.reinit_period_s = reinit_period_s
        self._clock = clock
        self._monotonic = monotonic
        self._processes: tuple[GpuProcess, ...] = ()
        self._processes_at: float | None = None
        self._reinit_at: float | None = None
        self._on_ac: bool | None = None

    @property
    def source(self) -> GpuBackend:
        return self.gpu

    def tick(self) -> Snapshot:
        now = self._clock()
        mono = self._monotonic()
        readings = self.effective_load.apply(self.gpu.sample(now))
        if any(r.state is DeviceState.LOST for r in readings):
            if self._reinit_at is None:
                self._reinit_at = mono
            elif mono - self._reinit_at >= self.reinit_period_s:
                self._reinit_at = mono
                self.gpu.reinit()
        else:
            self._reinit_at = None
        fresh = self._processes_at is None or mono - self._processes_at >= self.process_period_s
        if fresh:
            self._processes_at = mono
            procs = self.gpu.processes()
            if self.host is not None and not self.gpu.source.simulated:
                procs = self.host.describe(procs)
            self._processes = tuple(procs)
        host = self.host.sample() if self.host is not None else None
        on_ac = host.on_ac_power if host is not None else None
        if on_ac is not None and self._on_ac is not None and on_ac != self._on_ac:
            # AC <-> battery moves a laptop's enforced power limit: the backend reads its limits at the next tick.
            refresh = getattr(self.gpu, "refresh_limits", None)
            if callable(refresh):
                refresh()
        self._on_ac = on_ac if on_ac is not None else self._on_ac
        return Snapshot(
            time_s=now,
            monotonic_s=mono,
            source=self.gpu.source,
            gpus=tuple(readings),
            host=host,
            processes=self._processes,
            processes_fresh=fresh,
            envelope=self.envelope.read(),
        )

    def close(self) -> None:
        self.gpu.close()


def end_process(pid: int, started_s: float | None) -> str | None:
    """End a GPU process the user owns and confirmed (the UI's "End process"): ``pid`` started at ``started_s``
    (epoch s), signalled only while that PID is still that process; an error message, or None.

    The UI may not import the host backend (it reaches backends only through here), so this
    thin wrapper imports it lazily.
    """
    from desktop.telemetry.host import end_process as host_end_process

    return host_end_process(pid, started_s)
