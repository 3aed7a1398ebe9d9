"""The psutil host backend on this very machine (a real part, not a fake)."""

from __future__ import annotations

import os
import subprocess
import sys

from desktop.telemetry.host import PsutilHost, end_process
from desktop.telemetry.model import GpuProcess


def test_host_sample_reads_cpu_and_memory() -> None:
    sample = PsutilHost().sample()
    assert sample.ram_total_mib is not None and sample.ram_total_mib > 100
    assert sample.ram_used_mib is not None and 0 < sample.ram_used_mib <= sample.ram_total_mib
    assert sample.cpu_pct is not None and 0.0 <= sample.cpu_pct <= 100.0
    assert len(sample.cpu_per_core_pct) == os.cpu_count()


def test_describe_fills_name_user_and_ownership_and_keeps_unknown_pids() -> None:
    host = PsutilHost()
    mine = GpuProcess(pid=os.getpid(), gpu_index=0, name="?", vram_mib=100.0)
    ghost = GpuProcess(pid=2**22 + 12345, gpu_index=0, name="from-nvml", vram_mib=50.0)
    described = host.describe([mine, ghost])
    assert described[0].name.startswith("python")
    assert described[0].own is True and described[0].started_s is not None
    assert described[1] == ghost  # another PID namespace: keep what NVML said
    again = host.describe([mine])
    assert again[0].cpu_pct is not None  # the second look gives a CPU figure


def test_end_process_ends_an_own_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert end_process(child.pid) is None
        assert child.wait(timeout=5) is not None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
