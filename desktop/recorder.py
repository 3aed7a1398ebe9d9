"""`rigscope record`: the headless recorder (sampler -> history writer), with the single-writer lock.

The loop samples every ``interval_s`` and hands each snapshot to the HistoryWriter without
waiting for the disk; rollups and retention run on the writer thread every few minutes.
SIGTERM and SIGINT stop it cleanly: what is buffered is flushed and the exit status is 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from desktop.config import RetentionSettings
from desktop.errors import UserError
from desktop.history.rollup import maintain
from desktop.history.writer import HistoryWriter
from desktop.telemetry.model import Snapshot

log = logging.getLogger(__name__)

MAINTENANCE_PERIOD_S = 300.0


class _Ticker(Protocol):
    def tick(self) -> Snapshot: ...

    def close(self) -> None: ...


class Recorder:
    """Samples into a started HistoryWriter; ``run`` loops until ``stop`` is set."""

    def __init__(self, sampler: _Ticker, writer: HistoryWriter, *, interval_s: float = 1.0,
                 retention: RetentionSettings | None = None, maintenance_period_s: float = MAINTENANCE_PERIOD_S,
                 clock: Callable[[], float] = time.time, exporter: Any | None = None) -> None:
        self.sampler = sampler
        self.writer = writer
        self.interval_s = interval_s
        self.retention = retention or RetentionSettings()
        self.maintenance_period_s = maintenance_period_s
        self.clock = clock
        self.exporter = exporter
        self.ticks = 0
        self._maintained_at: float | None = None
        self._maintenance: Future[None] | None = None
        self._reported_error: str | None = None
        self._dropped_reported = 0

    def step(self) -> Snapshot:
        """One sample: read, queue for writing, feed the exporter, maybe start maintenance."""
        snapshot = self.sampler.tick()
        self.writer.submit(snapshot)
        self.ticks += 1
        status = self.writer.status
        if status.last_error != self._reported_error:  # say each problem once, and when it is over
            if status.last_error is not None:
                print(f"rigscope record: {status.last_error}", file=sys.stderr)
            else:
                print("rigscope record: writing to the history again; nothing was lost"
                      if status.rows_dropped == self._dropped_reported else
                      f"rigscope record: writing to the history again; {status.rows_dropped:,} samples could not "
                      "be kept", file=sys.stderr)
                self._dropped_reported = status.rows_dropped
            self._reported_error = status.last_error
        if self.exporter is not None:
            self.exporter.update(snapshot)
            self.exporter.set_recorder_health(up=status.last_error is None, last_write_s=status.last_commit_s,
                                              rows_written=status.rows_written, write_errors=status.rows_dropped)
        now = self.clock()
        due = self._maintained_at is None or now - self._maintained_at >= self.maintenance_period_s
        if due and (self._maintenance is None or self._maintenance.done()):
            self._maintained_at = now
            self._maintenance = self.writer.call(lambda store: maintain(store, self.retention, now))
            self._maintenance.add_done_callback(_log_failure)
        return snapshot

    def wait_maintenance(self) -> None:
        """Block until the last rollup/retention pass finished (tests; errors are logged, not raised)."""
        future = self._maintenance
        if future is not None:
            try:
                future.result()
            except Exception as exc:
                log.warning("history maintenance failed: %s", exc)

    def run(self, stop: threading.Event, max_ticks: int | None = None) -> int:
        next_at = time.monotonic()
        while not stop.is_set() and (max_ticks is None or self.ticks < max_ticks):
            self.step()
            next_at += self.interval_s
            delay = next_at - time.monotonic()
            if delay < -self.interval_s:  # fell behind (suspend, slow disk): do not burst to catch up
                next_at = time.monotonic()
                delay = 0.0
            stop.wait(max(0.0, delay))
        return self.ticks


def _log_failure(future: Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("history maintenance (rollups, retention) failed: %s", future.exception())


def _install_signals(stop: threading.Event) -> dict[int, Any]:
    """SIGTERM/SIGINT (and SIGBREAK/SIGHUP where they exist) set ``stop``; returns the handlers replaced."""
    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous: dict[int, Any] = {}
    for name in ("SIGTERM", "SIGINT", "SIGBREAK", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[sig] = signal.signal(sig, handler)
    return previous


def _start_exporter(listen: str) -> Any:
    try:
        from desktop.exporter import is_loopback, start_exporter
    except ImportError as exc:
        raise UserError(f"--prometheus is not available in this build ({exc})") from exc
    handle = start_exporter(listen)
    if not is_loopback(handle.address):  # the same note `rigscope export --prometheus` gives
        print(f"Note: {handle.address} is reachable from other machines; anyone who can reach it can read "
              "these GPU metrics (there is no authentication).", file=sys.stderr, flush=True)
    return handle


def main(args: argparse.Namespace) -> int:
    from desktop import config
    from desktop.history.commands import db_path
    from desktop.telemetry.sampler import Sampler, open_gpu_backend, open_host_backend

    settings, problems = config.load()
    for key, message in problems:
        print(f"rigscope record: setting {key}: {message}", file=sys.stderr)
    interval_s = args.interval if args.interval is not None else settings.sampling.interval_s
    if not 0.05 <= interval_s <= 3600:
        raise UserError(f"--interval {interval_s}: choose between 0.05 and 3600 seconds")
    path: Path = db_path(args)
    try:
        backend = open_gpu_backend(args.simulate)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    sampler = Sampler(backend, open_host_backend(), process_period_s=max(interval_s,
                                                                       settings.sampling.process_interval_s))
    writer = HistoryWriter(path, maintenance_period_s=None)  # the Recorder schedules it on its own clock
    exporter = None
    previous_handlers: dict[int, Any] = {}
    try:
        writer.start()
        if writer.recovered_from is not None:
            print(f"rigscope record: the history database was damaged; it was moved to {writer.recovered_from} "
                  "and a fresh one started", file=sys.stderr)
        if getattr(args, "prometheus", False):
            exporter = _start_exporter(args.listen)
            if hasattr(exporter, "follow_stress_runs"):  # the last stress verdict, as the exporter serves it
                exporter.follow_stress_runs(path)
        stop = threading.Event()
        previous_handlers = _install_signals(stop)
        recorder = Recorder(sampler, writer, interval_s=interval_s, retention=settings.retention, exporter=exporter)
        source = backend.source
        note = f" ({source.detail})" if source.simulated else ""
        extra = f"; Prometheus metrics on {exporter.url}" if exporter is not None else ""
        print(f"Recording to {path} every {interval_s:g} s{note}{extra}. Ctrl+C or SIGTERM stops.",
              file=sys.stderr, flush=True)
        recorder.run(stop)
        # Roll up what was recorded before handing back (a short run still gets its complete minutes).
        recorder.wait_maintenance()
        final = writer.call(lambda store: maintain(store, settings.retention, time.time()))
        try:
            final.result(timeout=60)
        except Exception as exc:
            log.warning("history maintenance at exit failed: %s", exc)
    finally:
        for sig, old in previous_handlers.items():
            signal.signal(sig, old)
        if exporter is not None:
            exporter.close()
        writer.close()
        sampler.close()
    status = writer.status
    print(f"Stopped: {status.rows_written:,} samples written to {path}"
          + (f", {status.rows_pending:,} could not be written ({status.last_error})" if status.rows_pending else ""),
          file=sys.stderr)
    return 0
