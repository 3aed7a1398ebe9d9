"""`rigscope serve` (and `rigscope export --prometheus`): sample the GPUs and serve them to Prometheus until Ctrl+C."""

from __future__ import annotations

import argparse
import threading

from desktop.cli.common import check_interval, db_path, load_settings, open_backend, start_prometheus
from desktop.exporter import run_loop
from desktop.telemetry.sampler import Sampler


def main(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    interval_s = args.interval if args.interval is not None else load_settings()[0].sampling.interval_s
    check_interval(interval_s)
    backend = open_backend(args.simulate)
    # No host backend (CPU and memory are node_exporter's job), and no process polling after the
    # first tick: process lists are NVML's slowest call and nothing here exports them.
    sampler = Sampler(backend, None, process_period_s=float("inf"))
    try:
        with start_prometheus(args.listen) as handle:
            handle.follow_stress_runs(db_path(args))
            note = " (simulated GPU)" if backend.source.simulated else ""
            print(f"Serving Prometheus metrics on {handle.url}{note}; Ctrl+C stops.", flush=True)
            try:
                run_loop(sampler.tick, handle, interval_s, stop or threading.Event())
            except KeyboardInterrupt:
                pass
    finally:
        sampler.close()
    return 0
