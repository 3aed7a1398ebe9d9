"""The job's throttle verdict on its own throughput: a job whose reported rate cycles (a data loader that
stalls every 40 s, reported per interval rather than as tqdm's smoothed rate) is not "throttled"; a job whose
rate really falls while the GPU is held back is."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from advisor.progress import JobSeries
from desktop.history.store import HistoryStore
from desktop.jobs.card import job_frame, job_verdict
from desktop.jobs.model import JobRecord
from desktop.telemetry.model import GpuInfo, GpuSample
from tests.unit.history.helpers import snapshot

T0 = 1_795_000_000.0
SPAN_S = 1200
INFO = GpuInfo(index=0, uuid="GPU-lap-4090", name="NVIDIA GeForce RTX 4090 Laptop GPU", vram_total_mib=16376.0,
               power_limit_enforced_w=150.0, sm_clock_max_mhz=2040.0, temp_slowdown_c=87.0, is_laptop=True)


def _verdict(tmp_path: Path, clock_mhz: object, reasons: object, rates: np.ndarray) -> str:
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        snaps = []
        for i in range(SPAN_S + 1):
            sample = GpuSample(utilization_gpu_pct=97.0, vram_used_mib=9000.0, temperature_c=75.0, power_w=120.0,
                               sm_clock_mhz=clock_mhz(i), clock_event_reasons=reasons(i),  # type: ignore[operator]
                               clock_event_sw_power_cap_s=0.0, clock_event_sw_thermal_s=0.0,
                               clock_event_hw_thermal_s=1.0 if reasons(i) else 0.0,  # type: ignore[operator]
                               clock_event_hw_power_brake_s=0.0)
            snaps.append(snapshot(T0 + i, sample=sample, info=INFO, host=None))
        store.write_snapshots(snaps)
        record = JobRecord(job_id=0, name="train.py", argv=("python", "train.py"), started_s=T0, ended_s=T0 + SPAN_S,
                           exit_code=0, gpu_uuids=(INFO.uuid,), gpu_indices=(0,), throughput_unit="it/s")
        frame = job_frame(store, record, T0 + SPAN_S)
    times = T0 + np.arange(0.0, SPAN_S, 5.0)
    return job_verdict(record, JobSeries(time_s=times, throughput=rates), frame.gpus[0], start_s=T0,
                       end_s=T0 + SPAN_S, pauses=())


def test_a_rate_that_cycles_with_the_data_loader_is_not_a_slowdown(tmp_path: Path) -> None:
    # Reported every 5 s: 22 s of 9.5 it/s, then 18 s of 4 it/s (waiting on the loader), the whole job long.
    times = np.arange(0.0, SPAN_S, 5.0)
    rates = np.where(times % 40 < 22, 9.5, 4.0)
    verdict = _verdict(tmp_path, lambda i: 1900.0, lambda i: 0, rates)
    assert "throttled" not in verdict.lower() and "slowdown" not in verdict.lower(), verdict


def test_a_rate_that_falls_while_the_gpu_is_held_back_is_throttled(tmp_path: Path) -> None:
    times = np.arange(0.0, SPAN_S, 5.0)
    rates = np.where(times < 480, 10.0, 8.0)  # 20 % slower from 8 min on, with the clock cut by HW thermal
    verdict = _verdict(tmp_path, lambda i: 1900.0 if i < 480 else 1500.0, lambda i: 0x40 if i >= 480 else 0, rates)
    assert verdict.lower().startswith("throttled"), verdict
    assert "thermal" in verdict.lower(), verdict


def test_the_two_minute_mean_keeps_a_pause_a_gap() -> None:
    from desktop.jobs.card import rolling_mean

    time_s = np.arange(0.0, 10.0)
    values = np.array([1.0, 3.0, 1.0, 3.0, np.nan, np.nan, 2.0, 2.0, 2.0, 2.0])
    out = rolling_mean(time_s, values, 3.0)  # each point with its neighbours 1.5 s either side
    assert out[1] == (1.0 + 3.0 + 1.0) / 3 and out[3] == (1.0 + 3.0) / 2
    assert np.isnan(out[4]) and np.isnan(out[5]) and out[6] == 2.0


def test_the_rate_drop_after_each_guard_pause_is_not_blamed_on_the_power_cap() -> None:
    # A 20-minute job held at its 150 W limit (cap bit set, 149 W: normal), paused by the guard twice for 60 s.
    # It prints items over elapsed time (10 it/s while it runs), so its rate falls after each pause and stays
    # lower (8.8 it/s at the end). Only the guard's pauses made it "slower"; it is no power-cap throttle.
    from desktop.jobs.card import judge_job

    time_s = np.arange(0.0, 1200.0)
    pauses = ((300.0, 360.0), (700.0, 760.0))
    paused = np.zeros(len(time_s), dtype=bool)
    for start, end in pauses:
        paused |= (time_s >= start) & (time_s < end)
    rate = 10.0 * np.maximum(time_s - np.cumsum(paused), 1.0) / np.maximum(time_s, 1.0)
    columns = {"sm_clock_mhz": np.where(paused, 210.0, 1900.0), "power_w": np.where(paused, 12.0, 149.0),
               "temperature_c": np.where(paused, 55.0, 71.0), "utilization_gpu_pct": np.where(paused, 0.0, 100.0),
               "clock_event_reasons": np.where(paused, 0x1, 0x4).astype(np.float64)}
    verdict = judge_job(time_s, columns, np.where(paused, np.nan, rate), "it/s", pauses=pauses,
                        sm_clock_max_mhz=2040.0, power_limit_w=150.0, temp_slowdown_c=87.0)
    assert not verdict.throttled, verdict.sentence
    assert "throttled" not in verdict.sentence.lower() and "guard's pauses" in verdict.sentence, verdict.sentence
