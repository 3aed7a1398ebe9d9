"""The psutil host backend on this very machine (a real part, not a fake)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import psutil
import pytest

from desktop.telemetry import host as host_module
from desktop.telemetry.host import PsutilHost, end_process, swap_bytes
from desktop.telemetry.model import GpuProcess
from tests.waits import DEADLINE_S


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
        started = PsutilHost().describe([GpuProcess(pid=child.pid, gpu_index=0, name="?")])[0].started_s
        assert end_process(child.pid, started) is None
        assert child.wait(timeout=DEADLINE_S) is not None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


class _FakeProcess:
    """psutil.Process for one pid: like psutil, a second cpu_percent right after the first reads ~0."""

    calls: ClassVar[dict[int, int]] = {}

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def cpu_percent(self, interval: float | None = None) -> float:
        n = _FakeProcess.calls.get(self.pid, 0)
        _FakeProcess.calls[self.pid] = n + 1
        return 0.0 if n % 2 == 0 else 250.0  # priming (or an immediate repeat) reads 0; a later call, the real figure

    def oneshot(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    def name(self) -> str:
        return "train.py"

    def cmdline(self) -> list[str]:
        return ["python", "train.py"]

    def username(self) -> str:
        return "someone"

    def create_time(self) -> float:
        return 1_700_000_000.0


def test_a_pid_on_several_gpus_gets_its_cpu_figure_on_every_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    # A DDP job or a model split over two GPUs: NVML lists the same pid once per GPU.
    monkeypatch.setattr(host_module.psutil, "Process", _FakeProcess)
    monkeypatch.setattr(_FakeProcess, "calls", {})
    host = PsutilHost()
    entries = [GpuProcess(pid=4242, gpu_index=0, name="?"), GpuProcess(pid=4242, gpu_index=1, name="?")]
    first = host.describe(entries)
    assert [p.cpu_pct for p in first] == [None, None]  # primed once: no figure yet, for either entry
    second = host.describe(entries)
    assert [p.cpu_pct for p in second] == [250.0, 250.0]
    assert [p.gpu_index for p in second] == [0, 1] and all(p.name == "train.py" for p in second)
    assert _FakeProcess.calls[4242] == 2  # one psutil reading per pid and tick, not one per entry


def test_swap_is_read_from_meminfo_as_psutil_reads_it(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_bytes(b"MemTotal:       32768000 kB\nSwapCached:            0 kB\n"
                        b"SwapTotal:       8388604 kB\nSwapFree:        6291452 kB\n")
    assert swap_bytes(meminfo) == (8388604 * 1024, (8388604 - 6291452) * 1024)
    swap = psutil.swap_memory()
    assert swap_bytes(tmp_path / "missing") == (swap.total, swap.used)  # no file: psutil's own answer
    if Path("/proc/meminfo").exists():  # Linux: the same numbers psutil gives (its source is this file)
        total, used = swap_bytes()
        assert total == swap.total and abs(used - swap.used) <= 64 * 1024**2
