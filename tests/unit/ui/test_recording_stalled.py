"""The status bar says "Recording" only while samples land (issue 20): samples that wait past
``STALL_AFTER_S`` without a commit are a recording problem, named with the last commit's time."""

from __future__ import annotations

from desktop.history.writer_status import WriterStatus
from desktop.sessions.recording import STALL_AFTER_S, stalled_since

T0 = 1_800_000_000.0


def _status(pending: int, last_commit_s: float | None) -> WriterStatus:
    return WriterStatus(rows_written=10, rows_pending=pending, last_error=None, disk_full=False,
                        last_commit_s=last_commit_s)


def test_samples_that_land_are_not_a_stall() -> None:
    assert stalled_since(_status(0, T0), T0 - 100, T0 + 1000) is None  # nothing waits
    assert stalled_since(_status(4, T0), T0 - 100, T0 + 5) is None  # waiting for the next 5 s commit


def test_samples_waiting_past_the_limit_name_the_last_commit() -> None:
    assert stalled_since(_status(30, T0), T0 - 100, T0 + STALL_AFTER_S + 1) == T0
    # nothing ever committed: counted from when recording began
    assert stalled_since(_status(30, None), T0, T0 + STALL_AFTER_S + 1) == T0
