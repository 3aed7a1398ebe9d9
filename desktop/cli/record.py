"""`rigscope record`: the headless recorder with the single-writer lock, optionally serving Prometheus.

SIGTERM and SIGINT stop it cleanly: what is buffered is flushed and the exit status is 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

from advisor.safetext import printable
from desktop.cli.common import check_interval, db_path, load_settings, open_backend, start_prometheus
from desktop.history.calibration import load_calibrations
from desktop.history.rollup import maintain
from desktop.history.writer import HistoryWriter
from desktop.recorder import Recorder
from desktop.telemetry.sampler import Sampler, open_host_backend

log = logging.getLogger(__name__)


def main(args: argparse.Namespace) -> int:
    settings, _problems = load_settings()
    interval_s = args.interval if args.interval is not None else settings.sampling.interval_s
    check_interval(interval_s)
    path = db_path(args)
    backend = open_backend(args.simulate)
    sampler = Sampler(backend, open_host_backend(), process_period_s=max(interval_s,
                                                                       settings.sampling.process_interval_s))
    sampler.effective_load.calibrate_all(load_calibrations(path))  # each GPU's own stress run, where one exists
    writer = HistoryWriter(path, maintenance_period_s=None)  # the Recorder schedules it on its own clock
    exporter = None
    previous_handlers: dict[int, Any] = {}
    try:
        writer.start()
        if writer.recovered_from is not None:
            print(f"rigscope record: the history database was damaged; it was moved to {writer.recovered_from} "
                  "and a fresh one started", file=sys.stderr)
        if getattr(args, "prometheus", False):
            exporter = start_prometheus(args.listen)
            exporter.follow_stress_runs(path)  # the last stress verdict, as the exporter serves it
        stop = threading.Event()
        previous_handlers = _install_signals(stop)
        # It re-reads the calibrations every 300 s, as the window does: a stress run saved meanwhile counts.
        recorder = Recorder(sampler, writer, interval_s=interval_s, retention=settings.retention, exporter=exporter,
                            report=_say, calibrate=sampler.effective_load.calibrate_all,
                            busy_util_pct=settings.advisor.busy_util_pct)
        source = backend.source
        note = f" ({source.detail})" if source.simulated else ""
        extra = f"; Prometheus metrics on {exporter.url}" if exporter is not None else ""
        print(f"Recording to {path} every {interval_s:g} s{note}{extra}. Ctrl+C or SIGTERM stops.",
              file=sys.stderr, flush=True)
        recorder.run(stop)
        # Roll up what was recorded before handing back (a short run still gets its complete minutes).
        recorder.wait_maintenance()
        final = writer.call(lambda store: maintain(store, settings.retention, time.time(),
                                                     busy_util_pct=settings.advisor.busy_util_pct))
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
          + (f"; {printable(writer.lost_on_close)}" if writer.lost_on_close else ""), file=sys.stderr)
    return 0


def _say(message: str) -> None:
    print(f"rigscope record: {message}", file=sys.stderr)


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
