"""The one recording tick, for `rigscope record` and the window alike (``RecordingSession`` runs it).

``Recorder.step`` samples, hands the snapshot to the HistoryWriter without waiting for the disk
(``SampleSink``: with the events it implies), feeds the exporter, starts the rollups and retention on the
writer thread every ``MAINTENANCE_PERIOD_S``, re-reads each GPU's stress-run calibration every
``CALIBRATION_RELOAD_S`` (so a stress run saved while it records recalibrates the effective-load estimate),
and says what goes wrong with the writing (and when it is over) once through ``report``. ``Recorder.run``
steps on a fixed schedule (`rigscope record`); the window's sampler thread calls ``step`` on its own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol

from advisor.busy import DEFAULT_BUSY_UTIL_PCT
from advisor.effective_load import Calibration
from desktop.config import RetentionSettings
from desktop.telemetry.envelope import EnvelopeWatch
from desktop.telemetry.limits import LimitsWatch
from desktop.telemetry.loop import run_every
from desktop.telemetry.model import Snapshot
from desktop.telemetry.no_gpu import SourceWatch, recordable

if TYPE_CHECKING:  # the window imports this before its first paint; the history layer comes with the writer
    from desktop.history.writer import HistoryWriter

log = logging.getLogger(__name__)

#: How often the rollups and retention run (the one schedule, for `rigscope record` and the window alike).
MAINTENANCE_PERIOD_S = 300.0
#: How often the stress-run calibrations are read again (a run saved by another process counts); a run saved on
#: the Stress page is read at once (``reload_calibrations``).
CALIBRATION_RELOAD_S = 300.0


class _Ticker(Protocol):
    def tick(self) -> Snapshot: ...

    def close(self) -> None: ...


class SampleSink:
    """A snapshot into the writer with the events it implies: the laptop's power envelope changes (AC,
    nvidia-powerd, firmware mode, each GPU's limit line), the GPUs' enforced power limit and temperature
    thresholds when they move, and where the GPU numbers come from (``gpu_unavailable`` with NVML's reason,
    ``gpu_available``). The recorder's and the window's recording (desktop/sessions/recording.py) alike: the one
    write path, so nothing simulated that the user did not ask for reaches a history (``recordable``)."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self._envelope = EnvelopeWatch()
        self._limits = LimitsWatch()
        self.source = SourceWatch()

    def submit(self, snapshot: Snapshot) -> None:
        events = self.source.events(snapshot)
        kept = recordable(snapshot)
        self.writer.submit(kept)
        if kept is snapshot:  # a fallback simulation's envelope and limits are the model's, not this machine's
            events += [*self._envelope.events(snapshot), *self._limits.events(snapshot)]
        for time_s, kind, gpu_uuid, detail in events:
            self.writer.add_event(time_s, kind, gpu_uuid, detail)


class Recorder:
    """The one recording tick (sample -> sink -> exporter -> maintenance -> calibration -> error report) that
    ``RecordingSession`` runs for `rigscope record` and for the window's sampler thread alike.

    ``writer`` is None when the window only reads the history (another process records) or records nothing:
    the tick then samples and keeps the calibrations current, nothing more."""

    def __init__(self, sampler: _Ticker, writer: HistoryWriter | None, *, interval_s: float = 1.0,
                 retention: RetentionSettings | None = None, maintenance_period_s: float = MAINTENANCE_PERIOD_S,
                 clock: Callable[[], float] | None = None, exporter: Any | None = None,
                 report: Callable[[str], None] = log.warning,
                 calibrate: Callable[[Mapping[str, Calibration]], None] | None = None,
                 calibration_period_s: float = CALIBRATION_RELOAD_S,
                 busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT, sink: SampleSink | None = None,
                 read_calibrations: Callable[[], Future[dict[str, Calibration]]] | None = None,
                 maintain: Callable[[Any, float], object] | None = None) -> None:
        """``sink`` (default: one of its own over ``writer``) takes each snapshot. ``report`` is told, once
        each, when writing fails and when it works again, what the writer has to say (the database file
        replaced) and when the GPU goes and comes back. ``clock`` is "now" for the two schedules (default: the
        snapshot's own time, so a passed sampler clock drives them). ``maintain(store, now_s)`` (default: the
        store's rollups and retention with ``retention``) runs on the writer thread every
        ``maintenance_period_s`` from the first step. ``calibrate`` (the sampler's
        ``effective_load.calibrate_all``) is given the stress-run calibrations every ``calibration_period_s``
        after the first step (the caller loads them once before it), read by ``read_calibrations`` (default:
        on the writer thread, through its connection)."""
        self.sampler = sampler
        self.writer = writer
        self.interval_s = interval_s
        self.retention = retention or RetentionSettings()
        #: The busy threshold (Settings → Advisor) the rollups count busy seconds with.
        self.busy_util_pct = busy_util_pct
        self.maintain = maintain
        self.maintenance_period_s = maintenance_period_s
        self.clock = clock
        self.exporter = exporter
        self.report = report
        self.ticks = 0
        self._maintained_at: float | None = None
        self._maintenance: Future[None] | None = None
        self._reported_error: str | None = None
        self._dropped_reported = 0
        self.calibrate = calibrate
        self.calibration_period_s = calibration_period_s
        self._read_calibrations = read_calibrations
        self._calibrated_at: float | None = None
        self._calibration: Future[dict[str, Calibration]] | None = None
        self.sink = sink if sink is not None or writer is None else SampleSink(writer)
        self._unrecorded: str | None = None
        #: "Now" at the last step (the schedules' clock): the last pass's "now" unless one is given.
        self.last_now: float | None = None

    def step(self) -> Snapshot:
        """One sample: read, queue for writing, feed the exporter, maybe start maintenance, keep the
        calibrations current, and say what went wrong (or right again)."""
        snapshot = self.sampler.tick()
        now = self.clock() if self.clock is not None else snapshot.time_s
        self.last_now = now
        if self.sink is not None:
            self.sink.submit(snapshot)
            self._say_source(snapshot)
        self.ticks += 1
        if self.writer is not None:
            self._say_writer()
        if self.exporter is not None:
            self.exporter.update(snapshot)
            status = self.writer.status if self.writer is not None else None
            if status is not None:
                self.exporter.set_recorder_health(
                    up=status.last_error is None, last_write_s=status.last_commit_s,
                    rows_written=status.rows_written, write_errors=status.rows_dropped)
        if self.writer is not None:
            self._maybe_maintain(now)
        if self.calibrate is not None:
            self._recalibrate(now)
        return snapshot

    def _say_writer(self) -> None:
        """The writer's notices (the database file replaced: where the samples go now), and each write problem
        once, and when it is over."""
        assert self.writer is not None
        take = getattr(self.writer, "take_notices", None)
        for notice in (take() if callable(take) else ()):
            self.report(notice)
        status = self.writer.status
        if status is None or status.last_error == self._reported_error:
            return
        if status.last_error is not None:
            self.report(status.last_error)
        else:
            self.report("writing to the history again; nothing was lost"
                        if status.rows_dropped == self._dropped_reported else
                        f"writing to the history again; {status.rows_dropped:,} samples could not be kept")
            self._dropped_reported = status.rows_dropped
        self._reported_error = status.last_error

    def _maybe_maintain(self, now: float) -> None:
        """The one maintenance schedule: rollups and retention on the writer thread, at the first step and every
        ``maintenance_period_s`` after (never two at once)."""
        assert self.writer is not None
        due = self._maintained_at is None or now - self._maintained_at >= self.maintenance_period_s
        if due and (self._maintenance is None or self._maintenance.done()):
            self._maintained_at = now
            self._maintenance = self.writer.call(self._maintenance_pass(now))
            self._maintenance.add_done_callback(_log_failure)

    def _maintenance_pass(self, now: float) -> Callable[[Any], None]:
        maintain = self.maintain

        def run(store: Any) -> None:
            if maintain is not None:
                maintain(store, now)
            else:
                store.maintain(self.retention, now, busy_util_pct=self.busy_util_pct)
        return run

    def finish(self, now: float | None = None, timeout_s: float = 60.0) -> None:
        """The last maintenance pass, at the end (a short recording still gets its complete minutes): waits for
        the one running, then runs one more at ``now`` (default: the schedules' clock, at the last step); what
        fails is logged."""
        if self.writer is None:
            return
        self.wait_maintenance(timeout_s)  # a writer stuck on its disk does not hold the window's quit for ever
        if now is None:
            now = self.clock() if self.clock is not None else self.last_now
        final = self.writer.call(self._maintenance_pass(time.time() if now is None else now))
        try:
            final.result(timeout=timeout_s)
        except Exception as exc:
            log.warning("history maintenance at exit failed: %s", exc)

    def _say_source(self, snapshot: Snapshot) -> None:
        """Say when the GPU becomes unreadable (the command's first line says it at the start) or readable again."""
        assert self.sink is not None
        unrecorded = self.sink.source.unrecorded
        if unrecorded is not None and self._unrecorded is None and self.ticks:
            self.report(f"{unrecorded}; recording the host only")
        elif unrecorded is None and self._unrecorded is not None:
            self.report(f"the GPU is back ({snapshot.source.detail}); recording it again")
        self._unrecorded = unrecorded

    def reload_calibrations(self) -> None:
        """Read the calibrations again at the next step (a stress run was just saved)."""
        if self._calibrated_at is not None:
            self._calibrated_at = float("-inf")

    def _recalibrate(self, now: float) -> None:
        """The one calibration schedule: apply calibrations read off this thread; read again when due."""
        assert self.calibrate is not None
        future = self._calibration
        if future is not None and future.done():
            self._calibration = None
            try:
                self.calibrate(future.result())
            except Exception as exc:  # a damaged or locked file: the calibrations in use stay
                log.warning("stress-run calibrations could not be read: %s", exc)
        if self._calibrated_at is None:
            self._calibrated_at = now  # the caller loaded them before the first step
        elif now - self._calibrated_at >= self.calibration_period_s and self._calibration is None:
            self._calibrated_at = now
            self._calibration = self._start_calibration_read()

    def _start_calibration_read(self) -> Future[dict[str, Calibration]]:
        if self._read_calibrations is not None:
            return self._read_calibrations()
        assert self.writer is not None, "no writer: read_calibrations is needed"
        from desktop.history.calibration import stress_calibrations

        return self.writer.call(stress_calibrations)

    def wait_calibration(self) -> None:
        """Block until the calibrations being read are read (tests; the next step applies them)."""
        future = self._calibration
        if future is not None:
            try:
                future.result()
            except Exception:
                pass  # said by the step that applies it

    def wait_maintenance(self, timeout_s: float | None = None) -> None:
        """Block until the last rollup/retention pass finished, or ``timeout_s`` passed (errors and the timeout
        are logged, not raised)."""
        future = self._maintenance
        if future is not None:
            try:
                future.result(timeout=timeout_s)
            except Exception as exc:
                log.warning("history maintenance failed: %s", exc)

    def run(self, stop: threading.Event, max_ticks: int | None = None) -> int:
        """Step every ``interval_s`` (a late step skips the slots it missed) until ``stop`` is set
        or ``max_ticks`` steps were done in all; returns the steps done in all."""
        left = None if max_ticks is None else max(0, max_ticks - self.ticks)
        if left != 0:
            run_every(self.interval_s, self.step, stop, max_ticks=left)
        return self.ticks


def _log_failure(future: Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("history maintenance (rollups, retention) failed: %s", future.exception())
