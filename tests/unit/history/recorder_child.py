"""A recorder child process for the SIGKILL test: records with a fake clock and reports each flush.

Usage: recorder_child.py DB BASE_TIME_S. Snapshot i is stamped BASE + i seconds; after every
flush it prints ``flushed <i>`` (every snapshot up to i is committed), so the parent knows
what must survive a SIGKILL at any later moment.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from desktop.history.writer import HistoryWriter
from desktop.recorder import Recorder
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list


def main() -> None:
    db, base = Path(sys.argv[1]), float(sys.argv[2])
    now = [base - 1.0]

    def clock() -> float:
        return now[0]

    sampler = Sampler(SimulatedBackend(parse_profile_list("rtx4090-laptop,rtx4090")), None, clock=clock,
                      monotonic=clock)
    writer = HistoryWriter(db, flush_interval_s=0.05)
    writer.start()
    recorder = Recorder(sampler, writer, interval_s=0.0, clock=clock, maintenance_period_s=20.0)
    stop = threading.Event()
    i = -1
    while not stop.is_set():
        i += 1
        now[0] = base + i
        recorder.step()
        if i % 7 == 6 and writer.flush():
            print(f"flushed {i}", flush=True)


if __name__ == "__main__":
    main()
