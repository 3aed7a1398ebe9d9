"""Whether the window records to the history database or only reads it (one writer at a time).

If no recorder service holds the database's writer lock, the GUI takes it and records;
if the service holds it, the GUI opens the database read-only and says so in the status
bar; if the database cannot be opened at all, the window still works live, unrecorded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from advisor.busy import DEFAULT_BUSY_UTIL_PCT
from desktop.config import RetentionSettings
from desktop.telemetry.envelope import EnvelopeWatch
from desktop.telemetry.limits import LimitsWatch
from desktop.telemetry.model import Snapshot

log = logging.getLogger(__name__)

Mode = Literal["recording", "reading", "off"]


@dataclass
class SettingsMaintenance:
    """The writer's periodic rollups and retention, with the retention the Settings page applied last.

    ``retention`` is replaced on the GUI thread and read on the writer thread: one reference, so
    each pass sees either the old settings or the new ones, never a mix."""

    run: Callable[..., None]
    retention: RetentionSettings
    #: The busy threshold (Settings → Advisor) the rollups count busy seconds with.
    busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT

    def __call__(self, store: Any, now_s: float) -> None:
        self.run(store, self.retention, now_s, busy_util_pct=self.busy_util_pct)


@dataclass
class Recording:
    """The outcome of ``open_recording``: a writer (when recording), a store to read, and why."""

    mode: Mode
    detail: str
    writer: Any | None = None
    store: Any | None = None
    events: list[tuple[float, str, str]] = field(default_factory=list)
    #: What the writer runs every few minutes (None when not recording).
    maintenance: SettingsMaintenance | None = None
    #: When recording began (the wall clock), for ``stalled_since``.
    started_s: float = field(default_factory=time.time)
    #: The laptop's power envelope changes, written as events beside the samples.
    envelope_watch: EnvelopeWatch = field(default_factory=EnvelopeWatch)
    #: The GPUs' enforced power limit and temperature thresholds, written as ``limits`` events when they move.
    limits_watch: LimitsWatch = field(default_factory=LimitsWatch)

    @property
    def label(self) -> str:
        return {"recording": "Recording", "reading": "Reading history (not recording)",
                "off": "Not recording"}[self.mode]

    def submit(self, snap: Snapshot) -> None:
        """Called on the sampler thread for every snapshot."""
        if self.writer is not None:
            self.writer.submit(snap)
            for time_s, kind, gpu_uuid, detail in [*self.envelope_watch.events(snap), *self.limits_watch.events(snap)]:
                self.writer.add_event(time_s, kind, gpu_uuid, detail)

    def set_retention(self, retention: RetentionSettings, busy_util_pct: float | None = None) -> None:
        """Settings applied a retention (and busy threshold): the writer's next rollup and retention pass uses it."""
        if self.maintenance is not None:
            self.maintenance.retention = retention
            if busy_util_pct is not None:
                self.maintenance.busy_util_pct = busy_util_pct

    def add_event(self, time_s: float, kind: str, message: str, gpu_uuid: str | None = None) -> None:
        """Record an alert or state change; kept in memory too, for the window's own list."""
        self.events.append((time_s, kind, message))
        target = self.writer if self.writer is not None else None
        if target is None:
            return
        try:
            target.add_event(time_s, kind, gpu_uuid, message)
        except Exception as exc:  # recording an event must never break alerting
            log.warning("could not record event %s: %s", kind, exc)

    def close(self) -> None:
        """Flush and close the writer, then the reading store; a loss at exit is said on stderr with its times."""
        for thing, method in ((self.writer, "close"), (self.store, "close")):
            if thing is not None and hasattr(thing, method):
                try:
                    getattr(thing, method)()
                except Exception as exc:
                    log.warning("closing %s failed: %s", type(thing).__name__, exc)
        status = getattr(self.writer, "status", None)
        if status is not None:
            log.info("history: %d of %d samples written (%d dropped)", status.rows_written, status.rows_submitted,
                     status.rows_dropped)
        lost = getattr(self.writer, "lost_on_close", None)
        if lost:  # the window is gone by now: the terminal (or the journal) is where it can be said
            log.error("%s", lost)
        self.writer = self.store = None


#: Samples waiting longer than this without a commit mean the writer is stuck (it commits every 5 s).
STALL_AFTER_S = 20.0


def stalled_since(status: Any, started_s: float, now_s: float) -> float | None:
    """Since when samples wait without being committed (None while they land): from the writer's status."""
    if not status.rows_pending:
        return None
    since = status.last_commit_s if status.last_commit_s is not None else started_s
    return since if now_s - since > STALL_AFTER_S else None


def open_recording(db_path: Path, record: bool = True, *, retention: RetentionSettings | None = None,
                   busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT) -> Recording:
    """Start a HistoryWriter (it takes the single-writer lock), or fall back to reading, or to nothing.

    ``retention`` (default: the defaults) is what the writer's rollup and retention passes keep
    until ``Recording.set_retention`` says otherwise."""
    try:
        from desktop.history.lock import DatabaseBusy, describe_holder
        from desktop.history.rollup import maintain
        from desktop.history.store import HistoryStore
        from desktop.history.writer import HistoryWriter
    except ImportError as exc:
        return Recording("off", f"history storage is not available ({exc})")
    writer: Any | None = None
    busy: str | None = None
    maintenance = SettingsMaintenance(maintain, retention or RetentionSettings(), busy_util_pct)
    if record and db_path.exists():
        # `rigscope demo`'s database (meta demo=1) holds a simulated week: live samples of this machine
        # would mix into it (--db demo.sqlite did). It is shown, never written.
        try:
            peek = HistoryStore.open(db_path, readonly=True)
        except Exception as exc:  # unreadable: the writer below says why, or reads nothing
            log.warning("cannot read %s: %s", db_path, exc)
        else:
            if peek.is_demo:
                return Recording("reading", f"{db_path} is a demo database (rigscope demo): this window shows it "
                                 "and records nothing into it", store=peek)
            peek.close()
    if record:
        candidate = HistoryWriter(db_path, maintain=maintenance)
        try:
            candidate.start()
            writer = candidate
        except DatabaseBusy as exc:
            busy = describe_holder(exc.holder)
        except Exception as exc:  # disk full, read-only folder, a broken file: the live view still works
            return Recording("off", f"cannot record to {db_path}: {exc}")
    store: Any | None = None
    try:
        if db_path.exists():
            store = HistoryStore.open(db_path, readonly=True)
    except Exception as exc:  # the live view works without history fill
        log.warning("cannot read history from %s: %s", db_path, exc)
    if writer is not None:
        return Recording("recording", f"writing to {db_path}", writer=writer, store=store, maintenance=maintenance)
    if busy is not None:
        if store is None:
            return Recording("off", f"the database is written by {busy} and cannot be read here")
        return Recording("reading", f"the database is written by {busy}; this window reads it", store=store)
    return Recording("reading" if store else "off", "recording switched off", store=store)
