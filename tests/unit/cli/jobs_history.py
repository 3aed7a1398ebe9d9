"""Test helper: a real history database holding one finished job run under `rigscope run`, and its hand-made
telemetry, for the job card, `rigscope jobs` and the Jobs page.

The job (a laptop RTX 4090, 1 Hz samples from T0 to T0 + 180 s):
- runs from T0 + 10 to T0 + 170 (160 s); the guard paused it from T0 + 60 to T0 + 90 (30 s): 130 s running;
- utilization 100 % while running, except a 10 s data-loading stall (T0 + 140 to T0 + 150); 0 % while paused:
  busy 120 of 130 running seconds, 92.3 %;
- a steady 150 W on the energy counter (150,000 mJ a second): 160 s x 150 W = 24,000 J = 6.667 Wh;
- NVML counts 0.5 s of SW power cap in each of the 20 seconds T0 + 100 to T0 + 120: 10 s;
- VRAM 9,000 MiB, 12,000 MiB from T0 + 120 on: peak 12,000 of 16,376 MiB, 4,376 MiB headroom;
- its own throughput: 10 it/s every 5 s while it runs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from advisor.frame import StressResult
from advisor.progress import JobSeries
from desktop.history.store import HistoryStore
from desktop.jobs.model import GuardEvent, JobRecord
from desktop.telemetry.model import GpuInfo, GpuSample
from tests.unit.history.helpers import snapshot

T0 = 1_795_000_000.0
START, END = T0 + 10.0, T0 + 170.0
PAUSE = (T0 + 60.0, T0 + 90.0)
INFO = GpuInfo(index=0, uuid="GPU-lap-4090", name="NVIDIA GeForce RTX 4090 Laptop GPU", vram_total_mib=16376.0,
               power_limit_enforced_w=150.0, sm_clock_max_mhz=2040.0, temp_slowdown_c=87.0, is_laptop=True)


def _sample(t: float) -> GpuSample:
    rel = t - T0
    running = START <= t < END and not PAUSE[0] <= t < PAUSE[1]
    busy = running and not 140.0 <= rel < 150.0
    return GpuSample(
        utilization_gpu_pct=100.0 if busy else 0.0, vram_used_mib=12000.0 if rel >= 120 else 9000.0,
        temperature_c=60.0 + rel / 10.0, power_w=150.0, energy_mj=1e9 + 150_000.0 * rel,
        sm_clock_mhz=1900.0 if busy else 300.0, clock_event_reasons=0x4 if 100 <= rel < 120 else 0,
        clock_event_sw_power_cap_s=0.5 if 100 < rel <= 120 else 0.0, clock_event_sw_thermal_s=0.0,
        clock_event_hw_thermal_s=0.0, clock_event_hw_power_brake_s=0.0,
    )


def record(**changes: object) -> JobRecord:
    job = JobRecord(job_id=0, name="train.py", argv=("python", "train.py", "--epochs", "3"), started_s=START,
                    ended_s=END, exit_code=0, pids=(4242,), gpu_uuids=(INFO.uuid,), gpu_indices=(0,),
                    throughput_unit="it/s", guard_c=85.0, paused_s=30.0,
                    events=(GuardEvent(PAUSE[0], "pause", 85.2, 0), GuardEvent(PAUSE[1], "resume", 79.8, 0)))
    return dataclasses.replace(job, **changes)  # type: ignore[arg-type]


def series() -> JobSeries:
    times = np.array([t for t in np.arange(START, END, 5.0) if not PAUSE[0] <= t < PAUSE[1]])
    return JobSeries(time_s=times, throughput=np.full(len(times), 10.0))


def write_job_history(path: Path, *, job: JobRecord | None = None, stress_tflops: float | None = 60.0) -> int:
    """The database at ``path`` with the job's telemetry (and a GEMM stress result); returns the job's id."""
    with HistoryStore.open(path) as store:
        store.write_snapshots([snapshot(T0 + i, sample=_sample(T0 + i), info=INFO, host=None) for i in range(181)])
        if stress_tflops is not None:
            store.add_stress_run(StressResult(
                run_id=0, started_s=T0 - 3600.0, ended_s=T0 - 3000.0, gpu_uuid=INFO.uuid, gpu_name=INFO.name,
                workload="gemm", dtype="bf16", unit="TFLOP/s", peak_throughput=70.0,
                sustained_throughput=stress_tflops, throttled=False, errors=0, driver_version="560.35",
                summary="Held its speed.", device="cuda:0"), '{"status": "completed"}')
        job_id = store.add_job(job or record())
        store.set_job_series(job_id, series())
    return job_id
