"""No usable NVML and no simulation asked for: a GpuBackend with no GPU that tries NVML again on a slow period.

`rigscope record`, the recorder service, `serve` and `doctor` open it instead of falling back to the
simulated GPU (``open_gpu_backend(fallback="unavailable")``): a machine whose driver is missing, or
whose driver was updated underneath the loaded kernel module ("driver/library version mismatch"),
records its host (CPU, RAM) and no GPU at all, never a simulated one. Its source is "unavailable"
with NVML's reason; every ``retry_period_s`` of the sample clock passed in (the snapshots' own time)
it asks NVML again, and once NVML answers it is that NVML backend from the same sample on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from desktop.telemetry.backend import BackendUnavailable, GpuBackend
from desktop.telemetry.model import GPU_METRIC_NAMES, GpuInfo, GpuProcess, GpuReading, Snapshot, SourceInfo

log = logging.getLogger(__name__)

#: How often NVML is asked again while it is unavailable: one nvmlInit a minute costs nothing, and a
#: driver comes back at a reboot or a module reload, not within seconds. Read when a backend is made
#: (a test's child process sets it shorter before it starts the real command).
NVML_RETRY_PERIOD_S = 60.0


def _open_nvml() -> GpuBackend:
    from desktop.telemetry.nvml import NvmlBackend

    return NvmlBackend.open()


def unavailable_source(reason: str, retry_period_s: float) -> SourceInfo:
    """The source of a machine with no readable GPU: what the status line, `doctor` and the exporter say."""
    return SourceInfo(kind="unavailable",
                      detail=f"no GPU readable; NVML is tried again every {retry_period_s:g} s",
                      fallback_reason=reason)


class NoGpuBackend:
    """No GPU readings while NVML cannot be used; the NVML backend itself once it can (``current``)."""

    def __init__(self, reason: str, *, opener: Callable[[], GpuBackend] = _open_nvml,
                 retry_period_s: float | None = None, tried_at_s: float | None = None) -> None:
        """``reason``: why NVML failed just now (``BackendUnavailable``'s message); ``tried_at_s``: when, on the
        sample clock (None: the first sample counts as that try, so the next is ``retry_period_s`` later)."""
        self.retry_period_s = retry_period_s if retry_period_s is not None else NVML_RETRY_PERIOD_S
        self._opener = opener
        self._tried_at_s = tried_at_s
        self._source = unavailable_source(reason, self.retry_period_s)
        #: The NVML backend once it answered (None while it does not).
        self.current: GpuBackend | None = None

    @property
    def source(self) -> SourceInfo:
        return self.current.source if self.current is not None else self._source

    @property
    def reason(self) -> str:
        """Why NVML could not be used at the last try."""
        return self._source.fallback_reason or ""

    def devices(self) -> Sequence[GpuInfo]:
        return self.current.devices() if self.current is not None else []

    def sample(self, now_s: float) -> list[GpuReading]:
        if self.current is None and self._due(now_s):
            self._try(now_s)
        return self.current.sample(now_s) if self.current is not None else []

    def _due(self, now_s: float) -> bool:
        if self._tried_at_s is None:
            self._tried_at_s = now_s
            return False
        # A clock that went back (the machine's time was set) counts as due: never wait for it to catch up.
        return not 0 <= now_s - self._tried_at_s < self.retry_period_s

    def _try(self, now_s: float) -> None:
        self._tried_at_s = now_s
        try:
            self.current = self._opener()
        except BackendUnavailable as exc:
            if str(exc) != self.reason:
                self._source = unavailable_source(str(exc), self.retry_period_s)
            log.debug("NVML still unavailable: %s", exc)
            return
        except Exception as exc:  # a binding or driver fault nobody foresaw: the recorder goes on with the host
            log.exception("trying NVML again failed")
            self._source = unavailable_source(f"NVML could not start: {type(exc).__name__}: {exc}",
                                              self.retry_period_s)
            return
        log.info("NVML answers again: %s", self.current.source.detail)

    def processes(self) -> list[GpuProcess]:
        return self.current.processes() if self.current is not None else []

    def supported_metrics(self, index: int) -> dict[str, bool]:
        if self.current is not None:
            return self.current.supported_metrics(index)
        return dict.fromkeys(GPU_METRIC_NAMES, False)

    def reinit(self) -> None:
        if self.current is not None:
            self.current.reinit()

    def refresh_limits(self) -> None:
        refresh = getattr(self.current, "refresh_limits", None)
        if callable(refresh):
            refresh()

    def close(self) -> None:
        if self.current is not None:
            self.current.close()


# --- what a history may hold ------------------------------------------------------------------

#: A history event: (time, kind, GPU uuid, detail), as HistoryWriter.add_event takes it.
SourceEvent = tuple[float, str, str | None, str]


def recordable(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` as a history may hold it: a simulated GPU standing in for one NVML could not read (the
    window's labelled fallback, never asked for) leaves only the host; everything else is kept as it is."""
    if not snapshot.source.fallback_simulation:
        return snapshot
    return replace(snapshot, gpus=(), processes=(), processes_fresh=False, envelope=None)


class SourceWatch:
    """Where the GPU numbers come from, over successive snapshots, as history events: ``gpu_unavailable``
    (with NVML's reason) when a recording starts or goes on without a GPU, ``gpu_available`` when NVML
    answers again. ``unrecorded`` says, while it lasts, why no GPU is written (for status lines)."""

    def __init__(self) -> None:
        self._unavailable: bool | None = None
        #: Why no GPU samples are written now (None: they are).
        self.unrecorded: str | None = None

    def events(self, snapshot: Snapshot) -> list[SourceEvent]:
        source = snapshot.source
        unavailable = source.unavailable or source.fallback_simulation
        before, self._unavailable = self._unavailable, unavailable
        if unavailable:
            reason = source.fallback_reason or "NVML cannot be used"
            shown = " (the window shows a labelled simulated GPU)" if source.fallback_simulation else ""
            self.unrecorded = f"no GPU recorded{shown}: {reason}"
            return [] if before else [(snapshot.time_s, "gpu_unavailable", None, reason)]
        self.unrecorded = None
        if before:
            return [(snapshot.time_s, "gpu_available", None, f"NVML answers again: {source.detail}")]
        return []
