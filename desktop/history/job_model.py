"""What a job run under `rigscope run` is, as history stores it and the card and Jobs page read it.

It lives in the history layer because the store (desktop/history/jobs.py) returns it; everything
above imports it as ``desktop.jobs.model``. Shared by the wrapper (desktop/jobs/wrap.py, job.py),
the store, the job card (desktop/jobs/card.py), `rigscope jobs` and the window's Jobs page.
Telemetry over the job's span is not copied here: it is in the history's GPU samples (written by
the recorder, or by `rigscope run` itself when it holds the writer lock), read back by time range
and GPU. ``JobSeries``, the job's throughput over time, is the pure ``advisor.progress``'s: import it
from there (one import path for one type).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisor.guard import GuardAction

__all__ = ["GuardEvent", "GuardEventKind", "JobOwner", "JobRecord"]

#: What the guard did to the job (advisor.guard decides it).
GuardEventKind = GuardAction


@dataclass(frozen=True, slots=True)
class GuardEvent:
    """The thermal guard stopped (``pause``) or continued (``resume``) the job's process tree."""

    time_s: float
    kind: GuardEventKind
    temperature_c: float | None
    gpu_index: int | None = None


@dataclass(frozen=True, slots=True)
class JobOwner:
    """The `rigscope run` process that watches a job: enough to tell, later, whether it still lives.

    On its own machine and boot a pid with the same start time (clock ticks since boot, from
    ``/proc/PID/stat``) is the same process; elsewhere only its heartbeat (``JobRecord.last_seen_s``) says.
    """

    host: str
    pid: int
    #: ``/proc/sys/kernel/random/boot_id``; None where there is none (not Linux).
    boot_id: str | None = None
    #: The process's start time in clock ticks since boot; None where it cannot be read.
    start_ticks: int | None = None


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One job: what ran, when, on which GPUs, how it ended. ``job_id`` is 0 until stored."""

    job_id: int
    name: str
    argv: tuple[str, ...]
    started_s: float
    #: None while the job runs.
    ended_s: float | None = None
    #: The job's exit code; 128 + N when it died of signal N; None while it runs.
    exit_code: int | None = None
    #: Every PID seen in the job's process tree.
    pids: tuple[int, ...] = ()
    #: The GPUs its processes held memory on (from NVML's process lists), by UUID and by index.
    gpu_uuids: tuple[str, ...] = ()
    gpu_indices: tuple[int, ...] = ()
    #: Throughput unit read from the job's output ("it/s", "samples/s", "tok/s", ...), None when none was seen.
    throughput_unit: str | None = None
    #: The guard temperature (°C), None when no guard.
    guard_c: float | None = None
    #: Total seconds the guard kept the job stopped.
    paused_s: float = 0.0
    events: tuple[GuardEvent, ...] = ()
    #: "simulated" when it ran against the simulated GPU, else "nvml" (or "none": no GPU readable).
    source: str = "nvml"
    #: The job card (``JobCard.as_dict()``), once computed at the end.
    card: dict[str, Any] | None = None
    #: Who watches it (None: stored by a Rigscope before owners were recorded).
    owner: JobOwner | None = None
    #: When its `rigscope run` last said it was alive (its heartbeat, every few seconds while it runs).
    last_seen_s: float | None = None
    #: Its `rigscope run` died: a later command closed it at ``last_seen_s`` (``ended_s``), exit code unknown.
    lost: bool = False

    @property
    def duration_s(self) -> float | None:
        return None if self.ended_s is None else self.ended_s - self.started_s
