"""`rigscope serve` (and `rigscope export --prometheus`): sample the GPUs and serve them to Prometheus until Ctrl+C."""

from __future__ import annotations

import argparse
import sys
import threading

from advisor.safetext import printable
from desktop.cli.common import (
    add_db,
    add_interval,
    add_listen,
    add_simulate,
    db_path,
    open_backend,
    sampling_interval,
    start_prometheus,
)

HELP = "serve live GPU metrics for Prometheus (dcgm-exporter names) until Ctrl+C"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_listen(parser)
    add_interval(parser)
    add_simulate(parser)
    add_db(parser, "history database the last stress verdict is read from (default: the one in your data folder)")


def main(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    from desktop.exporter import run_loop
    from desktop.telemetry.sampler import Sampler

    interval_s = sampling_interval(args)
    # No driver: no GPU series at all (rigscope_gpus{state="unavailable"} 1), never a simulated GPU's.
    backend = open_backend(args.simulate, fallback="unavailable")
    # No host backend (CPU and memory are node_exporter's job), and no process polling after the
    # first tick: process lists are NVML's slowest call and nothing here exports them.
    sampler = Sampler(backend, None, process_period_s=float("inf"))
    try:
        with start_prometheus(args.listen) as handle:
            handle.follow_stress_runs(db_path(args))
            note = " (simulated GPU)" if backend.source.simulated else ""
            if backend.source.unavailable:
                note = f" (no GPU: {printable(backend.source.fallback_reason or '')}; NVML is tried again)"
            print(f"Serving Prometheus metrics on {handle.url}{note}; Ctrl+C stops.", file=sys.stderr, flush=True)
            try:
                run_loop(sampler.tick, handle, interval_s, stop or threading.Event())
            except KeyboardInterrupt:
                pass
    finally:
        sampler.close()
    return 0
