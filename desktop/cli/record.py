"""`rigscope record`: the headless recorder with the single-writer lock, optionally serving Prometheus.

The recording itself (writer, lock, the one tick with its rollups, retention and calibrations) is
desktop/sessions/recording.py's ``RecordingSession``, as in the window; this command prints what it reports and
turns signals into its stop.

SIGTERM and SIGINT stop it cleanly: what is buffered is flushed and the exit status is 0.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
from typing import Any

from advisor.safetext import printable
from desktop.cli.common import (
    add_db,
    add_interval,
    add_listen,
    add_simulate,
    db_path,
    load_settings,
    open_backend,
    sampling_interval,
    start_prometheus,
)

HELP = "record telemetry to the history database (headless)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_interval(parser)
    add_simulate(parser)
    add_db(parser)
    parser.add_argument("--prometheus", action="store_true", help="also serve Prometheus metrics")
    add_listen(parser)


def main(args: argparse.Namespace) -> int:
    from desktop.sessions.recording import RecordingSession
    from desktop.telemetry.sampler import Sampler, open_host_backend

    settings, _problems = load_settings()
    interval_s = sampling_interval(args, settings)
    path = db_path(args)
    # With no usable driver it records the host and no GPU (never a simulated one), trying NVML again.
    backend = open_backend(args.simulate, fallback="unavailable")
    sampler = Sampler(backend, open_host_backend(), process_period_s=max(interval_s,
                                                                       settings.sampling.process_interval_s))
    session: RecordingSession | None = None
    exporter = None
    previous_handlers: dict[int, Any] = {}
    try:
        # The writer lock or an error (another process writes it: exit 2, said by the dispatcher).
        session = RecordingSession.open(path, strict=True, calibrate=sampler.effective_load.calibrate_all,
                                        retention=settings.retention, busy_util_pct=settings.advisor.busy_util_pct)
        if session.recovered_from is not None:
            print(f"rigscope record: the history database was damaged; it was moved to {session.recovered_from} "
                  "and a fresh one started", file=sys.stderr)
        if getattr(args, "prometheus", False):
            exporter = start_prometheus(args.listen)
            exporter.follow_stress_runs(path)  # the last stress verdict, as the exporter serves it
        stop = threading.Event()
        previous_handlers = _install_signals(stop)
        source = backend.source
        note = f" ({source.detail})" if source.simulated else ""
        if source.unavailable:
            note = f", the host only: {source.detail} ({printable((source.fallback_reason or '').rstrip('. '))})"
        extra = f"; Prometheus metrics on {exporter.url}" if exporter is not None else ""
        print(f"Recording to {path} every {interval_s:g} s{note}{extra}. Ctrl+C or SIGTERM stops.",
              file=sys.stderr, flush=True)
        session.record(sampler, stop, interval_s=interval_s, exporter=exporter, report=_say)
    finally:
        for sig, old in previous_handlers.items():
            signal.signal(sig, old)
        if exporter is not None:
            exporter.close()
        if session is not None:
            session.close(say_loss=False)  # said below, in the last line
        sampler.close()
    written = session.final_status.rows_written if session.final_status is not None else 0
    aside = (f" (the last of them to {printable(session.aside)}, since the database was replaced)"
             if session.aside is not None else "")
    print(f"Stopped: {written:,} samples written to {path}{aside}"
          + (f"; {printable(session.lost_on_close)}" if session.lost_on_close else ""), file=sys.stderr)
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
