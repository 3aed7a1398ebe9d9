"""Cloud equivalents bounded by what limits the job: a faster GPU speeds up only its GPU-bound part (Amdahl)."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.costs import CloudOffer, GpuSpec
from advisor.frame import GpuMeta, GpuSeries, HostSeries
from advisor.job_card import CloudInputs, JobInputs, job_card
from advisor.job_cloud import job_bound
from desktop.jobs.card import card_rows

T0 = 1_795_000_000.0
N = 600  # ten minutes, a sample a second
SPECS = [GpuSpec("RTX 4090 Laptop", 75.0, 16.0), GpuSpec("H100 SXM", 989.0, 80.0)]
OFFERS = [CloudOffer("RunPod", "H100 SXM", 80.0, 2.69, 1.99, "test", "2026")]
SPEED = 989.0 / 75.0  # 13.19x on the datasheet


def _gpu(util: np.ndarray, effective: np.ndarray | None = None) -> GpuSeries:
    nan = np.full(N, np.nan)
    meta = GpuMeta(index=0, uuid="GPU-0", name="NVIDIA GeForce RTX 4090 Laptop GPU", vram_total_mib=16376.0,
                   power_limit_w=150.0)
    return GpuSeries(meta=meta, time_s=T0 + np.arange(N, dtype=np.float64), duration_s=np.ones(N),
                     utilization_gpu_pct=util, utilization_mem_pct=nan, vram_used_mib=np.full(N, 6000.0),
                     temperature_c=np.full(N, 70.0), power_w=np.full(N, 90.0), energy_mj=nan, sm_clock_mhz=nan,
                     mem_clock_mhz=nan, fan_pct=nan, pcie_gen=nan, pcie_width=nan,
                     clock_event_reasons=np.zeros(N, dtype=np.int64), effective_load_pct=effective)


def _card(util: np.ndarray, *, effective: np.ndarray | None = None, cpu_pct: float | None = None):  # type: ignore[no-untyped-def]
    host = None
    if cpu_pct is not None:
        host = HostSeries(time_s=T0 + np.arange(N, dtype=np.float64), duration_s=np.ones(N),
                          cpu_pct=np.full(N, cpu_pct), ram_used_mib=np.full(N, 1.0), ram_total_mib=np.full(N, 2.0),
                          on_ac_power=np.ones(N), battery_pct=np.full(N, np.nan))
    job = JobInputs(job_id=1, name="train.py", command="python train.py", started_s=T0, ended_s=T0 + N, exit_code=0,
                    gpus=[_gpu(util, effective)], host=host)
    return job_card(job, electricity_price_per_kwh=0.17, currency="USD", cloud=CloudInputs(OFFERS, SPECS))


def test_a_job_starved_by_its_data_loader_says_so_and_gains_little_from_a_faster_gpu() -> None:
    util = np.where(np.arange(N) % 100 < 54, 100.0, 0.0)  # busy 54 % of the time: waiting on the loader the rest
    card = _card(util)
    assert card.bound == "input" and "the data loader limits this job" in card.bound_text
    h100 = card.cloud[0]
    # 600 s x (0.54 / 13.19 + 0.46) = 600 x 0.50095 = 300.6 s: 2.0x overall, not 13x.
    assert h100.hours * 3600.0 == pytest.approx(600.0 * (0.54 / SPEED + 0.46))
    assert h100.overall_speed == pytest.approx(1.0 / (0.54 / SPEED + 0.46))
    text = " ".join(t for _k, t in card_rows(card))
    assert "the data loader limits this job: a faster GPU would not help much" in text
    assert "2x overall: its GPU-bound 54 % at 13x, datasheet" in text


def test_a_job_that_only_sleeps_gets_its_own_time_in_the_cloud_not_a_datasheet_ratio() -> None:
    card = _card(np.zeros(N))  # `sleep 600`: the GPU never busy
    assert card.bound == "idle" and "mostly waits" in card.bound_text
    assert card.cloud[0].hours * 3600.0 == pytest.approx(600.0) and card.cloud[0].overall_speed == pytest.approx(1.0)


def test_busy_but_light_work_is_bounded_by_its_effective_load() -> None:
    card = _card(np.full(N, 100.0), effective=np.full(N, 40.0))  # 100 % "utilized", 40 % of its full load
    assert card.bound == "light" and "40 % of its full load" in card.bound_text
    assert card.cloud[0].hours * 3600.0 == pytest.approx(600.0 * (0.4 / SPEED + 0.6))


def test_a_saturated_cpu_is_named_and_a_gpu_bound_job_gets_the_full_speed() -> None:
    util = np.where(np.arange(N) % 100 < 50, 100.0, 0.0)
    assert _card(util, cpu_pct=97.0).bound == "cpu"
    full = _card(np.full(N, 100.0), effective=np.full(N, 100.0))
    assert full.bound == "gpu" and full.bound_text == ""
    assert full.cloud[0].overall_speed == pytest.approx(SPEED)
    assert job_bound(None, None, None).kind is None
