"""A process that runs a job on its simulated GPU (tests/unit/telemetry/test_shared_sim_loads.py).

It publishes its load (GPU 0, full, 3000 MiB, as "sim-child"), says "loaded" on standard output, and stops the
load once the file named by its argument exists; then it exits (its file already removed with the load).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from desktop.telemetry.simulated import ManualLoad, SharedLoads


def main() -> None:
    stop = Path(sys.argv[1])
    load = ManualLoad(shared=SharedLoads())
    load.set(0, 1.0, vram_mib=3000.0, name="sim-child", pid=os.getpid(), command="sim-child --train")
    print("loaded", flush=True)
    deadline = time.monotonic() + 120.0
    while not stop.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    load.set(0, 0.0)


if __name__ == "__main__":
    main()
