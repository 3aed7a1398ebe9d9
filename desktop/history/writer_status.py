"""What the history writer says about itself: its status (the window's status bar, the exporter's recorder-health
metric, the recording tick's reports) and the line for samples it could not write."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from desktop.telemetry.model import Snapshot


@dataclass(frozen=True)
class WriterStatus:
    """What the UI and the exporter's recorder-health metric show."""

    #: Snapshots committed since start.
    rows_written: int
    #: Snapshots waiting in memory.
    rows_pending: int
    #: The last write problem, for people (None once writes succeed again).
    last_error: str | None
    disk_full: bool
    #: Snapshots dropped because the buffer overflowed (or a batch failed for a bug).
    rows_dropped: int = 0
    last_commit_s: float | None = None
    #: Snapshots handed to ``submit`` since start (written + pending + dropped).
    rows_submitted: int = 0


def describe_loss(snapshots: list[Snapshot], reason: str | None) -> str:
    """"N samples from 12:03:04 to 12:05:10 (local time) could not be written (why) and are lost"."""
    first = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(min(s.time_s for s in snapshots)))
    last = time.strftime("%H:%M:%S", time.localtime(max(s.time_s for s in snapshots)))
    count = len(snapshots)
    noun = "sample" if count == 1 else "samples"
    return (f"{count} {noun} from {first} to {last} (local time) could not be written "
            f"({reason or 'the writer stopped first'}) and are lost")
