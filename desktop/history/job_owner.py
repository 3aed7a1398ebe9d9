"""Who watches a job run under `rigscope run`: this process as a job's owner, and whether an owner still lives.

A job whose `rigscope run` died stays "running" in its row until a command that opens the history
closes it at its last heartbeat (``HistoryStore.close_orphaned_jobs``); these say when that is.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from desktop.history.job_model import JobOwner, JobRecord

#: How often a running `rigscope run` says it is alive (``heartbeat``).
HEARTBEAT_S = 5.0
#: A job watched from another machine (or where a process's start time cannot be read) counts as lost
#: once its heartbeat is this old; on its own machine a dead pid says so at once.
STALE_AFTER_S = 600.0


# --- who watches a job ------------------------------------------------------------------------


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def process_start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/PID/stat`` field 22); None: no such
    process, or no /proc. A pid reused by another process has another start time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def this_process() -> JobOwner:
    """This process as a job's owner."""
    pid = os.getpid()
    return JobOwner(host=socket.gethostname(), pid=pid, boot_id=_boot_id(), start_ticks=process_start_ticks(pid))


def owner_alive(record: JobRecord, now_s: float, *, stale_after_s: float = STALE_AFTER_S) -> bool:
    """Whether the `rigscope run` that watches ``record`` still lives: its pid and start time on this machine
    and boot; else (another machine, no /proc, a job stored before owners were) its last heartbeat."""
    owner = record.owner
    if owner is not None and owner.host == socket.gethostname() and owner.boot_id is not None:
        boot = _boot_id()
        if boot is not None and boot != owner.boot_id:
            return False  # the machine rebooted since: nothing of that boot lives
        if boot is not None and owner.start_ticks is not None:
            return process_start_ticks(owner.pid) == owner.start_ticks
    seen = record.last_seen_s if record.last_seen_s is not None else record.started_s
    return now_s - seen < stale_after_s
