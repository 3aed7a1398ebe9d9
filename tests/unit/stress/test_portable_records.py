"""Portable records built on this machine: from a simulated stress run and from a job and its card."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.job_card import JobCard
from advisor.job_figures import GpuFigures
from advisor.portable_read import parse_record
from desktop.jobs.model import JobRecord
from desktop.stress.devices import GpuTarget
from desktop.stress.portable import record_from_job, record_from_stress
from desktop.stress.records import judge_run
from desktop.stress.run_model import SimClock, StressConfig
from desktop.stress.runner import StressRunner
from desktop.telemetry.model import GpuInfo
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list


def test_a_simulated_ten_minute_run_makes_a_full_record() -> None:
    clock = SimClock()
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=3)
    result = StressRunner(StressConfig(target=GpuTarget("sim"), duration_s=600.0), Sampler(backend, clock=clock.now),
                          clock=clock).run()
    verdict = judge_run(result)
    record = record_from_stress(result, verdict, price_per_hour=0.3, currency="EUR", machine="vector")
    assert record.verdict == "throttled" and record.throttled and record.unit == "TFLOP/s"
    assert record.throughput == pytest.approx(verdict.sustained)
    assert record.peak_throughput == pytest.approx(verdict.peak)
    assert record.environment.simulated and record.environment.torch is None  # the simulator runs no torch
    assert record.environment.power_limit_w == result.gpu.power_limit_enforced_w  # type: ignore[union-attr]
    assert record.power_w.mean == pytest.approx(float(np.nanmean(result.columns["power_w"])))
    assert record.temperature_c.p95 is not None and record.temperature_c.p95 > 80
    assert record.energy_j is not None and record.power_w.mean is not None
    assert record.energy_j == pytest.approx(record.power_w.mean * 600, rel=0.05)
    assert record.currency == "EUR" and record.machine == "vector" and record.latency is None
    assert parse_record(record.to_json()) == record


def _card(job: JobRecord) -> dict[str, object]:
    gpu = GpuFigures(index=0, uuid="GPU-1", name="RTX 4090 Laptop", sampled_s=600.0, busy_s=590.0, busy_share=0.98,
                     mean_util_pct=97.0, peak_vram_mib=14000.0, vram_total_mib=16376.0, headroom_mib=2376.0,
                     peak_temperature_c=87.0, mean_power_w=140.0,
                     throttle_s={"sw_power_cap": 300.0, "sw_thermal": 42.0, "hw_thermal": 0.0, "hw_power_brake": None},
                     throttle_timing="counters", energy_wh=23.3, energy_source="counter")
    card = JobCard(job_id=1, name=job.name, command="python train.py", started_s=job.started_s,
                   ended_s=job.started_s + 600.0, duration_s=600.0, exit_code=0, paused_s=0.0, pauses=0,
                   verdict="Ran 10 min; throttled 42 s by SW thermal slowdown.", gpus=(gpu,), throughput_mean=5.2,
                   throughput_unit="it/s", energy_wh=23.3, energy_cost=0.004, electricity_price_per_kwh=0.17,
                   currency="USD", cloud=(), speed_basis=None, local_tflops=None)
    return card.as_dict()


def test_a_job_and_its_card_make_a_record() -> None:
    job = JobRecord(job_id=1, name="train", argv=("python", "train.py"), started_s=1_790_000_000.0,
                    ended_s=1_790_000_600.0, exit_code=0, gpu_indices=(0,), throughput_unit="it/s")
    gpu = GpuInfo(index=0, uuid="GPU-1", name="RTX 4090 Laptop", power_limit_enforced_w=150.0,
                  driver_version="550.54.14", cuda_version="12.4")
    record = record_from_job(job, _card(job), gpu=gpu, price_per_hour=0.2, currency="USD", machine="vector")
    assert record.kind == "job" and record.workload == "train" and record.device == "0"
    assert record.throughput == 5.2 and record.unit == "it/s" and record.verdict == "completed"
    assert record.throttled is True  # 42 s of SW thermal slowdown (the power cap alone would not count)
    assert record.energy_j == pytest.approx(23.3 * 3600) and record.power_w.mean == 140.0
    assert record.temperature_c.p95 == 87.0
    assert record.environment.driver == "550.54.14" and record.environment.cuda_driver == "12.4"
    assert record.verdict_sentence.startswith("Ran 10 min")
    assert parse_record(record.to_json()) == record


def test_the_cards_figures_win_and_the_samples_give_only_the_spreads() -> None:
    # One computation per figure: the record's energy and mean power are the card's (which `rigscope run`
    # prints and `jobs show` reads); the samples only add the percentiles the card has not.
    job = JobRecord(job_id=1, name="", argv=("python", "serve.py"), started_s=0.0, ended_s=3.0, exit_code=1)
    time_s = np.array([0.0, 1.0, 2.0, 3.0])
    columns = {"power_w": np.array([100.0, 200.0, 200.0, 100.0]), "temperature_c": np.array([50.0, 60.0, 70.0, 80.0]),
               "sm_clock_mhz": np.full(4, 2000.0)}
    record = record_from_job(job, _card(job), time_s=time_s, columns=columns)
    assert record.workload == "python serve.py" and record.verdict == "failed (exit 1)"
    assert record.energy_j == pytest.approx(23.3 * 3600.0) and record.power_w.mean == 140.0
    assert record.sm_clock_mhz.p50 == 2000.0 and record.temperature_c.p50 == pytest.approx(65.0)


def test_without_a_card_the_samples_give_the_energy_and_the_guards_pauses_leave_the_spreads() -> None:
    job = JobRecord(job_id=1, name="", argv=("python", "serve.py"), started_s=0.0, ended_s=3.0, exit_code=0)
    time_s = np.array([0.0, 1.0, 2.0, 3.0])
    columns = {"power_w": np.array([100.0, 200.0, 200.0, 100.0]), "temperature_c": np.array([50.0, 60.0, 70.0, 80.0])}
    record = record_from_job(job, {}, time_s=time_s, columns=columns, pauses=((2.0, 4.0),))
    assert record.energy_j == pytest.approx(500.0)  # the GPU drew power while the job was paused too
    assert record.temperature_c.p95 is not None and record.temperature_c.p95 <= 60.0  # 2 s and 3 s paused
