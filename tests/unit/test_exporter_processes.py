"""Per-process utilization on the Prometheus page: one series per process and gauge, none where n/a, capped."""

from __future__ import annotations

import shutil
import subprocess

from prometheus_client import CollectorRegistry, generate_latest

from desktop.exporter import SnapshotCollector
from desktop.exporter.collector import MAX_PROCESSES_PER_GPU
from desktop.telemetry.model import DeviceState, GpuInfo, GpuProcess, GpuReading, GpuSample, Snapshot, SourceInfo
from tests.unit.test_exporter import scrape

INFO = GpuInfo(index=0, uuid="GPU-aaaa", name="NVIDIA GeForce RTX 4090")
OTHER = GpuInfo(index=1, uuid="GPU-bbbb", name="NVIDIA GeForce RTX 4070 Laptop GPU")


def _collector(processes: list[GpuProcess]) -> SnapshotCollector:
    collector = SnapshotCollector("rig")
    reading = GpuReading(INFO, DeviceState.OK, GpuSample(temperature_c=60.0))
    lost = GpuReading(OTHER, DeviceState.LOST, None, "gone")
    collector.update(Snapshot(time_s=1e9, monotonic_s=1.0, source=SourceInfo("nvml", "test"), gpus=(reading, lost),
                              processes=tuple(processes), processes_fresh=True))
    return collector


def test_each_process_gets_its_utilization_and_na_is_omitted() -> None:
    page = scrape(_collector([
        GpuProcess(pid=900, gpu_index=0, name="python", sm_util_pct=87.0, mem_util_pct=41.0, enc_util_pct=0.0,
                   dec_util_pct=0.0),
        GpuProcess(pid=77, gpu_index=0, name="game.exe"),  # not reported: no series at all
        GpuProcess(pid=5, gpu_index=1, name="on a lost GPU", sm_util_pct=50.0),
    ]))
    sm = page["rigscope_process_sm_util_percent"]
    assert sm == [({"gpu": "0", "UUID": "GPU-aaaa", "Hostname": "rig", "pid": "900", "process_name": "python"}, 87.0)]
    assert [v for _, v in page["rigscope_process_mem_util_percent"]] == [41.0]
    assert [v for _, v in page["rigscope_process_enc_util_percent"]] == [0.0]  # a reported 0 stays


def test_no_utilization_anywhere_means_no_family() -> None:
    page = scrape(_collector([GpuProcess(pid=77, gpu_index=0, name="game.exe")]))
    assert not [name for name in page if name.startswith("rigscope_process_")]


def test_series_per_gpu_are_capped_busiest_first() -> None:
    procs = [GpuProcess(pid=1000 + i, gpu_index=0, name="worker", sm_util_pct=float(i)) for i in range(40)]
    sm = scrape(_collector(procs))["rigscope_process_sm_util_percent"]
    assert len(sm) == MAX_PROCESSES_PER_GPU
    assert min(v for _, v in sm) == 40 - MAX_PROCESSES_PER_GPU


def test_promtool_accepts_the_page_when_installed() -> None:
    promtool = shutil.which("promtool")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_collector([GpuProcess(pid=9, gpu_index=0, name='we"ird\\name', sm_util_pct=3.0)]))
    text = generate_latest(registry)
    assert b'process_name="we\\"ird\\\\name"' in text
    if promtool is not None:
        result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, check=False)
        assert b"rigscope_process" not in result.stdout + result.stderr, result.stdout + result.stderr
