"""Recording: the sample stream into the history, one writer at a time, for `rigscope record` and the window alike.

``RecordingSession`` owns the whole sequence: the history writer under the single-writer lock (or, in
the window, reading when another process holds it, or nothing when the database cannot be opened), the
one tick (desktop/recorder.py's ``Recorder.step``: sample -> sink -> exporter -> maintenance ->
calibration -> error report) with the retention the settings say, the window's own events, whether
samples land (stalled or not), and the close with the last maintenance pass and what could not be
written. ``RecordingSession.open`` is the one way in (``strict``: `rigscope record`'s, the writer or an
error); ``start`` makes the tick, which the window's sampler thread calls through ``tick`` (its timers ask
``status_text``) and ``record`` runs on a schedule for `rigscope record` (desktop/cli/record.py prints what
it reports).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from advisor.busy import DEFAULT_BUSY_UTIL_PCT
from advisor.safetext import printable
from desktop.config import RetentionSettings
from desktop.telemetry.model import Snapshot

if TYPE_CHECKING:  # imported where a writer needs them: the window's first frame does not wait for them
    from concurrent.futures import Future, ThreadPoolExecutor

    from advisor.effective_load import Calibration
    from desktop.recorder import Recorder, SampleSink

log = logging.getLogger(__name__)

Mode = Literal["recording", "reading", "off"]

#: Samples waiting longer than this without a commit mean the writer is stuck (it commits every 5 s).
STALL_AFTER_S = 20.0


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


def stalled_since(status: Any, started_s: float, now_s: float) -> float | None:
    """Since when samples wait without being committed (None while they land): from the writer's status."""
    if not status.rows_pending:
        return None
    since = status.last_commit_s if status.last_commit_s is not None else started_s
    return since if now_s - since > STALL_AFTER_S else None


def _read_only(db_path: Path) -> bool:
    """Whether ``db_path`` cannot be written for good (read-only media, a folder or a file made read-only):
    the window then reads the history instead of recording."""
    from desktop.errors import UserError
    from desktop.history.dbfile import check_writable
    from desktop.history.media import folder_unwritable

    if folder_unwritable(db_path.parent):
        return True
    try:
        check_writable(db_path)
    except UserError:
        return True
    return False


@dataclass
class RecordingSession:
    """One recording: a writer (when recording), a store to read, and why it is the one or the other."""

    mode: Mode
    detail: str
    writer: Any | None = None
    store: Any | None = None
    events: list[tuple[float, str, str]] = field(default_factory=list)
    #: The rollups and retention the writer runs, with the retention in force (None when not recording).
    maintenance: SettingsMaintenance | None = None
    #: When recording began (the wall clock), for ``stalled_since``.
    started_s: float = field(default_factory=time.time)
    #: The snapshots' way into the writer, with the envelope and limits events they imply.
    sink: SampleSink | None = None
    #: After ``close``: the writer's last status (None: there was no writer) and what it could not write.
    final_status: Any | None = field(default=None, init=False)
    lost_on_close: str | None = field(default=None, init=False)
    #: After ``close``: the file beside the database the samples went to after it was replaced (None: none).
    aside: Path | None = field(default=None, init=False)
    #: The database recorded or read (where the calibrations are read from when there is no writer).
    db_path: Path | None = None
    #: The one tick (``start`` makes it; None before).
    recorder: Recorder | None = field(default=None, init=False)
    #: Reads the calibrations when there is no writer to read them through (made when first needed).
    _reader: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)
    _finished: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.sink is None and self.writer is not None:
            from desktop.recorder import SampleSink

            self.sink = SampleSink(self.writer)

    # --- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, db_path: Path, record: bool = True, *, strict: bool = False,
             calibrate: Callable[[Mapping[str, Calibration]], None] | None = None,
             retention: RetentionSettings | None = None,
             busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT) -> RecordingSession:
        """A recording: a HistoryWriter (it takes the single-writer lock), or (the window) reading, or nothing.

        ``strict`` (`rigscope record`): the writer or an error (``DatabaseBusy``: another process writes it; a
        read-only folder: ``UserError``). ``calibrate`` (the sampler's ``effective_load.calibrate_all``) gets each
        GPU's stress-run calibration first, read before the writer holds its connection (a second descriptor
        opened and closed after it would drop the process's locks). ``retention`` (default: the defaults) is
        what the tick's rollup and retention passes keep until ``set_retention`` says otherwise."""
        if strict:
            from desktop.history.media import require_writable_folder

            require_writable_folder(db_path)  # read-only media: one line (exit 2), before the calibrations are read
        if calibrate is not None:
            from desktop.history.calibration import load_calibrations

            calibrate(load_calibrations(db_path))  # each GPU's own stress run, where one is
        if strict:
            return cls._open_writer(db_path, retention, busy_util_pct)
        session = cls._open_window(db_path, record, retention, busy_util_pct)
        session.db_path = db_path
        return session

    @classmethod
    def _open_writer(cls, db_path: Path, retention: RetentionSettings | None,
                     busy_util_pct: float) -> RecordingSession:
        from desktop.history.store import HistoryStore
        from desktop.history.writer import HistoryWriter

        writer = HistoryWriter(db_path)
        try:
            writer.start()
        except BaseException:
            writer.close()
            raise
        maintenance = SettingsMaintenance(HistoryStore.maintain, retention or RetentionSettings(), busy_util_pct)
        return cls("recording", f"writing to {db_path}", writer=writer, maintenance=maintenance, db_path=db_path)

    @classmethod
    def _open_window(cls, db_path: Path, record: bool, retention: RetentionSettings | None,
                     busy_util_pct: float) -> RecordingSession:
        """The window's: the writer, or reading (another process writes; read-only media; a demo database),
        or nothing, and why."""
        try:
            from desktop.history.lock import DatabaseBusy, describe_holder
            from desktop.history.store import HistoryStore
            from desktop.history.writer import HistoryWriter
        except ImportError as exc:
            return cls("off", f"history storage is not available ({exc})")
        writer: Any | None = None
        busy: str | None = None
        #: Why a history on read-only media (or a read-only file) is read, not recorded.
        read_only: str | None = None
        maintenance = SettingsMaintenance(HistoryStore.maintain, retention or RetentionSettings(), busy_util_pct)
        if record and db_path.exists():
            # `rigscope demo`'s database (meta demo=1) holds a simulated week: live samples of this machine
            # would mix into it (--db demo.sqlite did). It is shown, never written.
            try:
                peek = HistoryStore.open(db_path, readonly=True)
            except Exception as exc:  # unreadable: the writer below says why, or reads nothing
                log.warning("cannot read %s: %s", db_path, exc)
            else:
                if peek.is_demo:
                    return cls("reading", f"{db_path} is a demo database (rigscope demo): this window shows it "
                               "and records nothing into it", store=peek)
                peek.close()
        if record:
            candidate = HistoryWriter(db_path)
            try:
                candidate.start()
                writer = candidate
            except DatabaseBusy as exc:
                busy = describe_holder(exc.holder)
            except Exception as exc:  # disk full, read-only folder, a broken file: the live view still works
                if not _read_only(db_path):
                    return cls("off", f"cannot record to {db_path}: {exc}")
                read_only = str(exc)  # read-only media or file: the history is still read (the message says why)
        store: Any | None = None
        try:
            if db_path.exists():
                store = HistoryStore.open(db_path, readonly=True)
        except Exception as exc:  # the live view works without history fill
            log.warning("cannot read history from %s: %s", db_path, exc)
        if writer is not None:
            return cls("recording", f"writing to {db_path}", writer=writer, store=store, maintenance=maintenance)
        if read_only is not None:
            return cls("reading" if store else "off", read_only, store=store)
        if busy is not None:
            if store is None:
                return cls("off", f"the database is written by {busy} and cannot be read here")
            return cls("reading", f"the database is written by {busy}; this window reads it", store=store)
        return cls("reading" if store else "off", "recording switched off", store=store)

    # --- while it records ------------------------------------------------------------------

    @property
    def label(self) -> str:
        return {"recording": "Recording", "reading": "Reading history (not recording)",
                "off": "Not recording"}[self.mode]

    @property
    def recovered_from(self) -> Path | None:
        """Where a damaged database was moved when the writer started a fresh one (None: it was not)."""
        found = getattr(self.writer, "recovered_from", None)
        return found if isinstance(found, Path) else None

    def start(self, sampler: Any, *, interval_s: float = 1.0, exporter: Any | None = None,
              report: Callable[[str], None] = log.warning, clock: Callable[[], float] | None = None) -> Recorder:
        """Make the one tick over ``sampler`` (``tick`` calls it): the writer's sink, ``exporter``, the
        maintenance and calibration schedules on ``clock`` (default: each snapshot's time), ``report`` told
        what goes wrong with the writing and when it is over, the database file replaced, the GPU gone and
        back. Without a writer the tick samples and keeps the calibrations current."""
        from desktop.recorder import Recorder

        maintenance = self.maintenance
        self.recorder = Recorder(
            sampler, self.writer, interval_s=interval_s, exporter=exporter, report=report, clock=clock,
            calibrate=sampler.effective_load.calibrate_all, sink=self.sink, maintain=maintenance,
            read_calibrations=None if self.writer is not None else self._read_calibrations)
        return self.recorder

    def tick(self) -> Snapshot:
        """One sample through the one tick (the window's sampler thread, each interval)."""
        if self.recorder is None:
            raise RuntimeError("the recording's tick was not started (RecordingSession.start)")
        return self.recorder.step()

    def reload_calibrations(self) -> None:
        """A stress run was saved: the next tick reads the calibrations again."""
        if self.recorder is not None:
            self.recorder.reload_calibrations()

    def _read_calibrations(self) -> Future[dict[str, Calibration]]:
        """No writer to read through: the file read on a thread of its own (the window reading the history)."""
        from concurrent.futures import ThreadPoolExecutor

        from desktop.history.calibration import load_calibrations

        if self._reader is None:
            self._reader = ThreadPoolExecutor(1, thread_name_prefix="rigscope-calibration")
        path = self.db_path
        return self._reader.submit(lambda: load_calibrations(path) if path is not None else {})

    def set_retention(self, retention: RetentionSettings, busy_util_pct: float | None = None) -> None:
        """Settings applied a retention (and busy threshold): the writer's next rollup and retention pass uses it."""
        if self.maintenance is not None:
            self.maintenance.retention = retention
            if busy_util_pct is not None:
                self.maintenance.busy_util_pct = busy_util_pct

    def add_event(self, time_s: float, kind: str, message: str, gpu_uuid: str | None = None) -> None:
        """Record an alert or state change; kept in memory too, for the window's own list."""
        self.events.append((time_s, kind, message))
        if self.writer is None:
            return
        if gpu_uuid is not None and self.sink is not None and self.sink.source.unrecorded is not None:
            return  # an alert of the simulated GPU standing in for one NVML cannot read: shown, not recorded
        try:
            self.writer.add_event(time_s, kind, gpu_uuid, message)
        except Exception as exc:  # recording an event must never break alerting
            log.warning("could not record event %s: %s", kind, exc)

    def status_text(self, now_s: float) -> tuple[str, str]:
        """What the status bar says (recording, reading and who writes, off and why, or the write problem),
        and its tooltip."""
        text, tip = self.label, self.detail
        if self.mode != "recording":
            return f"{self.label}: {self.detail}", tip
        status = getattr(self.writer, "status", None)
        if status is not None and (status.last_error or status.disk_full):
            text = f"Recording problem: {status.last_error or 'disk full'}"
        elif status is not None and (stalled := stalled_since(status, self.started_s, now_s)) is not None:
            # "Recording" only while samples land: waiting ones that no commit took are said.
            text = (f"Recording problem: nothing written since {time.strftime('%H:%M:%S', time.localtime(stalled))}"
                    f" ({status.rows_pending:,} samples waiting)")
        elif self.sink is not None and (unrecorded := self.sink.source.unrecorded) is not None:
            # A simulated GPU standing in for one NVML cannot read is shown, never written into the history.
            text, tip = "Recording the host only", f"{tip}; {printable(unrecorded)}"
        return text, tip

    def record(self, sampler: Any, stop: threading.Event, *, interval_s: float, exporter: Any | None = None,
               report: Callable[[str], None] = log.warning,
               max_ticks: int | None = None, clock: Callable[[], float] | None = None) -> int:
        """Tick every ``interval_s`` until ``stop`` is set (or ``max_ticks`` samples), feeding ``exporter``;
        rollups and retention at the start, every few minutes and once more at the end (a short run still gets
        its complete minutes), on ``clock`` (default: the snapshots' time, as in the window). ``report`` is told
        when writing fails and when it works again. The samples taken."""
        if self.writer is None or self.sink is None or self.maintenance is None:
            raise RuntimeError(f"not recording: {self.detail}")
        recorder = self.start(sampler, interval_s=interval_s, exporter=exporter, report=report, clock=clock)
        ticks = recorder.run(stop, max_ticks=max_ticks)
        self.finish(clock() if clock is not None else None)
        return ticks

    def finish(self, now_s: float | None = None) -> None:
        """The last rollup and retention pass (once; ``close`` runs it when nobody did)."""
        if self._finished or self.recorder is None:
            return
        self._finished = True
        self.recorder.finish(now_s)

    # --- the end ---------------------------------------------------------------------------

    def close(self, *, say_loss: bool = True) -> None:
        """Flush and close the writer, then the reading store; a loss at exit is logged with its times (unless
        ``say_loss`` is False: the caller says it, as `rigscope record` does in its last line)."""
        try:
            self.finish()
        except Exception as exc:  # the close goes on: what is buffered is still flushed
            log.warning("history maintenance at exit failed: %s", exc)
        if self._reader is not None:
            self._reader.shutdown(wait=True, cancel_futures=True)
            self._reader = None
        for thing, method in ((self.writer, "close"), (self.store, "close")):
            if thing is not None and hasattr(thing, method):
                try:
                    getattr(thing, method)()
                except Exception as exc:
                    log.warning("closing %s failed: %s", type(thing).__name__, exc)
        status = getattr(self.writer, "status", None)
        if status is not None:
            self.final_status = status
            log.info("history: %d of %d samples written (%d dropped)", status.rows_written, status.rows_submitted,
                     status.rows_dropped)
        aside = getattr(self.writer, "aside", None)
        if isinstance(aside, Path):
            self.aside = aside
        lost = getattr(self.writer, "lost_on_close", None)
        if isinstance(lost, str):
            self.lost_on_close = lost
        if lost and say_loss:  # the window is gone by now: the terminal (or the journal) is where it can be said
            log.error("%s", lost)
        self.writer = self.store = None
        self.sink = None

